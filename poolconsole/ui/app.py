"""The console app: wiring. The live pool (poll loops, state, alerts) is the headless runtime's
(poolconsole.runtime.live); the app subscribes to it, draws the visible screen from the model once a
second, toasts what fired, and calls into ops for the actions."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from textual import events, work
from textual.app import App
from textual.command import CommandPalette, Provider
from textual.css.query import NoMatches
from textual.notifications import SeverityLevel
from textual.screen import ModalScreen, Screen
from textual.worker import Worker, WorkerState

from poolconsole.collect.ssh import SSHPool
from poolconsole.config.models import Engine, EngineKind, PoolConfig
from poolconsole.model.alerts import AlertEvent
from poolconsole.model.events import EventLog
from poolconsole.model.hosts import HostSnapshot
from poolconsole.model.notices import summarise
from poolconsole.model.ollama import resident_marks
from poolconsole.model.pool_state import HISTORY_POINTS
from poolconsole.model.snapshots import EngineSnapshot
from poolconsole.ops import audit
from poolconsole.runtime.live import Backlog, LivePool, Update
from poolconsole.runtime.recording import Recording
from poolconsole.runtime.store import Store, StoreBusy, StoredHistory, StoreProblem, read_history
from poolconsole.ui import registry, themes
from poolconsole.ui.palette import Entry, PoolCommands
from poolconsole.ui.screens.overview import OverviewScreen

if TYPE_CHECKING:  # the other screens and the actions are imported where first used, not at start-up
    from poolconsole.ops.smoke.checks import CheckResult
    from poolconsole.runtime.replay import Replay
    from poolconsole.ui.screens.action import ActionScreen
    from poolconsole.ui.screens.smoke import SmokeScreen
    from poolconsole.workflows.plan import Plan
    from poolconsole.workflows.workspace import Workspace

REDRAW_S = 1.0  # the poll cadence: redrawing faster only burns CPU
LEAVE_S = 5.0
"""Quitting waits this long at most for the stopped actions to write their audit entries."""
FILL_LATEST_S = 2.0
"""The charts are filled from the history store after the first frame with data, or this long after launch."""


PRELOAD_KEEP_ALIVES = ("5m", "30m", "1h", "24h", "-1")
"""The keep-alives offered when preloading an Ollama model."""


class PoolApp(App[None]):
    TITLE = "poolconsole"
    CSS_PATH = Path(__file__).with_name("app.tcss")
    BINDINGS = registry.bindings()  # type: ignore[assignment]
    # The palette: the registry's actions and the themes, shown as plain text.
    COMMANDS: ClassVar[set[type[Provider] | Callable[[], type[Provider]]]] = {PoolCommands}

    def __init__(
        self,
        config: PoolConfig,
        *,
        read_only: bool = False,
        live: bool = True,
        clock: Callable[[], float] = time.time,
        theme_state: Path | None = None,
        subtitle: str = "",
        hint: str | None = None,
        store: Path | None = None,
        replay: Replay | None = None,
        started: Backlog | None = None,
    ) -> None:
        self.replay = replay
        """A recording played back (`poolconsole replay`): its state is shown, nothing is polled or changed."""
        read_only = read_only or replay is not None
        live = live and replay is None
        self.read_only = read_only
        self.hint = hint
        """A line shown above the overview's table (the demo says how to point the console at a real pool)."""
        super().__init__()
        self.config = config
        self.live = live
        self.runtime = LivePool(config, clock=clock) if started is None else started.runtime
        self._started = started
        """A runtime already started (ui.launch: the polls go out before the UI loads), with what it told
        before this app subscribed; the app takes both over as it mounts."""
        self.state = self.runtime.state if replay is None else replay.state
        self.alerts = self.runtime.alerts if replay is None else replay.alerts
        self.events: EventLog = self.runtime.events if replay is None else replay.events
        """The timeline: the runtime's (restarts, alerts, and the actions and smoke runs started here), or
        what a recording played back shows (restarts and alerts)."""
        if started is None:
            self.runtime.subscribe(self._heard)
        self.theme_state = theme_state
        self.window_index = 0
        self.sub_title = subtitle + ("  [read-only]" if read_only else "")
        self._dirty = False
        self._drawn_data = False
        self._fill_pending: Callable[[], object] | None = None
        """The charts' fill from the history store, until it starts (after the first frame with data)."""
        self._fired: list[AlertEvent] = []
        self._action_screens: list[ActionScreen] = []
        """The screens of actions started here (those with no outcome yet are running)."""
        self._smoke_screen: SmokeScreen | None = None
        """The last smoke run's screen (m and M open it again while its run goes on)."""
        self.smoke_db: Path | None = None
        self.audit_path: Path | None = None
        self.store_path = store
        """The history store a live console records into and fills its charts from (None: none)."""
        self.recording: Recording | None = None
        """The history store being recorded into (opened in a thread at mount)."""

    @property
    def ssh(self) -> SSHPool | None:
        return self.runtime.ssh

    @property
    def history_store(self) -> Store | None:
        """The history store, once open."""
        return self.recording.store if self.recording is not None else None

    # -- start-up ------------------------------------------------------------------------------------
    def on_mount(self) -> None:
        names = []
        for theme in themes.load_themes():
            self.register_theme(theme)
            names.append(theme.name)
        self.pool_themes = names or ["textual-dark"]
        remembered = themes.remembered_theme(self.theme_state)
        default = themes.DEFAULT if themes.DEFAULT in names else self.pool_themes[0]
        self.theme = remembered if remembered in self.available_themes else default
        if self.config.keys:
            problems = registry.keymap_problems(dict(self.config.keys))
            for problem in problems:  # a minute on screen: the console starts anyway, on the default keys there
                self.notify(f"{problem} (`poolconsole check-config` lists every problem)", severity="error", timeout=60)
            known = {a.id for a in registry.ACTIONS}
            self.set_keymap({k: v for k, v in self.config.keys.items() if k in known and v.strip()})
        # Pushed once the app's start-up is done, not during it: Textual holds every repaint back until its
        # start-up ends, and a screen pushed here is laid out and rendered inside it (a frame thrown away),
        # then rendered again with the first data. Pushed after it, the first frame drawn is the one with data.
        self.call_later(self.push_screen, OverviewScreen(self.state, self.alerts, self.events))
        if self.replay is not None:
            self._play(self.replay)
        self.set_interval(REDRAW_S, self._redraw)
        if self.live:
            self._open_history()
            self._load_audit()
            if self._started is None:
                self.runtime.start()
            else:
                self._started.hand_over(self._heard)
            every = self.config.settings.litellm_health_interval_s
            if every > 0 and any(e.kind is EngineKind.LITELLM for e in self.config.engines):
                self.notify(
                    f"LiteLLM deep /health every {every:g} s: each probe calls every deployment (spends tokens)",
                    severity="warning",
                    timeout=10,
                )

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = False,
    ) -> None:
        """Notifications carry data (engine errors, host names, "[N/A]"): plain text unless asked."""
        super().notify(message, title=title, severity=severity, timeout=timeout, markup=markup)

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return dict(themes.SEMANTIC)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """The one place worker failures land: a broken loop is reported, the console keeps running."""
        if event.state is WorkerState.ERROR and event.worker.error is not None:
            # each worker's description says what it was ("a poll loop stopped" had named a smoke run's failure)
            self.notify(f"{event.worker.description} stopped: {event.worker.error}", severity="error", timeout=10)

    async def on_unmount(self) -> None:
        await self.runtime.stop()
        if self.recording is not None:  # one still opening gets what was held, then is closed
            await self.recording.close()

    def _open_history(self) -> None:
        """The history store records every poll (unless `poolconsole record` already writes it); the charts
        are filled from what it holds, and those of engines read from `[prometheus]` from its range queries.
        It opens in a thread (runtime.recording): the polls applied meanwhile are held for it."""
        if self.store_path is None:
            self._fill_prometheus_only()
            return
        loop = asyncio.get_running_loop()

        def told(message: str) -> None:  # from the writer thread
            loop.call_soon_threadsafe(partial(self.notify, message, severity="error", timeout=10))

        self.recording = Recording(self.runtime, self.store_path, on_problem=told)
        self._take_store(self.recording)

    @work(group="history-store", description="opening the history store", exit_on_error=False)
    async def _take_store(self, recording: Recording) -> None:
        match await recording.opened():
            case Store() | StoreBusy():  # StoreBusy: another process records this store, its rows fill the charts
                self._schedule_fill(recording.path)
            case StoreProblem() as problem:
                self.notify(f"{problem}: no history recorded", severity="error", timeout=10)
                self._fill_prometheus_only()
            case error:
                self.notify(f"the history store {recording.path} did not open: {error!r}", severity="error")
                self._fill_prometheus_only()

    def _fill_prometheus_only(self) -> None:
        """No store to fill the charts from: those of engines read from `[prometheus]` still get its ranges."""
        if any(e.read == "prometheus" for e in self.config.engines):
            self._schedule_fill(None)

    def _schedule_fill(self, path: Path | None) -> None:
        # Read once the first polls are on screen (or after FILL_LATEST_S): the read is CPU that would
        # otherwise delay the first frame with data; the charts take the stored points before the live ones.
        self._fill_pending = partial(self._fill_history, path, self.state.clock())
        if self._drawn_data:  # the store opened after the first poll was applied: no reason to wait
            self.call_after_refresh(self._start_fill)
        else:
            self.set_timer(FILL_LATEST_S, self._start_fill)

    def _start_fill(self) -> None:
        fill, self._fill_pending = self._fill_pending, None
        if fill is not None:
            fill()

    @work(group="history", description="filling the charts from the history store", exclusive=True, exit_on_error=False)
    async def _fill_history(self, path: Path | None, until: float) -> None:
        since = until - HISTORY_POINTS * self.config.settings.poll_interval_s
        try:
            stored = StoredHistory()
            if path is not None:
                stored = await asyncio.to_thread(read_history, path, self.config, since, until)
        except StoreProblem as exc:
            self.notify(f"history not loaded: {exc}", severity="warning", timeout=10)
            stored = StoredHistory()
        if self.config.prometheus is not None:  # its modules load only for a pool that has one
            from poolconsole.runtime.prometheus_history import with_prometheus_history

            for problem in await with_prometheus_history(self.config, stored, until):
                self.notify(problem, severity="warning", timeout=10)
        self.runtime.fill_history(stored)
        self._dirty = True

    @work(group="audit-events", description="reading the audit log", exclusive=True, exit_on_error=False)
    async def _load_audit(self) -> None:
        """The audit log's latest actions (this console's earlier ones, the CLI's) into the timeline, and the
        profile each engine's last promoted rollover left it on (what the overview and detail show)."""
        path = self.audit_path or audit.default_path()
        try:
            found = await asyncio.to_thread(audit.entries, path, 50)
            active = await asyncio.to_thread(audit.active_profiles, path)
        except audit.AuditUnreadable as exc:
            self.notify(f"the events timeline has no past actions: {exc}", severity="warning", timeout=8)
            return
        self.events.audited((e.at, e.action, e.target, e.outcome, e.detail) for e in found)
        for name, profile in active.items():
            track = self.state.engines.get(name)
            if track is not None and any(p.name == profile for p in track.config.profiles):
                track.active_profile = profile
        self._changed()

    # -- results ------------------------------------------------------------------------------------
    def apply_engine(self, snapshot: EngineSnapshot) -> None:
        """A result from outside the runtime's loops (tests, replay): applied as the loops apply theirs."""
        self.runtime.apply_engine(snapshot)

    def apply_host(self, snapshot: HostSnapshot) -> None:
        self.runtime.apply_host(snapshot)

    def _heard(self, update: Update) -> None:
        """Told by the runtime, once per applied result: the screen redraws on the next tick (the first
        result at once, so the first frame with data does not wait for a tick); what fired is toasted."""
        self._changed(polled=True)
        if update.kind == "restart" and update.message:
            self.notify(f"{update.target}: {update.message}", title="restart", severity="warning", timeout=8)
        elif update.kind == "problem" and update.message:
            self.notify(update.message, severity="error", timeout=10)
        self._fired.extend(e for e in update.events if e.fired)

    def _changed(self, polled: bool = False) -> None:
        """The model changed: the screen redraws on the next tick, the first poll result at once (not the
        audit log's entries read at launch, which came first and left the first data to the next tick)."""
        self._dirty = True
        if polled and not self._drawn_data:
            self._drawn_data = True
            self.call_later(self._redraw)
            self.call_after_refresh(self._start_fill)

    def _redraw(self) -> None:
        """Coalesced: however many results arrived, the visible screen redraws once, and what fired since
        the last tick is one notice per rule ("5 targets queueing: ..."), never one toast per target."""
        if self._fired:
            fired, self._fired = self._fired, []
            for line in summarise(fired):
                self.notify(line, title="alert", severity="warning", timeout=6)
            if self.config.alerts.bell:
                self.bell()
        if not self._dirty:
            return
        self._dirty = False
        self.refresh_screen()

    def refresh_screen(self) -> None:
        screen = self.screen
        if not getattr(screen, "ready", False):
            return  # not composed yet: it draws itself when it mounts
        for method in ("refresh_rows", "refresh_view"):
            if hasattr(screen, method):
                try:
                    getattr(screen, method)()
                except NoMatches:
                    return  # the screen is being torn down (quitting, or popped between two ticks)

    # -- actions (the registry binds keys and the palette to these) ----------------------------------
    def _overview(self) -> OverviewScreen | None:
        return next((s for s in self.screen_stack if isinstance(s, OverviewScreen)), None)

    def action_open_detail(self) -> None:
        """Enter: the selected row's detail; on a group line with rows under it, fold or unfold them."""
        overview = self._overview()
        key = overview.selected() if overview else None
        if key is not None and isinstance(self.screen, OverviewScreen) and not self.screen.toggle_group(key):
            self.open_detail(key)

    def open_detail(self, key: str) -> None:
        from poolconsole.ui.screens.detail import DetailScreen

        if isinstance(self.screen, OverviewScreen) and not key.startswith("model:"):
            self.push_screen(DetailScreen(self.state, key, self.window_index))

    def action_group(self) -> None:
        if isinstance(self.screen, OverviewScreen):
            self.screen.next_grouping()

    def action_collapse(self) -> None:
        if isinstance(self.screen, OverviewScreen):
            self.screen.toggle_group(self.screen.selected(), from_member=True)

    def action_collapse_all(self) -> None:
        if isinstance(self.screen, OverviewScreen):
            self.screen.toggle_all()

    def action_problems(self) -> None:
        if isinstance(self.screen, OverviewScreen):
            self.screen.toggle_problems()

    def action_filter(self) -> None:
        if isinstance(self.screen, OverviewScreen):
            self.screen.open_filter()

    def action_sort(self) -> None:
        if isinstance(self.screen, OverviewScreen):
            self.screen.next_sort()

    def action_attention(self) -> None:
        if isinstance(self.screen, OverviewScreen):
            self.screen.toggle_attention()

    def action_gateway(self) -> None:
        from poolconsole.ui.screens.others import GatewayScreen

        self._replace_top(GatewayScreen(self.state))

    def action_alerts(self) -> None:
        from poolconsole.ui.screens.others import AlertsScreen

        self._replace_top(AlertsScreen(self.alerts))

    def action_silence(self) -> None:
        from poolconsole.ui.screens.others import AlertsScreen

        if isinstance(self.screen, AlertsScreen):
            self.screen.silence()

    def action_palette(self) -> None:
        """`:` (as in k9s and vim): the command palette, as Ctrl+P opens it."""
        self.action_command_palette()

    def action_events(self) -> None:
        from poolconsole.ui.screens.events import EventsScreen

        self._replace_top(EventsScreen(self.events))

    def action_toggle_events(self) -> None:
        overview = self._overview()
        if overview is not None and isinstance(self.screen, OverviewScreen):
            overview.toggle_events()

    def action_help(self) -> None:
        from poolconsole.ui.screens.others import HelpScreen

        shown = registry.visible(self.read_only, self.replay is not None)
        self._replace_top(HelpScreen(shown, dict(self.config.keys), self.read_only))

    def _replace_top(self, screen: Screen[None]) -> None:
        if not isinstance(self.screen, OverviewScreen):
            self.pop_screen()
        self.push_screen(screen)

    def _show_action(self, screen: Screen[None]) -> None:
        """An action's screen over the one it was started from (the overview or the engine's detail, which
        Escape then returns to); a finished action's screen is replaced, not stacked."""
        from poolconsole.ui.screens.action import ActionScreen
        from poolconsole.ui.screens.smoke import SmokeScreen

        if isinstance(self.screen, ActionScreen | SmokeScreen):
            self.pop_screen()
        if isinstance(screen, ActionScreen):
            self._action_screens = [s for s in self._action_screens if s.outcome is None] + [screen]
        self.push_screen(screen)

    def _smoke_running(self) -> bool:
        """A smoke run is going on: its screen is opened again (closed, the run went on), not a second run
        started (one at a time: a new one would have cancelled it, leaving no record)."""
        screen = self._smoke_screen
        if screen is None or screen.finished:
            return False
        if screen in self.screen_stack:  # under another screen (help, say): back down to it, not pushed twice
            while self.screen is not screen:
                self.pop_screen()
        else:
            self._show_action(screen)
        self.notify("a smoke test is already running: showing it (one run at a time)", timeout=3)
        return True

    def action_smoke(self) -> None:
        if self._smoke_running():
            return
        overview = self._overview()
        key = overview.selected() if overview else None
        if key is None or not key.startswith("engine:"):
            self.notify("select an engine row to smoke-test it (M tests the whole pool)", severity="warning")
            return
        self._start_smoke([key.removeprefix("engine:")])

    def action_smoke_all(self) -> None:
        """The whole pool, engine after engine and through the gateway: real requests to every model, for
        minutes. Asked first, with what it sends (it had started at the keypress)."""
        from poolconsole.ui.screens.action import ConfirmAction

        if self._smoke_running():
            return
        engines = [e.name for e in self.config.engines if e.kind is not EngineKind.LITELLM]
        gateways = [e.name for e in self.config.engines if e.kind is EngineKind.LITELLM]
        lines = [
            f"engines: {', '.join(engines) or 'none'}",
            *([f"through the gateway: {', '.join(gateways)}"] if gateways else []),
            "each model: a chat, streamed chats at concurrency 1 and 4 (TTFT, tok/s), a completion, and the "
            "tool and JSON checks its [engines.smoke] asks for (an embedding model: an embedding)",
            "real requests: they spend tokens and add load while they run (a few minutes for a whole pool);",
            "the results are stored, and compared with the last run's (regressions are named)",
        ]

        def go(yes: bool | None) -> None:
            if yes:
                self._start_smoke([])

        self.push_screen(ConfirmAction("Smoke-test the whole pool?", lines, yes="Run it (y)"), go)

    def _start_smoke(self, targets: list[str]) -> None:
        from poolconsole.ui.screens.smoke import SmokeScreen

        old, screen = self._smoke_screen, SmokeScreen(targets)
        self._smoke_screen = screen
        # installed: closing it while the run goes on keeps it whole for m / M to open again (a popped screen
        # is removed, and pushed again it came back blank over a frozen frame)
        self.install_screen(screen, name=f"smoke-{id(screen)}")
        self._show_action(screen)
        if old is not None and self.is_screen_installed(old):
            self.call_after_refresh(self._drop_screen, old)
        self._smoke(screen, targets)

    def _drop_screen(self, screen: Screen[None]) -> None:
        """An installed screen no longer wanted: uninstalled and removed once it is off the stack (an
        installed screen stays mounted when popped; uninstalling alone leaves it so)."""
        if screen in self.screen_stack:  # still under another one: tried again in a second
            self.set_timer(1.0, partial(self._drop_screen, screen))
            return
        self.uninstall_screen(screen)
        screen.remove()

    @work(group="smoke", description="the smoke test", exclusive=True, exit_on_error=False)
    async def _smoke(self, screen: SmokeScreen, targets: list[str]) -> None:
        """One smoke run at a time (workflows.smoke, as `poolconsole smoke` runs it, on this console's live
        state); results land in the screen as they finish, then in the store."""
        from poolconsole.ops.smoke import store
        from poolconsole.ops.smoke.runner import SmokeOptions
        from poolconsole.workflows import smoke

        options = SmokeOptions(tuple(targets), via_gateway=not targets, concurrency=(1, 4), requests=4)
        done_at: dict[str, float] = {}

        def landed(result: CheckResult) -> None:
            done_at[result.target] = self.state.clock()  # its verdict's time in the events: when it finished
            screen.add(result)

        try:
            db = self.smoke_db or store.default_db()
            done = await smoke.run(self._workspace(), options, db, landed=landed, state=self.state)
            screen.finish(done.changes, done.store_error)
            worse = Counter(c.target for c in done.changes if c.regression)
            verdicts = [(r.target, r.check, r.passed, r.reason) for r in done.results]
            self.events.smoke(self.state.clock(), verdicts, worse, done_at)
            self._changed()
            self.notify(
                f"smoke test {'passed' if done.passed else 'FAILED'}: {len(done.results)} checks",
                severity="information" if done.passed else "error",
            )
        except Exception as exc:  # reported on the screen: the console keeps running
            screen.finish([], f"smoke test stopped: {type(exc).__name__}: {exc}")

    # -- destructive actions --------------------------------------------------------------------------
    def _selected_engine(self) -> Engine | None:
        overview = self._overview()
        key = overview.selected() if overview else None
        engine = next((e for e in self.config.engines if key == f"engine:{e.name}"), None)
        if engine is None:
            self.notify("select an engine row first", severity="warning")
        return engine

    def _workspace(self) -> Workspace:
        """What the workflows run in: this console's config, audit log, read-only flag and SSH connections."""
        from poolconsole.workflows.workspace import Workspace

        return Workspace(self.config, self.audit_path or audit.default_path(), self.read_only, self.ssh)

    def _confirm(self, plan: Plan) -> None:
        """The plan in a confirmation; on yes, run in one generic worker with its progress screen."""
        from poolconsole.ui.screens.action import ActionScreen, ConfirmAction

        if plan.refused is not None:
            self.notify(plan.refused, severity="error")
            return

        def go(yes: bool | None) -> None:
            if yes:
                screen = ActionScreen(plan.title)
                self._show_action(screen)
                self._act(screen, plan)

        self.push_screen(ConfirmAction(plan.question, list(plan.lines), runnable=plan.blocked is None), go)

    def action_restart(self) -> None:
        from poolconsole.workflows import restart

        engine = self._selected_engine()
        if engine is not None:
            self._confirm(restart.plan(self._workspace(), engine.name, self.state))

    @work(group="actions-ui", description="the action's dialog", exclusive=True, exit_on_error=False)
    async def action_rollover(self) -> None:
        from poolconsole.ui.screens.action import ProfilePicker
        from poolconsole.workflows import rollover

        engine = self._selected_engine()
        if engine is None:
            return
        if not engine.profiles or engine.control is None:
            self.notify(f"{engine.name} has no profiles or no [engines.control]", severity="error")
            return
        ws = self._workspace()
        active = await rollover.active_profile(ws, engine.name)
        live, kv = await rollover.measure(ws, engine.name, self.state)  # the engine's own KV figures, for the cliff

        def picked(name: str | None) -> None:
            if name is not None:
                self._confirm(rollover.plan(ws, engine.name, name, active=active, live=live, kv=kv, state=self.state))

        self.push_screen(ProfilePicker(engine.name, [p.name for p in engine.profiles], active), picked)

    @work(group="actions", description="the action", exit_on_error=False)
    async def _act(self, screen: ActionScreen, plan: Plan) -> None:
        """Any workflow's plan, run with its progress on `screen`; the outcome said on the screen, in the events
        and in a toast."""
        from poolconsole.ops.lifecycle import ActionRefused
        from poolconsole.workflows import ollama, restart, rollover

        flows = {
            "restart": restart.run,
            "rollover": rollover.run,
            ollama.UNLOAD: ollama.run,
            ollama.PRELOAD: ollama.run,
        }
        self.alerts.action_started(plan.engine, self.state.clock())
        asked = self.state.clock()
        try:
            outcome = await flows[plan.action](self._workspace(), plan, screen.progress)
            screen.finish(outcome.outcome, outcome.detail)
            if outcome.outcome == "ok":
                self._after(plan, asked)
            self.events.action(self.state.clock(), outcome.action, plan.engine, outcome.outcome, outcome.detail)
            self.notify(
                f"{outcome.action} {plan.engine}: {outcome.outcome}",
                severity="information" if outcome.outcome == "ok" else "error",
            )
        except ActionRefused as exc:
            screen.finish("refused", str(exc))
            self.events.action(self.state.clock(), plan.action, plan.engine, "refused", str(exc))
        finally:
            self.alerts.action_ended(plan.engine, self.state.clock())
            self._changed()

    def _after(self, plan: Plan, asked: float) -> None:
        """What a successful action changes in the pool's state before the next poll shows it."""
        track = self.state.engines[plan.engine]
        if plan.action == "rollover" and plan.profile is not None:
            track.active_profile = plan.profile
        elif plan.model is not None:
            if plan.keep_alive is None:  # unloaded here: its leaving is said as such
                track.unloaded_here[plan.model] = asked
            self.runtime.poll_now()  # the next /api/ps shows it on screen

    # -- Ollama residency -----------------------------------------------------------------------------
    def _selected_ollama(self) -> Engine | None:
        engine = self._selected_engine()
        if engine is not None and engine.kind is not EngineKind.OLLAMA:
            self.notify(f"{engine.name} is not an Ollama instance: nothing to load or unload", severity="warning")
            return None
        return engine

    def action_ollama_unload(self) -> None:
        from poolconsole.ui.screens.action import ProfilePicker
        from poolconsole.workflows import ollama  # httpx: loaded when first used

        engine = self._selected_ollama()
        if engine is None:
            return
        residency = self.state.engines[engine.name].residency
        loaded = [m.name for m in residency.models] if residency is not None else []
        if not loaded:
            self.notify(f"{engine.name}: no model is resident (as its last /api/ps said)", severity="warning")
            return

        def picked(model: str | None) -> None:
            if model is not None:
                self._confirm(ollama.plan_unload(self._workspace(), engine.name, model))

        self.push_screen(ProfilePicker(engine.name, loaded, None, f"Unload which model of {engine.name}?"), picked)

    def action_ollama_preload(self) -> None:
        from poolconsole.ui.screens.action import ProfilePicker
        from poolconsole.workflows import ollama  # httpx: loaded when first used

        engine = self._selected_ollama()
        if engine is None:
            return
        track = self.state.engines[engine.name]
        on_disk = list(track.view.models) if track.view is not None else []  # /api/tags
        if not on_disk:
            self.notify(f"{engine.name}: no model known on disk (its /api/tags)", severity="warning")
            return
        server = track.ollama_server
        resident = resident_marks(track.residency, server, self.state.clock()) if track.residency else {}

        def keep(model: str | None) -> None:
            if model is None:
                return
            default = server.keep_alive_text() if server is not None else "n/a"
            question = f"Keep {model} loaded how long? (server's OLLAMA_KEEP_ALIVE: {default}; -1: until unloaded)"

            def chosen(keep_alive: str | None) -> None:
                if keep_alive is not None:
                    self._confirm(ollama.plan_preload(self._workspace(), engine.name, model, keep_alive))

            self.push_screen(ProfilePicker(engine.name, list(PRELOAD_KEEP_ALIVES), None, question), chosen)

        question = f"Preload which model on {engine.name}? (a resident one: its keep-alive is set anew)"
        self.push_screen(ProfilePicker(engine.name, on_disk, None, question, marks=resident), keep)

    def action_ledger(self) -> None:
        """The ledger of the history store: the one recorded into, or the recording played back (on its
        clock). It only reads, so it is the same in --read-only."""
        from poolconsole.ui.screens.ledger import LedgerScreen

        path = self.replay.reader.path if self.replay is not None else self.store_path
        if path is None:
            self.notify("no history store: the ledger reads one ([store] in hosts.toml, or `poolconsole record`)")
            return
        self._replace_top(LedgerScreen(path, self.state.clock(), self.config.ledger))

    # -- the engine's log and the exposure audit (read-only) ------------------------------------------
    def action_logs(self) -> None:
        """The engine of the detail screen, or of the overview's selected row: its log read and followed."""
        from poolconsole.collect.engine_logs import LogsUnavailable, follow_logs, log_plan, read_logs
        from poolconsole.ui.screens.detail import DetailScreen
        from poolconsole.ui.screens.logs import LogScreen

        screen = self.screen
        track = screen.engine if isinstance(screen, DetailScreen) else None
        if track is None and not isinstance(screen, OverviewScreen):
            return
        engine = track.config if track is not None else self._selected_engine()
        if engine is None:
            return
        host = self.config.host(engine.host)
        if self.replay is not None or self.ssh is None or host is None:
            why = "a replay has no live pool" if self.replay is not None else "no SSH to its host"
            self.notify(f"{engine.name}: its log is read over SSH from its host ({why})", severity="warning")
            return
        try:
            source = log_plan(engine, None, 1, 1).source
        except LogsUnavailable as exc:
            self.notify(exc.short, severity="warning", timeout=10)  # whole: a toast cuts the long words
            return
        conn = self.ssh.connections.get(host.name) or self.ssh.add(host)
        self.push_screen(
            LogScreen(
                engine.name,
                source,
                partial(read_logs, conn, engine),
                lambda on_line: follow_logs(conn, engine, on_line, lines=1),
            )
        )

    def action_log_find(self) -> None:
        from poolconsole.ui.screens.logs import LogScreen

        if isinstance(self.screen, LogScreen):
            self.screen.open_search()

    def action_log_next(self, forward: bool) -> None:
        from poolconsole.ui.screens.logs import LogScreen

        if isinstance(self.screen, LogScreen):
            self.screen.next_match(forward)

    def action_log_error(self) -> None:
        from poolconsole.ui.screens.logs import LogScreen

        if isinstance(self.screen, LogScreen):
            self.screen.last_error()

    def action_log_follow(self) -> None:
        from poolconsole.ui.screens.logs import LogScreen

        if isinstance(self.screen, LogScreen):
            self.screen.toggle_follow()

    def action_security(self) -> None:
        """The exposure audit (ops.exposure), never destructive; the operator picks whether the one-token
        completion is sent."""
        from poolconsole.ui.screens.action import ProfilePicker
        from poolconsole.ui.screens.security import COMPLETION_CHOICES, SecurityScreen

        if self.replay is not None:
            self.notify("the exposure audit probes the live pool: not in a replay", severity="warning")
            return
        if not self.config.engines:
            self.notify("the config has no [[engines]] to check", severity="warning")
            return

        def picked(choice: str | None) -> None:
            if choice is not None:
                self._replace_top(SecurityScreen(self.config, completion=choice == COMPLETION_CHOICES[0]))

        question = "Exposure audit: every engine and gateway is probed without a key. Send a completion?"
        self.push_screen(ProfilePicker("exposure", list(COMPLETION_CHOICES), None, question), picked)

    @work(group="audit", description="reading the audit log", exclusive=True, exit_on_error=False)
    async def action_audit_log(self) -> None:
        from poolconsole.ui.screens.action import AuditScreen

        path = self.audit_path or audit.default_path()
        entries = await asyncio.to_thread(audit.entries, path, 200)
        self._replace_top(AuditScreen(entries, path))

    def action_window(self) -> None:
        from poolconsole.ui.screens.detail import DetailScreen

        self.window_index = (self.window_index + 1) % 2
        if isinstance(self.screen, DetailScreen):
            self.screen.toggle_window()

    def action_next_theme(self) -> None:
        names = self.pool_themes
        current = names.index(self.theme) if self.theme in names else -1
        self.set_theme(names[(current + 1) % len(names)])

    def set_theme(self, name: str) -> None:
        self.theme = name
        themes.remember_theme(name, self.theme_state)
        self.refresh_screen()
        self.notify(f"theme: {name}", timeout=2)

    def action_poll_now(self) -> None:
        self.runtime.poll_now()

    def on_key(self, event: events.Key) -> None:
        """A read-only console (--read-only, a replay) says why the key of an action that changes the pool does
        nothing, rather than nothing at all (check_action leaves the key unbound); a replay says so too for
        what would reach the live pool (a smoke test, a poll now)."""
        if not self.read_only:
            return
        for action in registry.ACTIONS:
            name = action.action.removeprefix("app.")
            keys = {k.strip() for k in (self.config.keys.get(action.id) or action.key).split(",")}
            if event.key not in keys or not registry.on_screen(name, self._screen_name()):
                continue
            if name in registry.MUTATING:
                why = "a replay" if self.replay is not None else "started with --read-only"
                self.notify(f"read-only console ({why}): {action.title} is refused", severity="warning", timeout=4)
                return
            if self.replay is not None and name in registry.LIVE_ONLY:
                self.notify(f"a replay has no live pool: {action.title} is refused", severity="warning", timeout=4)
                return

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """--read-only: every action that changes the pool is hidden from keys, footer and palette, and refused.
        A replay also refuses what reaches the live pool; the replay's own keys exist only in a replay."""
        dialog = isinstance(self.screen, ModalScreen) and not isinstance(self.screen, CommandPalette)
        if dialog and action in ("quit", "close_screen"):
            return False  # q cancels a dialog, as Escape does (from a picker it quit the console)
        if self.read_only and action in registry.MUTATING:
            return False
        if not registry.on_screen(action, self._screen_name()):
            return False  # not this screen's: its key does nothing here and the footer leaves it out
        if self.replay is None:
            return action not in registry.REPLAY
        return action not in registry.LIVE_ONLY

    # -- replay ---------------------------------------------------------------------------------------
    @work(group="replay", description="the replay", exclusive=True, exit_on_error=False)
    async def _play(self, replay: Replay) -> None:
        replay.on_events = self._replayed_events
        self.sub_title = replay.label()
        await replay.run(self._replayed)

    def _replayed(self) -> None:
        assert self.replay is not None
        self.sub_title = self.replay.label()
        self._changed()

    def _replayed_events(self, events: list[AlertEvent]) -> None:
        self._fired.extend(e for e in events if e.fired)  # told on the next tick, coalesced as live ones

    def _replay_moved(self) -> None:
        assert self.replay is not None
        self.sub_title = self.replay.label()
        self._dirty = True
        self._redraw()

    def action_replay_pause(self) -> None:
        if self.replay is not None:
            self.replay.toggle_pause()
            self._replay_moved()

    def action_replay_seek(self, seconds: int) -> None:
        if self.replay is not None:
            self.replay.seek(float(seconds))
            self._replay_moved()

    def action_replay_speed(self, up: bool) -> None:
        if self.replay is not None:
            self.replay.faster(up)
            self._replay_moved()

    def action_go_back(self) -> None:
        if len(self.screen_stack) > 2:
            self.pop_screen()
        elif isinstance(self.screen, OverviewScreen):
            self.screen.clear_filter()

    def action_close_screen(self) -> None:
        """q on a screen opened from the overview: back to where it was opened from (the console stays)."""
        if len(self.screen_stack) > 2:
            self.pop_screen()

    async def leave(self) -> None:
        """Quit, the actions still running stopped first: each is audited as abandoned, with where it stood,
        before the console goes (cancelled with the app, an action met its end only as the loop closed)."""
        stopped = self.workers.cancel_group(self, "actions")
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(LEAVE_S):
                await asyncio.gather(*(w.wait() for w in stopped), return_exceptions=True)
        self.exit()

    def quit_soon(self) -> None:
        """SIGTERM or SIGHUP: quit as a confirmed q does (ui.launch.run_app)."""
        if self.is_running:
            self.call_later(self.leave)
        else:
            self.exit()

    async def action_quit(self) -> None:
        """q on the overview. While a restart, rollover or Ollama load runs, quitting would stop it where it
        stands (a profile written, its engine not yet serving, no rollback): the operator is asked first."""
        from poolconsole.ui.screens.action import ConfirmAction

        running = [w for w in self.workers if w.group == "actions" and w.state is WorkerState.RUNNING]
        if not running:
            self.exit()
            return
        titles = [s.title_text for s in self._action_screens if s.outcome is None] or ["an action"]

        def go(yes: bool | None) -> None:
            if yes:
                self.call_later(self.leave)

        lines = [
            f"running: {', '.join(titles)}",
            "Quitting stops it where it stands: no rollback runs, and the audit log records it as abandoned "
            "with what it had done.",
            "No: it runs on; its progress and outcome are on its screen (and in the events pane).",
        ]
        self.push_screen(ConfirmAction("An action is still running. Quit anyway?", lines, yes="Quit (y)"), go)

    def _screen_name(self) -> str:
        """The registry's name of the screen the keys and the palette act on (the one under the palette)."""
        under = next((s for s in reversed(self.screen_stack) if not isinstance(s, CommandPalette)), self.screen)
        return registry.screen_name(under)

    def palette_entries(self) -> Iterable[Entry]:
        """The palette's entries: every visible action of the registry (with its key), then the themes."""
        keymap = dict(self.config.keys)
        shown = registry.visible(self.read_only, self.replay is not None, self._screen_name())
        for a in shown:  # hidden actions, and those of other screens, are not even listed
            key = registry.key_label(keymap.get(a.id, a.key))
            yield Entry(f"{a.title}  ({key})", a.help, partial(self.run_action, a.action.removeprefix("app.")), a.id)
        for theme in self.pool_themes:
            yield Entry(f"Theme: {theme}", "Switch theme (remembered)", partial(self.set_theme, theme))
