"""Gateway view, alert log and help: small read-only screens."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Header, Static

from poolconsole.model.alerts import Alerts
from poolconsole.model.gateway import gateway_reports
from poolconsole.model.pool_state import PoolState
from poolconsole.model.summary import served_before
from poolconsole.ui.footer import KeysFooter
from poolconsole.ui.registry import Action, key_label
from poolconsole.ui.tables import FitTable


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


class AlertsScreen(Screen[None]):
    CSS_PATH = Path(__file__).with_name("others.tcss")

    def __init__(self, alerts: Alerts) -> None:
        super().__init__()
        self.alerts = alerts
        self.messages: dict[str, str] = {}
        """Each row's alert in words, by row key."""

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(id="alerts-summary", markup=False)
        yield FitTable({"what": 24}, id="alert-log")  # a message wider than its column ends in "…"
        yield Static(id="alert-message", markup=False)  # the row's whole message, wrapped
        yield KeysFooter()

    def on_mount(self) -> None:
        table = self.query_one("#alert-log", DataTable)
        for key, label in (("at", "Time"), ("target", "Target"), ("rule", "Rule"), ("what", "What")):
            table.add_column(label, key=key)
        table.focus()  # the arrow keys move through the routes at once
        self.refresh_view()
        self.ready = True

    def refresh_view(self) -> None:
        table = self.query_one("#alert-log", FitTable)
        rows: dict[str, tuple[str, ...]] = {}
        for event in reversed(self.alerts.log):  # newest first, each row keyed by its event
            at = dt.datetime.fromtimestamp(event.at, dt.UTC).strftime("%H:%M:%S")
            what = ("fired: " if event.fired else "") + event.message
            rows[f"{event.at!r}:{event.target}:{event.rule}:{event.fired}"] = (at, event.target, event.rule, what)
        table.show(rows)
        self.messages = {key: f"{row[0]}  {row[1]}  {row[3]}  (rule {row[2]})" for key, row in rows.items()}
        self._show_message()
        active = [f"{t}/{r}" for (t, r) in self.alerts.active]
        self.query_one("#alerts-summary", Static).update(
            f"{len(active)} active: {', '.join(active) or 'none'}   (times in UTC)"
        )

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_message()

    def _show_message(self) -> None:
        """Under the log, the highlighted alert's message in full: the table's column cuts a long one."""
        key = self.query_one("#alert-log", FitTable).highlighted()
        self.query_one("#alert-message", Static).update(self.messages.get(key or "", ""))


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
