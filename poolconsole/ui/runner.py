"""The console's action runner (the registry's target RUNNER): what needs the pool to act on, or a reading
of it the overview cannot give. Each workflow's Plan is shown in one confirmation and run in one generic
worker (workflows.actions), with its progress on an ActionScreen; the smoke run, the engine log and the
exposure audit open their own screens. The app routes the keys and palette entries of these actions here."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from textual.screen import Screen
from textual.worker import WorkerState

from poolconsole.config.models import Engine, EngineKind
from poolconsole.model.ollama import resident_marks
from poolconsole.ui import jobs
from poolconsole.workflows import audit_log

if TYPE_CHECKING:
    from poolconsole.model.smoke import CheckResult
    from poolconsole.ui.app import PoolApp
    from poolconsole.ui.screens.action import ActionScreen
    from poolconsole.ui.screens.smoke import SmokeScreen
    from poolconsole.workflows.plan import Plan
    from poolconsole.workflows.workspace import Workspace

PRELOAD_KEEP_ALIVES = ("5m", "30m", "1h", "24h", "-1")
"""The keep-alives offered when preloading an Ollama model."""


class ActionRunner:
    def __init__(self, app: PoolApp) -> None:
        self.app = app
        self.action_screens: list[ActionScreen] = []
        """The screens of actions started here (those with no outcome yet are running)."""
        self.smoke_screen: SmokeScreen | None = None
        """The last smoke run's screen (m and M open it again while its run goes on)."""

    # -- what the actions act on ----------------------------------------------------------------------
    def audit_path(self) -> Path:
        return self.app.audit_path or audit_log.default_path()

    def workspace(self) -> Workspace:
        """What the workflows run in: this console's config, audit log, read-only flag and SSH connections."""
        from poolconsole.workflows.workspace import Workspace

        app = self.app
        return Workspace(app.config, self.audit_path(), app.read_only, app.ssh)

    def _selected(self) -> str | None:
        overview = self.app.overview()
        return overview.selected() if overview is not None else None

    def _selected_engine(self) -> Engine | None:
        key = self._selected()
        engine = next((e for e in self.app.config.engines if key == f"engine:{e.name}"), None)
        if engine is None:
            self.app.notify("select an engine row first", severity="warning")
        return engine

    def _selected_ollama(self) -> Engine | None:
        engine = self._selected_engine()
        if engine is not None and engine.kind is not EngineKind.OLLAMA:
            self.app.notify(f"{engine.name} is not an Ollama instance: nothing to load or unload", severity="warning")
            return None
        return engine

    # -- any plan: confirmed, then run in one worker --------------------------------------------------
    def show(self, screen: Screen[None]) -> None:
        """An action's screen over the one it was started from (the overview or the engine's detail, which
        Escape then returns to); a finished action's screen is replaced, not stacked."""
        from poolconsole.ui.screens.action import ActionScreen
        from poolconsole.ui.screens.smoke import SmokeScreen

        app = self.app
        if isinstance(app.screen, ActionScreen | SmokeScreen):
            app.pop_screen()
        if isinstance(screen, ActionScreen):
            self.action_screens = [s for s in self.action_screens if s.outcome is None] + [screen]
        app.push_screen(screen)

    def confirm(self, plan: Plan) -> None:
        """The plan in a confirmation; on yes, run in the one action worker with its progress screen."""
        from poolconsole.ui.screens.action import ActionScreen, ConfirmAction

        if plan.refused is not None:
            self.app.notify(plan.refused, severity="error")
            return

        def go(yes: bool | None) -> None:
            if yes:
                screen = ActionScreen(plan.title)
                self.show(screen)
                jobs.start(self.app, partial(self._act, screen, plan), "actions", "the action")

        self.app.push_screen(ConfirmAction(plan.question, list(plan.lines), runnable=plan.blocked is None), go)

    async def _act(self, screen: ActionScreen, plan: Plan) -> None:
        """Any workflow's plan, run with its progress on `screen`; the outcome said on the screen, in the events
        and in a toast."""
        from poolconsole.workflows import actions

        app = self.app
        app.alerts.action_started(plan.engine, app.state.clock())
        asked = app.state.clock()
        try:
            ran = await actions.run(self.workspace(), plan, screen.progress)
            screen.finish(ran.outcome, ran.detail)
            if ran.refused:
                app.events.action(app.state.clock(), plan.action, plan.engine, "refused", ran.detail)
                return
            if ran.ok:
                self._after(plan, asked)
            app.events.action(app.state.clock(), ran.action, plan.engine, ran.outcome, ran.detail)
            app.notify(f"{ran.action} {plan.engine}: {ran.outcome}", severity="information" if ran.ok else "error")
        finally:
            app.alerts.action_ended(plan.engine, app.state.clock())
            app.changed()

    def _after(self, plan: Plan, asked: float) -> None:
        """What a successful action changes in the pool's state before the next poll shows it."""
        track = self.app.state.engines[plan.engine]
        if plan.action == "rollover" and plan.profile is not None:
            track.active_profile = plan.profile
        elif plan.model is not None:
            if plan.keep_alive is None:  # unloaded here: its leaving is said as such
                track.unloaded_here[plan.model] = asked
            self.app.source.poll_now()  # the next /api/ps shows it on screen

    def ask_before_quit(self, leave: Callable[[], Awaitable[None]]) -> bool:
        """While an action runs, whether to quit is asked (`leave` on yes); False where none runs."""
        from poolconsole.ui.screens.action import ConfirmAction

        app = self.app
        if not [w for w in app.workers if w.group == "actions" and w.state is WorkerState.RUNNING]:
            return False
        titles = [s.title_text for s in self.action_screens if s.outcome is None] or ["an action"]

        def go(yes: bool | None) -> None:
            if yes:
                app.call_later(leave)

        lines = [
            f"running: {', '.join(titles)}",
            "Quitting stops it where it stands: no rollback runs, and the audit log records it as abandoned "
            "with what it had done.",
            "No: it runs on; its progress and outcome are on its screen (and in the events pane).",
        ]
        app.push_screen(ConfirmAction("An action is still running. Quit anyway?", lines, yes="Quit (y)"), go)
        return True

    # -- restart, rollover, Ollama residency ----------------------------------------------------------
    def action_restart(self) -> None:
        from poolconsole.workflows import restart

        engine = self._selected_engine()
        if engine is not None:
            self.confirm(restart.plan(self.workspace(), engine.name, self.app.state))

    def action_rollover(self) -> None:
        jobs.start(self.app, self._rollover, "actions-ui", "the action's dialog", exclusive=True)

    async def _rollover(self) -> None:
        from poolconsole.ui.screens.action import ProfilePicker
        from poolconsole.workflows import rollover

        app = self.app
        engine = self._selected_engine()
        if engine is None:
            return
        if not engine.profiles or engine.control is None:
            app.notify(f"{engine.name} has no profiles or no [engines.control]", severity="error")
            return
        ws = self.workspace()
        active = await rollover.active_profile(ws, engine.name)
        live, kv = await rollover.measure(ws, engine.name, app.state)  # the engine's own KV figures, for the cliff

        def picked(name: str | None) -> None:
            if name is not None:
                self.confirm(rollover.plan(ws, engine.name, name, active=active, live=live, kv=kv, state=app.state))

        app.push_screen(ProfilePicker(engine.name, [p.name for p in engine.profiles], active), picked)

    def action_ollama_unload(self) -> None:
        from poolconsole.ui.screens.action import ProfilePicker
        from poolconsole.workflows import ollama  # httpx: loaded when first used

        engine = self._selected_ollama()
        if engine is None:
            return
        residency = self.app.state.engines[engine.name].residency
        loaded = [m.name for m in residency.models] if residency is not None else []
        if not loaded:
            self.app.notify(f"{engine.name}: no model is resident (as its last /api/ps said)", severity="warning")
            return

        def picked(model: str | None) -> None:
            if model is not None:
                self.confirm(ollama.plan_unload(self.workspace(), engine.name, model))

        self.app.push_screen(ProfilePicker(engine.name, loaded, None, f"Unload which model of {engine.name}?"), picked)

    def action_ollama_preload(self) -> None:
        from poolconsole.ui.screens.action import ProfilePicker
        from poolconsole.workflows import ollama  # httpx: loaded when first used

        app = self.app
        engine = self._selected_ollama()
        if engine is None:
            return
        track = app.state.engines[engine.name]
        on_disk = list(track.view.models) if track.view is not None else []  # /api/tags
        if not on_disk:
            app.notify(f"{engine.name}: no model known on disk (its /api/tags)", severity="warning")
            return
        server = track.ollama_server
        resident = resident_marks(track.residency, server, app.state.clock()) if track.residency else {}

        def keep(model: str | None) -> None:
            if model is None:
                return
            default = server.keep_alive_text() if server is not None else "n/a"
            question = f"Keep {model} loaded how long? (server's OLLAMA_KEEP_ALIVE: {default}; -1: until unloaded)"

            def chosen(keep_alive: str | None) -> None:
                if keep_alive is not None:
                    self.confirm(ollama.plan_preload(self.workspace(), engine.name, model, keep_alive))

            app.push_screen(ProfilePicker(engine.name, list(PRELOAD_KEEP_ALIVES), None, question), chosen)

        question = f"Preload which model on {engine.name}? (a resident one: its keep-alive is set anew)"
        app.push_screen(ProfilePicker(engine.name, on_disk, None, question, marks=resident), keep)

    # -- smoke tests ----------------------------------------------------------------------------------
    def _smoke_running(self) -> bool:
        """A smoke run is going on: its screen is opened again (closed, the run went on), not a second run
        started (one at a time: a new one would have cancelled it, leaving no record)."""
        app, screen = self.app, self.smoke_screen
        if screen is None or screen.finished:
            return False
        if screen in app.screen_stack:  # under another screen (help, say): back down to it, not pushed twice
            while app.screen is not screen:
                app.pop_screen()
        else:
            self.show(screen)
        app.notify("a smoke test is already running: showing it (one run at a time)", timeout=3)
        return True

    def action_smoke(self) -> None:
        if self._smoke_running():
            return
        key = self._selected()
        if key is None or not key.startswith("engine:"):
            self.app.notify("select an engine row to smoke-test it (M tests the whole pool)", severity="warning")
            return
        self._start_smoke([key.removeprefix("engine:")])

    def action_smoke_all(self) -> None:
        """The whole pool, engine after engine and through the gateway: real requests to every model, for
        minutes. Asked first, with what it sends (it had started at the keypress)."""
        from poolconsole.ui.screens.action import ConfirmAction

        if self._smoke_running():
            return
        config = self.app.config
        engines = [e.name for e in config.engines if e.kind is not EngineKind.LITELLM]
        gateways = [e.name for e in config.engines if e.kind is EngineKind.LITELLM]
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

        self.app.push_screen(ConfirmAction("Smoke-test the whole pool?", lines, yes="Run it (y)"), go)

    def _start_smoke(self, targets: list[str]) -> None:
        from poolconsole.ui.screens.smoke import SmokeScreen

        app = self.app
        old, screen = self.smoke_screen, SmokeScreen(targets)
        self.smoke_screen = screen
        # installed: closing it while the run goes on keeps it whole for m / M to open again (a popped screen
        # is removed, and pushed again it came back blank over a frozen frame)
        app.install_screen(screen, name=f"smoke-{id(screen)}")
        self.show(screen)
        if old is not None and app.is_screen_installed(old):
            app.call_after_refresh(self._drop_screen, old)
        jobs.start(app, partial(self._smoke, screen, targets), "smoke", "the smoke test", exclusive=True)

    def _drop_screen(self, screen: Screen[None]) -> None:
        """An installed screen no longer wanted: uninstalled and removed once it is off the stack (an
        installed screen stays mounted when popped; uninstalling alone leaves it so)."""
        if screen in self.app.screen_stack:  # still under another one: tried again in a second
            self.app.set_timer(1.0, partial(self._drop_screen, screen))
            return
        self.app.uninstall_screen(screen)
        screen.remove()

    async def _smoke(self, screen: SmokeScreen, targets: list[str]) -> None:
        """One smoke run at a time (workflows.smoke, as `poolconsole smoke` runs it, on this console's live
        state); results land in the screen as they finish, then in the store."""
        from poolconsole.workflows import smoke

        app = self.app
        done_at: dict[str, float] = {}

        def landed(result: CheckResult) -> None:
            done_at[result.target] = app.state.clock()  # its verdict's time in the events: when it finished
            screen.add(result)

        try:
            db = app.smoke_db or smoke.default_db()
            options = smoke.console_options(targets)
            done = await smoke.run(self.workspace(), options, db, landed=landed, state=app.state)
            screen.finish(done.changes, done.store_error)
            worse = Counter(c.target for c in done.changes if c.regression)
            verdicts = [(r.target, r.check, r.passed, r.reason) for r in done.results]
            app.events.smoke(app.state.clock(), verdicts, worse, done_at)
            app.changed()
            app.notify(
                f"smoke test {'passed' if done.passed else 'FAILED'}: {len(done.results)} checks",
                severity="information" if done.passed else "error",
            )
        except Exception as exc:  # reported on the screen: the console keeps running
            screen.finish([], f"smoke test stopped: {type(exc).__name__}: {exc}")

    # -- readings: the gateway, alerts, events, help; the engine's log, the exposure audit, the audit log, the ledger
    def action_gateway(self) -> None:
        from poolconsole.ui.screens.others import GatewayScreen

        self.app.replace_top(GatewayScreen(self.app.state))

    def action_alerts(self) -> None:
        from poolconsole.ui.screens.others import AlertsScreen
        from poolconsole.ui.screens.overview_summary import board_of

        app = self.app
        store = board_of(app.store_path, app.config, app.live)
        screen = AlertsScreen(app.alerts, store, config=app.config, read_only=app.read_only, audit_path=app.audit_path)
        app.replace_top(screen)

    def action_events(self) -> None:
        from poolconsole.ui.screens.events import EventsScreen

        self.app.replace_top(EventsScreen(self.app.events))

    def action_help(self) -> None:
        from poolconsole.ui import registry
        from poolconsole.ui.screens.others import HelpScreen

        app = self.app
        shown = registry.visible(app.read_only, app.source.capabilities.replay)
        app.replace_top(HelpScreen(shown, dict(app.config.keys), app.read_only))

    def action_logs(self) -> None:
        """The engine of the detail screen, or of the overview's selected row: its log read and followed."""
        from poolconsole.ui.screens.detail import DetailScreen
        from poolconsole.ui.screens.logs import LogScreen
        from poolconsole.ui.screens.overview import OverviewScreen
        from poolconsole.workflows.logs import LogsRefused, console_log

        app = self.app
        screen = app.screen
        track = screen.engine if isinstance(screen, DetailScreen) else None
        if track is None and not isinstance(screen, OverviewScreen):
            return
        engine = track.config if track is not None else self._selected_engine()
        if engine is None:
            return
        host = app.config.host(engine.host)
        replay = app.source.capabilities.replay
        if replay or app.ssh is None or host is None:
            why = "a replay has no live pool" if replay else "no SSH to its host"
            app.notify(f"{engine.name}: its log is read over SSH from its host ({why})", severity="warning")
            return
        try:
            log = console_log(engine, host, app.ssh)
        except LogsRefused as exc:
            app.notify(str(exc), severity="warning", timeout=10)  # whole: a toast cuts the long words
            return
        app.push_screen(LogScreen(engine.name, log.source, log.read, log.follow))

    def action_security(self) -> None:
        """The exposure audit (workflows.exposure), never destructive; the operator picks whether the one-token
        completion is sent."""
        from poolconsole.ui.screens.action import ProfilePicker
        from poolconsole.ui.screens.security import COMPLETION_CHOICES, SecurityScreen

        app = self.app
        if app.source.capabilities.replay:
            app.notify("the exposure audit probes the live pool: not in a replay", severity="warning")
            return
        if not app.config.engines:
            app.notify("the config has no [[engines]] to check", severity="warning")
            return

        def picked(choice: str | None) -> None:
            if choice is not None:
                app.replace_top(SecurityScreen(app.config, completion=choice == COMPLETION_CHOICES[0]))

        question = "Exposure audit: every engine and gateway is probed without a key. Send a completion?"
        app.push_screen(ProfilePicker("exposure", list(COMPLETION_CHOICES), None, question), picked)

    def action_audit_log(self) -> None:
        jobs.start(self.app, self._audit_log, "audit", "reading the audit log", exclusive=True)

    async def _audit_log(self) -> None:
        from poolconsole.ui.screens.action import AuditScreen

        path = self.audit_path()
        entries = await asyncio.to_thread(audit_log.entries, path, 200)
        self.app.replace_top(AuditScreen(entries, path))

    def action_ledger(self) -> None:
        """The ledger of the history store: the one recorded into, or the recording played back (on its
        clock). It only reads, so it is the same in --read-only."""
        from poolconsole.ui.screens.ledger import LedgerScreen

        app = self.app
        path = app.source.recorded or app.store_path
        if path is None:
            app.notify("no history store: the ledger reads one ([store] in hosts.toml, or `poolconsole record`)")
            return
        app.replace_top(LedgerScreen(path, app.state.clock(), app.config.ledger))
