"""Gateway view, alert log and help: small screens (the alert log's actions: silence an alert, cancel the
watcher's pending automatic action)."""

from __future__ import annotations

import asyncio
import datetime as dt
import getpass
import sqlite3
import time
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Header, Static

from poolconsole.config.models import PoolConfig
from poolconsole.model.alerts import Alerts
from poolconsole.model.gateway import gateway_reports
from poolconsole.model.pool_state import PoolState
from poolconsole.model.summary import served_before
from poolconsole.runtime.pager import ABSENT, PagerView, hms, read_pager, state_path
from poolconsole.runtime.remediation_board import Pending
from poolconsole.ui.footer import KeysFooter
from poolconsole.ui.registry import Action, key_label
from poolconsole.ui.tables import FitTable
from poolconsole.workflows import audit_log, remediation_cancel

if TYPE_CHECKING:
    from poolconsole.workflows.remediation_cancel import CancelPlan
    from poolconsole.workflows.silence import SilencePlan


class GatewayScreen(Screen[None]):
    CSS_PATH = Path(__file__).with_name("others.tcss")

    def __init__(self, state: PoolState) -> None:
        super().__init__()
        self.state = state

    def compose(self) -> ComposeResult:
        yield Header()
        with VerticalScroll():
            yield Static(id="gateway-summary", markup=False)
            # long model names are cut with "…" so that the engine's state keeps its column at 80
            yield FitTable({"model": 16, "gw": 10, "engine": 12}, id="routes")
            yield Static(id="drift", markup=False)
        yield KeysFooter()

    def on_mount(self) -> None:
        table = self.query_one("#routes", DataTable)
        for key, label in (
            ("gw", "Gateway"),
            ("model", "Model"),
            ("engine", "Engine"),
            ("host", "Host"),
            ("state", "Engine state"),
        ):
            table.add_column(label, key=key)
        table.focus()  # the arrow keys move through the routes at once
        self.refresh_view()
        self.ready = True

    def refresh_view(self) -> None:
        reports = gateway_reports(self.state)
        table = self.query_one("#routes", FitTable)
        rows: dict[str, tuple[str, ...]] = {}
        summary: list[Text] = []
        drift: list[str] = []
        if not reports:
            summary.append(Text('No LiteLLM gateway is configured (kind = "litellm").'))
        for r in reports:
            summary.append(
                Text.assemble(
                    (r.gateway, "bold"), f": {r.state or 'polling'}; liveness {r.liveness}; readiness {r.readiness}"
                )
            )
            for route in r.routes:
                before = served_before(self.state, route.model) if route.engine is None else None
                was = self.state.engines[before] if before is not None else None  # the engine down under it
                state = route.engine_state or (was.view.state if was is not None and was.view else None)
                rows[f"{r.gateway}:{route.model}"] = (
                    r.gateway,
                    route.model,
                    route.engine or before or "NONE",
                    route.host or (was.config.host if was is not None else None) or "-",
                    str(state or "-"),
                )
                if was is not None:
                    drift.append(
                        f"down: gateway route {route.model!r}: its engine {before} is {state}, no other serves it"
                    )
                elif route.unlisted:
                    drift.append(
                        f"unknown: gateway route {route.model!r}: no engine lists it, and "
                        f"{', '.join(route.unlisted)} list no models (read through Prometheus?)"
                    )
                elif route.engine is None:
                    drift.append(f"drift: gateway route {route.model!r} is served by no engine")
            drift += [f"drift: {engine} serves {model!r}, which no gateway routes" for engine, model in r.unrouted]
            drift += [f"degrade hint: {h}" for h in r.hints]
            if r.deep_health:
                summary.append(Text(f"{r.gateway}: {r.deep_health}"))
        table.show(rows)
        self.query_one("#gateway-summary", Static).update(Text("\n").join(summary))
        self.query_one("#drift", Static).update(
            "\n".join(drift) or "no drift: every route is served and every served model is routed"
        )


PAGER_EVERY_S = 3.0
"""How often the alert log reads the watcher's state file again while it is open."""
COUNTDOWN_EVERY_S = 1.0
"""...and while the watcher is about to act (a countdown on its board): its line counts each second."""


class AlertsScreen(Screen[None]):
    """The alert log: the console's alerts, newest first, and the pager's side of each (where the watcher sent
    it and when, a receiver that failed, a silence), read from the watcher's state file beside the history
    store every PAGER_EVERY_S while the screen is open. `silence` (the registry's) silences the selected one.
    Above it, the watcher's pending automatic actions ("auto-restart of X in 40 s (2 of 3 left this hour)", its
    board in the same file, read each second while there is one); `cancel_auto` cancels one."""

    CSS_PATH = Path(__file__).with_name("others.tcss")

    def __init__(
        self,
        alerts: Alerts,
        store: Path | None,
        *,
        config: PoolConfig,
        read_only: bool = False,
        audit_path: Path | None = None,
    ) -> None:
        super().__init__()
        self.alerts = alerts
        self.store = store
        """The history store the watcher's state file is beside (None: none, and so no pager's side)."""
        self.config = config
        self.read_only = read_only
        """Silencing is refused (it changes what the watcher pages)."""
        self.audit_path = audit_path
        """Where a silence is audited (None: the user's audit log)."""
        self.messages: dict[str, str] = {}
        """Each row's alert in words, by row key."""
        self.keys: dict[str, tuple[str, str]] = {}
        """Each row's (rule, target)."""
        self.pager: PagerView | None = None
        self.pager_said = "reading the watcher's state…"
        self.board: list[Pending] = []
        """The watcher's pending automatic actions, soonest first."""
        """The state file's condition in words: absent, unreadable, or where it is."""

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(id="alerts-summary", markup=False)
        yield FitTable({"what": 24}, id="alert-log")  # a message wider than its column ends in "…"
        yield Static(id="alert-message", markup=False)  # the row's whole message, wrapped
        yield KeysFooter()

    def on_mount(self) -> None:
        table = self.query_one("#alert-log", DataTable)
        for key, label in (
            ("at", "Time"),
            ("target", "Target"),
            ("rule", "Rule"),
            ("paged", "Paged"),
            ("what", "What"),
        ):
            table.add_column(label, key=key)
        table.focus()  # the arrow keys move through the routes at once
        self.refresh_view()
        self.ready = True
        self.read_pager()

    @work(group="pager", description="reading the watcher's state", exclusive=True, exit_on_error=False)
    async def read_pager(self) -> None:
        """The watcher's state file, read-only in a thread; read again PAGER_EVERY_S after each read ends."""
        try:
            if self.store is None:
                self.pager, self.pager_said = None, "no history store: the watcher's state cannot be found"
                return
            try:
                self.pager = await asyncio.to_thread(read_pager, self.store)
                self.pager_said = ABSENT if self.pager is None else f"watcher's state: {self.pager.path}"
                self.board = await asyncio.to_thread(remediation_cancel.pending, self.store)
            except sqlite3.Error as exc:
                self.pager, self.pager_said = None, f"{state_path(self.store)}: unreadable ({exc})"
                self.board = []
            if self.is_attached:
                self.refresh_view()
        finally:
            if self.is_attached:
                self.set_timer(COUNTDOWN_EVERY_S if self.board else PAGER_EVERY_S, self.read_pager)

    def refresh_view(self) -> None:
        table = self.query_one("#alert-log", FitTable)
        rows: dict[str, tuple[str, ...]] = {}
        keys: dict[str, tuple[str, str]] = {}
        now = time.time()
        pager = self.pager
        logged = set()
        for event in reversed(self.alerts.log):  # newest first, each row keyed by its event
            at = dt.datetime.fromtimestamp(event.at, dt.UTC).strftime("%H:%M:%S")
            what = ("fired: " if event.fired else "") + event.message
            key = f"{event.at!r}:{event.target}:{event.rule}:{event.fired}"
            rows[key] = (at, event.target, event.rule, self._paged(event.rule, event.target, now), what)
            keys[key] = (event.rule, event.target)
            logged.add((event.rule, event.target))
        if pager is not None:  # what the watcher holds that this console did not see fire (opened since)
            for alert in sorted(pager.alerts.values(), key=lambda a: -a.starts_at):
                if alert.key in logged:
                    continue
                key = f"pager:{alert.rule}:{alert.target}"
                what = ("fired (watcher): " if alert.firing else "cleared (watcher): ") + (
                    alert.message if alert.firing else alert.cleared or alert.message
                )
                rows[key] = (hms(alert.starts_at), alert.target, alert.rule, self._paged(*alert.key, now), what)
                keys[key] = alert.key
        table.show(rows)
        self.keys = keys
        self.messages = {}
        for key, row in rows.items():
            lines = pager.lines(*keys[key], now) if pager is not None else []
            self.messages[key] = "\n".join([f"{row[0]}  {row[1]}  {row[4]}  (rule {row[2]})", *lines])
        self._show_message()
        active = [f"{t}/{r}" for (t, r) in self.alerts.active]
        summary = [f"{p.words(now)}{self._cancel_hint()}" for p in self.board]  # the first thing to read
        summary += [f"{len(active)} active: {', '.join(active) or 'none'}   (times in UTC)", self.pager_said]
        summary += pager.failures() if pager is not None else []
        self.query_one("#alerts-summary", Static).update("\n".join(summary))

    def _paged(self, rule: str, target: str, now: float) -> str:
        """The Paged column: failed, silenced, or when it was last sent."""
        if self.pager is None:
            return "-"
        lines = self.pager.lines(rule, target, now)
        if any(line.startswith("failed") for line in lines):
            return "FAILED"
        if any(line.startswith("silenced") for line in lines):
            return "silenced"
        alert = self.pager.alerts.get((rule, target))
        if alert is not None and alert.sent:
            return f"sent {hms(max(alert.sent.values()))}"
        return "-"

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_message()

    def _show_message(self) -> None:
        """Under the log, the highlighted alert's message in full (the table's column cuts a long one), with
        the pager's side of it."""
        key = self.query_one("#alert-log", FitTable).highlighted()
        self.query_one("#alert-message", Static).update(self.messages.get(key or "", ""))

    # -- silence (the registry's `silence`: confirmed, audited, refused read-only) ------------------------
    def action_silence(self) -> None:
        self.silence()

    def silence(self) -> None:
        """The selected alert: a duration, then a confirmation of exactly what will happen, then it is done."""
        from poolconsole.ui.screens.action import ConfirmAction, ProfilePicker
        from poolconsole.workflows import silence

        if self.read_only:
            self.notify("read-only console: silencing an alert is refused", severity="warning")
            return
        key = self.query_one("#alert-log", FitTable).highlighted()
        if key is None or key not in self.keys:
            self.notify("select an alert first", severity="warning")
            return
        rule, target = self.keys[key]
        held = self.pager.alerts.get((rule, target)) if self.pager is not None else None
        store = self.store

        def confirmed(plan: silence.SilencePlan, yes: bool | None) -> None:
            if yes:
                self._silence(plan)

        def picked(choice: str | None) -> None:
            if choice is None:
                return
            plan = silence.plan(
                self.config, store, rule, target, choice, getpass.getuser(), time.time(),
                dict(held.labels) if held is not None else None,
            )  # fmt: skip
            if plan.refused is not None:
                self.notify(plan.refused, severity="error")
                return
            dialog = ConfirmAction(plan.question, list(plan.lines), yes="Silence (y)")
            self.app.push_screen(dialog, partial(confirmed, plan))

        question = f"Silence {rule} on {target} for how long?"
        self.app.push_screen(ProfilePicker("silence", list(silence.DURATIONS), None, question), picked)

    # -- cancel the watcher's pending automatic action (the registry's `cancel_auto`) -----------------
    def _cancel_hint(self) -> str:
        key = self.config.keys.get("cancel_auto", "X")
        return "" if self.read_only else f"   ({key_label(key)} cancels)"

    def action_cancel_auto(self) -> None:
        """The selected alert's engine's pending action, else the next due: a confirmation, then it is done."""
        from poolconsole.ui.screens.action import ConfirmAction

        if self.read_only:
            self.notify("read-only console: cancelling an automatic action is refused", severity="warning")
            return
        if self.store is None or not self.board:
            self.notify("the watcher is about to do nothing: no automatic action to cancel", severity="warning")
            return
        key = self.query_one("#alert-log", FitTable).highlighted()
        target = self.keys[key][1] if key in self.keys else None
        row = next((p for p in self.board if p.engine == target), self.board[0])
        plan = remediation_cancel.plan(self.store, row, getpass.getuser(), time.time())

        def confirmed(yes: bool | None) -> None:
            if yes:
                self._cancel(plan)

        self.app.push_screen(ConfirmAction(plan.question, list(plan.lines), yes="Cancel it (y)"), confirmed)

    @work(group="cancel_remediation", description="cancelling an automatic action", exit_on_error=False)
    async def _cancel(self, plan: CancelPlan) -> None:
        outcome = await remediation_cancel.run(plan, self.audit_path or audit_log.default_path())
        self.notify(outcome.detail, severity="information" if outcome.ok else "error", timeout=10)
        # the board is read again within COUNTDOWN_EVERY_S: the watcher drops the row as it hears the cancel

    @work(group="silence", description="silencing an alert", exclusive=True, exit_on_error=False)
    async def _silence(self, plan: SilencePlan) -> None:
        from poolconsole.workflows import silence

        audit_path = self.audit_path or audit_log.default_path()
        outcome = await silence.run(plan, self.store, audit_path)
        said = f"silence {plan.audit_target}: {outcome.detail}"
        self.notify(said, severity="information" if outcome.ok else "error", timeout=10)
        self.read_pager()


class HelpScreen(Screen[None]):
    CSS_PATH = Path(__file__).with_name("others.tcss")

    def __init__(self, actions: list[Action], keymap: dict[str, str], read_only: bool) -> None:
        super().__init__()
        self.actions = actions
        self.keymap = keymap
        self.read_only = read_only

    def compose(self) -> ComposeResult:
        yield Header()
        yield FitTable({"what": 24}, id="help")  # a help line wider than the screen ends in "…"
        yield Static(id="help-what", markup=False)  # the highlighted action's words whole, wrapped
        yield Static(
            "Ctrl+P opens the command palette (same actions, and themes). Keys are remappable with a [keys] "
            "table in hosts.toml."
            + ("  Read-only mode: actions that change the pool are hidden." if self.read_only else ""),
            id="help-note",
            markup=False,
        )
        yield KeysFooter()

    def on_mount(self) -> None:
        table = self.query_one("#help", FitTable)
        for key, label in (("key", "Key"), ("id", "Action id"), ("what", "What it does")):
            table.add_column(label, key=key)
        table.show(
            {a.id: (key_label(self.keymap.get(a.id, a.key)), a.id, f"{a.title}: {a.help}") for a in self.actions}
        )
        self._show_what()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_what()

    def _show_what(self) -> None:
        """Under the table, the highlighted action's words whole: its column cuts the longer ones ("on a group
        line: fold or un…"), and this screen is where a newcomer reads them."""
        table = self.query_one("#help", FitTable)
        action = self.actions[table.cursor_row] if 0 <= table.cursor_row < len(self.actions) else None
        words = f"{key_label(self.keymap.get(action.id, action.key))}  {action.title}: {action.help}" if action else ""
        self.query_one("#help-what", Static).update(words)
