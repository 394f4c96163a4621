"""The console app: wiring only. One poll loop per target in a worker; each result updates the model
as it arrives, and the visible screen redraws from the model once a second."""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import ClassVar

from textual import work
from textual.app import App
from textual.command import Provider
from textual.css.query import NoMatches
from textual.notifications import SeverityLevel
from textual.screen import Screen
from textual.worker import Worker, WorkerState

from poolconsole.collect.containers import ContainerStart, inspect_command, parse_inspect, restarted
from poolconsole.collect.engines.poll import EnginePoller
from poolconsole.collect.hosts.poll import HostPoller
from poolconsole.collect.hosts.run import local_snapshot
from poolconsole.collect.ssh import SSHFailure, SSHPool
from poolconsole.config.models import Engine, EngineKind, PoolConfig
from poolconsole.model.alerts import AlertEvent, Alerts
from poolconsole.model.hosts import HostSnapshot
from poolconsole.model.pool import PoolState
from poolconsole.model.snapshots import EngineSnapshot
from poolconsole.ops import audit
from poolconsole.ops.actions import ActionContext, ActionRefused, plan_restart, restart, rollover
from poolconsole.ops.capacity import engine_kv
from poolconsole.ops.fit import KvCapacity, LiveMemory, Verdict, fit, live_memory
from poolconsole.ops.smoke.run import smoke_gate
from poolconsole.ui import actions, themes
from poolconsole.ui.palette import Entry, PoolCommands
from poolconsole.ui.screens.action import ActionScreen, AuditScreen, ConfirmAction, ProfilePicker
from poolconsole.ui.screens.detail import DetailScreen
from poolconsole.ui.screens.others import AlertsScreen, GatewayScreen, HelpScreen
from poolconsole.ui.screens.overview import OverviewScreen
from poolconsole.ui.screens.smoke import SmokeScreen

GC_SETTLE_S = 15.0
GC_THRESHOLD = 50_000
GC_FULL_EVERY_S = 60.0
REDRAW_S = 1.0  # the poll cadence: redrawing faster only burns CPU


@dataclass
class ApplyTimes:
    """How long applying poll results took (benchmarks read it): running totals, nothing that grows."""

    count: int = 0
    total_s: float = 0.0
    max_s: float = 0.0

    def add(self, seconds: float) -> None:
        self.count += 1
        self.total_s += seconds
        self.max_s = max(self.max_s, seconds)


def _release(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class PoolApp(App[None]):
    TITLE = "poolconsole"
    CSS_PATH = Path(__file__).with_name("app.tcss")
    BINDINGS = actions.bindings()  # type: ignore[assignment]
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
    ) -> None:
        self.read_only = read_only
        self.hint = hint
        """A line shown above the overview's table (the demo says how to point the console at a real pool)."""
        super().__init__()
        self.config = config
        self.live = live
        self.state = PoolState(config, clock)
        self.alerts = Alerts(config.alerts)
        self.theme_state = theme_state
        self.window_index = 0
        self.sub_title = subtitle + ("  [read-only]" if read_only else "")
        self._dirty = False
        self._sleepers: set[asyncio.Future[None]] = set()
        self.ssh: SSHPool | None = None
        self.smoke_db: Path | None = None
        self.audit_path: Path | None = None
        self.gc_settle_s = GC_SETTLE_S
        self.gc_full_every_s = GC_FULL_EVERY_S
        self.gc_settled = False
        self.full_collections = 0
        self.update_times = ApplyTimes()
        self._inspect = {
            e.name: command for e in config.engines if (command := inspect_command(e.control)) is not None
        }
        """Engines run by docker / podman: the command that reads the container's restart record."""
        self._container_starts: dict[str, ContainerStart] = {}
        self._inspected_at: dict[str, float] = {}
        self.container_check_s = 60.0
        """How often a container's restart record is read while its engine stays up (a restart between two
        polls of an idle engine shows nowhere else)."""

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
            problems = actions.keymap_problems(dict(self.config.keys))
            for problem in problems:
                self.notify(f"{problem} (`poolconsole check-config` lists every problem)", severity="error")
            known = {a.id for a in actions.ACTIONS}
            self.set_keymap({k: v for k, v in self.config.keys.items() if k in known and v.strip()})
        self.push_screen(OverviewScreen(self.state))
        self.set_interval(REDRAW_S, self._redraw)
        if self.live:
            self._start_polling()
            self.set_timer(self.gc_settle_s, self._settle_gc)
            self.set_interval(self.gc_full_every_s, self._collect_garbage)

    def _settle_gc(self) -> None:
        """Once the console has started: what exists now (config, screens, connections, the Textual and
        library objects) lives as long as the process, so it is moved out of the cyclic collector's
        sight (gc.freeze), and a young collection runs after GC_THRESHOLD net new objects instead of
        700. Measured on the 72-engine demo (benchmarks/ui_bench.py): every full collection walked
        ~245,000 objects and took ~260 ms (a frozen frame), and collections cost ~5 % of a core in all.
        With so few collections, cycles that outlive a young one would wait long for a full one, so
        a full collection runs every gc_full_every_s (~60 ms once the start-up objects are frozen)."""
        gc.collect()
        gc.freeze()
        gc.set_threshold(GC_THRESHOLD, 20, 20)
        self.gc_settled = True

    def _collect_garbage(self) -> None:
        gc.collect()
        self.full_collections += 1

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

    def _start_polling(self) -> None:
        settings = self.config.settings
        for engine in self.config.engines:
            self._engine_loop(EnginePoller(engine, settings=settings))
        remote = [h for h in self.config.hosts if not h.local]
        self.ssh = SSHPool(remote, settings.ssh_timeout_s, settings.ssh_concurrency)
        for host in self.config.hosts:
            self._host_loop(host.name)
        every = settings.litellm_health_interval_s
        gateways = [e for e in self.config.engines if e.kind is EngineKind.LITELLM]
        if every > 0 and gateways:
            self.notify(
                f"LiteLLM deep /health every {every:g} s: each probe calls every deployment (spends tokens)",
                severity="warning",
                timeout=10,
            )
            for gateway in gateways:
                self._deep_health_loop(gateway, every)

    @work(group="poll", exit_on_error=False)
    async def _deep_health_loop(self, gateway: Engine, every: float) -> None:
        """LiteLLM's deep /health on its own slow cadence (it spends tokens); the first once the pool has
        had a few seconds to answer."""
        poller = EnginePoller(gateway, settings=self.config.settings)
        wait = min(every, 10.0)
        try:
            while True:
                await asyncio.sleep(wait)
                wait = every
                self.state.deep_health[gateway.name] = (self.state.clock(), await poller.deep_health())
                self._dirty = True
        finally:
            await poller.aclose()

    @work(group="poll", exit_on_error=False)
    async def _engine_loop(self, poller: EnginePoller) -> None:
        """One loop per engine: the next poll starts only after this one finished (no overlap)."""
        try:
            while True:
                started = time.monotonic()
                self.apply_engine(await poller.poll())
                await self._sleep(self.config.settings.poll_interval_s - (time.monotonic() - started))
        finally:
            await poller.aclose()

    @work(group="poll", exit_on_error=False)
    async def _host_loop(self, name: str) -> None:
        host = next(h for h in self.config.hosts if h.name == name)
        poller = (
            HostPoller(host, self.ssh[name], self.config.engines, self.config.settings.poll_interval_s, self._sleepers)
            if self.ssh and name in self.ssh.connections
            else None
        )
        while True:
            started = time.monotonic()
            if poller is None:
                snapshot = await asyncio.to_thread(local_snapshot, host)
                if snapshot is None:  # NVML absent: fall back to SSH to this machine
                    assert self.ssh is not None
                    poller = HostPoller(
                        host,
                        self.ssh.add(host),
                        self.config.engines,
                        self.config.settings.poll_interval_s,
                        self._sleepers,
                    )
                    snapshot = await poller.poll()
            else:
                snapshot = await poller.poll()
            self.apply_host(snapshot)
            await self._sleep(self.config.settings.poll_interval_s - (time.monotonic() - started))

    async def _sleep(self, seconds: float) -> None:
        """Until the next poll is due, or `r` wakes every loop: asyncio.sleep's own mechanism (one future,
        one timer) with the future also reachable by `r`. No task per sleep: a shielded wait left a task
        behind on every timeout (measured: 143 a second on a 72-engine pool, memory growing); a timeout
        scope around an event wait cost twice this."""
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        timer = loop.call_later(max(0.05, seconds), _release, waiter)
        self._sleepers.add(waiter)
        try:
            await waiter
        finally:
            timer.cancel()
            self._sleepers.discard(waiter)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """The one place worker failures land: a broken loop is reported, the console keeps running."""
        if event.state is WorkerState.ERROR and event.worker.error is not None:
            self.notify(f"a poll loop stopped: {event.worker.error}", severity="error", timeout=10)

    async def on_unmount(self) -> None:
        self.workers.cancel_group(self, "poll")
        if self.ssh is not None:
            await self.ssh.close()

    # -- results ------------------------------------------------------------------------------------
    # The poll loops are workers on the app's own event loop, so a result goes straight into the model
    # (no message per poll: Textual's dispatch cost more than the update itself, 143 times a second on
    # a 72-engine pool); the screen redraws from the model once per REDRAW_S, however many arrived.
    def apply_engine(self, snapshot: EngineSnapshot) -> None:
        started = time.perf_counter()
        track = self.state.engines[snapshot.name]
        was = track.view.state if track.view is not None else None
        view = self.state.apply_engine(snapshot)
        self._alert(self.alerts.engine(view, snapshot.fetched_at))
        if snapshot.name in self._inspect and view.state == "ok":
            due = self._inspected_at.get(snapshot.name, -1e18) + self.container_check_s
            if was != "ok" or snapshot.fetched_at >= due:  # the baseline, back from down, or once a minute
                self._inspected_at[snapshot.name] = snapshot.fetched_at
                self._container_check(track.config)
        self._dirty = True
        self.update_times.add(time.perf_counter() - started)

    @work(group="containers", exit_on_error=False)
    async def _container_check(self, engine: Engine) -> None:
        """The container's own restart record (docker / podman inspect over SSH), compared with the last."""
        conn = self.ssh.connections.get(engine.host or "") if self.ssh else None
        if conn is None:
            return
        try:
            result = await conn.run(self._inspect[engine.name])
        except SSHFailure:
            return  # the host's own row says why
        now = self.state.clock()
        start = parse_inspect(result.stdout) if result.exit_status == 0 else None
        why = restarted(self._container_starts.get(engine.name), start)
        if start is not None:
            self._container_starts[engine.name] = start
        if why is not None and self.state.record_restart(engine.name, now):
            self.notify(f"{engine.name}: {why}", title="restart", severity="warning", timeout=8)
            self._alert(self.alerts.restarted(engine.name, now))
            self._dirty = True

    def apply_host(self, snapshot: HostSnapshot) -> None:
        started = time.perf_counter()
        self.state.apply_host(snapshot)
        self._alert(self.alerts.host(snapshot, snapshot.fetched_at))
        self._dirty = True
        self.update_times.add(time.perf_counter() - started)

    def _alert(self, events: list[AlertEvent]) -> None:
        for event in events:
            if event.fired:
                self.notify(f"{event.target}: {event.message}", title="alert", severity="warning", timeout=8)
                if self.config.alerts.bell:
                    self.bell()

    def _redraw(self) -> None:
        """Coalesced: however many results arrived, the visible screen redraws once."""
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
        overview = self._overview()
        key = overview.selected() if overview else None
        if key is not None and isinstance(self.screen, OverviewScreen):
            self.push_screen(DetailScreen(self.state, key, self.window_index))

    def action_filter(self) -> None:
        if isinstance(self.screen, OverviewScreen):
            self.screen.open_filter()

    def action_sort(self) -> None:
        if isinstance(self.screen, OverviewScreen):
            self.screen.next_sort()

    def action_gateway(self) -> None:
        self._replace_top(GatewayScreen(self.state))

    def action_alerts(self) -> None:
        self._replace_top(AlertsScreen(self.alerts))

    def action_help(self) -> None:
        self._replace_top(HelpScreen(actions.visible(self.read_only), dict(self.config.keys), self.read_only))

    def _replace_top(self, screen: Screen[None]) -> None:
        if not isinstance(self.screen, OverviewScreen):
            self.pop_screen()
        self.push_screen(screen)

    def action_smoke(self) -> None:
        overview = self._overview()
        key = overview.selected() if overview else None
        if key is None or not key.startswith("engine:"):
            self.notify("select an engine row to smoke-test it (M tests the whole pool)", severity="warning")
            return
        self._start_smoke([key.removeprefix("engine:")])

    def action_smoke_all(self) -> None:
        self._start_smoke([])

    def _start_smoke(self, targets: list[str]) -> None:
        screen = SmokeScreen(targets)
        self._replace_top(screen)
        self._smoke(screen, targets)

    @work(group="smoke", exclusive=True, exit_on_error=False)
    async def _smoke(self, screen: SmokeScreen, targets: list[str]) -> None:
        """One smoke run at a time; results land in the screen as they finish, then in the store."""
        from poolconsole.ops.smoke import store
        from poolconsole.ops.smoke.run import SmokeOptions, conditions, document, run_smoke

        options = SmokeOptions(tuple(targets), via_gateway=not targets, concurrency=(1, 4), requests=4)
        try:
            results, seed = await run_smoke(self.config, options, screen.add)
            doc = document(results, seed)
            db = self.smoke_db or store.default_db()
            versions = {n: t.view.version if t.view else None for n, t in self.state.engines.items()}
            measured_on = conditions(self.config, versions)
            run_id = await asyncio.to_thread(
                store.save_run, db, seed, doc["passed"], "console", doc["results"], measured_on
            )
            changes = await asyncio.to_thread(store.compare, db, run_id)
            screen.finish(changes)
            self.notify(
                f"smoke test {'passed' if doc['passed'] else 'FAILED'}: {len(results)} checks",
                severity="information" if doc["passed"] else "error",
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

    def _action_context(self, engine: Engine, screen: ActionScreen) -> ActionContext:
        host = self.config.host(engine.host)
        if host is None or self.ssh is None:
            raise ActionRefused(f"{engine.name} has no [[hosts]] entry to run commands on")
        conn = self.ssh.connections.get(host.name) or self.ssh.add(host)
        return ActionContext(
            self.config, conn, self.audit_path or audit.default_path(), screen.progress, self.read_only
        )

    def action_restart(self) -> None:
        engine = self._selected_engine()
        if engine is None:
            return
        try:
            commands = plan_restart(engine)
        except ActionRefused as exc:
            self.notify(str(exc), severity="error")
            return
        lines = (
            [f"host {engine.host}:"]
            + [f"  $ {c}" for c in commands]
            + ["then wait until the engine answers healthy (time-to-ready is reported)"]
        )

        def go(yes: bool | None) -> None:
            if yes:
                screen = ActionScreen(f"restart {engine.name}")
                self._replace_top(screen)
                self._act(screen, engine, None)

        self.push_screen(ConfirmAction(f"Restart {engine.name}?", lines), go)

    @work(group="actions-ui", exclusive=True, exit_on_error=False)
    async def action_rollover(self) -> None:
        engine = self._selected_engine()
        if engine is None:
            return
        if not engine.profiles or engine.control is None:
            self.notify(f"{engine.name} has no profiles or no [engines.control]", severity="error")
            return
        path = self.audit_path or audit.default_path()
        active = await asyncio.to_thread(audit.active_profile, path, engine.name) or engine.profile
        kv = await engine_kv(engine, self.config.settings)  # the engine's own KV figures, for the cliff

        def picked(name: str | None) -> None:
            if name is None:
                return
            profile = next(p for p in engine.profiles if p.name == name)
            host = self.state.hosts.get(engine.host or "")
            live = live_memory(host.snapshot, engine, self.state.age_s(host.last_ok_at)) if host else None
            report = fit(engine, profile, self.config.host(engine.host), live, kv, active=name == active)
            target = engine.control.profile_file if engine.control else "?"
            lines = [
                *report.lines(),
                f"host {engine.host}:",
                f"  $ (write {target} atomically, its values over stdin)",
                *[f"  $ {c}" for c in plan_restart(engine)],
                "then: serving (health, model listed, one token), smoke test, promote; on any failure roll back",
            ]

            def go(yes: bool | None) -> None:
                if yes:
                    screen = ActionScreen(f"rollover {engine.name} -> {name}")
                    self._replace_top(screen)
                    self._act(screen, engine, name, live, kv)

            refused = {
                Verdict.FITS: "",
                Verdict.DOES_NOT_FIT: " (DOES NOT FIT: it will be refused; the CLI's --force overrides)",
                Verdict.CANNOT_CHECK: " (cannot check the fit: GPU memory unknown; the CLI's --force overrides)",
            }[report.verdict]
            self.push_screen(ConfirmAction(f"Switch {engine.name} from {active} to {name}?{refused}", lines), go)

        self.push_screen(ProfilePicker(engine.name, [p.name for p in engine.profiles], active), picked)

    @work(group="actions", exit_on_error=False)
    async def _act(
        self,
        screen: ActionScreen,
        engine: Engine,
        profile: str | None,
        live: LiveMemory | None = None,
        kv: KvCapacity | None = None,
    ) -> None:
        try:
            ctx = self._action_context(engine, screen)
            if profile is None:
                outcome = await restart(ctx, engine)
            else:
                smoke = smoke_gate(self.config, engine.name)
                outcome = await rollover(ctx, engine, profile, smoke=smoke, live=live, kv=kv)
            screen.finish(outcome.outcome, outcome.detail)
            self.notify(
                f"{outcome.action} {engine.name}: {outcome.outcome}",
                severity="information" if outcome.outcome == "ok" else "error",
            )
        except ActionRefused as exc:
            screen.finish("refused", str(exc))

    @work(group="audit", exclusive=True, exit_on_error=False)
    async def action_audit_log(self) -> None:
        entries = await asyncio.to_thread(audit.entries, self.audit_path or audit.default_path(), 200)
        self._replace_top(AuditScreen(entries))

    def action_window(self) -> None:
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
        for waiter in list(self._sleepers):
            _release(waiter)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """--read-only: every action that changes the pool is hidden from keys, footer and palette, and refused."""
        return not (self.read_only and action in actions.MUTATING)

    def action_go_back(self) -> None:
        if len(self.screen_stack) > 2:
            self.pop_screen()
        elif isinstance(self.screen, OverviewScreen):
            self.screen.clear_filter()

    def palette_entries(self) -> Iterable[Entry]:
        """The palette's entries: every visible action of the registry (with its key), then the themes."""
        keymap = dict(self.config.keys)
        for a in actions.visible(self.read_only):  # --read-only: mutating actions are not even listed
            key = actions.key_label(keymap.get(a.id, a.key))
            yield Entry(f"{a.title}  ({key})", a.help, partial(self.run_action, a.action.removeprefix("app.")))
        for theme in self.pool_themes:
            yield Entry(f"Theme: {theme}", "Switch theme (remembered)", partial(self.set_theme, theme))
