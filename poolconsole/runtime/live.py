"""The live pool, headless: one poll loop per target (engines over HTTP, hosts over SSH with their streamed
telemetry, LiteLLM's deep /health on its own cadence, the containers' restart records; the targets read
from one batch of `[prometheus]`, its engines or its hosts, in one loop a pass a tick), each result
applied to the pool state, its history and the alert rules, written to the history store when one is
given, and told to the subscribers. The console, `record` and the exporter are its clients; it imports no
Textual and no Rich.

Subscribers are called on the event loop, once per applied result, with an Update (the target and the
alert events it raised): a view redraws from the model, coalescing as it likes."""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

from poolconsole.collect.containers import ContainerStart, inspect_command, parse_inspect, restarted
from poolconsole.collect.engine_logs import has_log_source, read_logs
from poolconsole.collect.engine_sources import engine_pollers
from poolconsole.collect.engines.poll import EnginePoller
from poolconsole.collect.hosts.sampling import host_pollers
from poolconsole.collect.ollama_server import read_server_settings
from poolconsole.collect.ssh import SSHFailure, SSHPool
from poolconsole.collect.tasks import reap
from poolconsole.config.models import Engine, EngineKind, PoolConfig
from poolconsole.model.alerts import AlertEvent, Alerts
from poolconsole.model.events import EventLog
from poolconsole.model.failure_modes import Diagnosis
from poolconsole.model.hosts import HostSnapshot
from poolconsole.model.pool_state import PoolState
from poolconsole.model.snapshots import EngineSnapshot, EngineState
from poolconsole.model.view import EngineView
from poolconsole.runtime.heap import trim_heap

if TYPE_CHECKING:
    from poolconsole.runtime.store.charts import StoredHistory

GC_SETTLE_S = 15.0
GC_THRESHOLD = 50_000
GC_FULL_EVERY_S = 60.0
CONTAINER_CHECK_S = 60.0
LOG_WINDOW_S = 900
"""After a crash or restart, the engine's log of the last 15 minutes is read ..."""
LOG_LINES = 400
"""... at most this many lines of it."""


T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)
HANDOUT = 10
"""Targets of a batch loop's pass between two turns of the rest of the event loop (as the batch's own
hand-out, collect.prometheus.batch)."""


class Polled(Protocol[T_co]):
    """A target's poller as a loop sees it: a result per `poll` (it never raises), `aclose` once at the end."""

    async def poll(self) -> T_co: ...

    async def aclose(self) -> None: ...


class Recorder(Protocol):
    """Where every applied poll goes (the history store): an engine's with its running totals as this poll
    left them (a copy: the recorder may keep it)."""

    def engine(self, view: EngineView, totals: Mapping[str, float], at: float) -> None: ...

    def host(self, snapshot: HostSnapshot, at: float) -> None: ...


@dataclass(frozen=True)
class Update:
    """One applied result: which target, and what it changed that a person should hear about."""

    target: str
    kind: Literal["engine", "host", "gateway", "restart", "problem", "diagnosis", "history"]
    events: tuple[AlertEvent, ...] = ()
    message: str | None = None
    """In words, for "restart" (a container's record) and "problem" (a poll loop that stopped)."""
    at: float | None = None
    """When, on the pool's clock (a poll's fetch, the container check, the log read, the loop's end)."""
    restarts: tuple[float, ...] = ()
    """The restart marks this update put on the target's history: its counters reset at this poll
    ("engine"), the container's record ("restart"), those the charts read back on launch ("history")."""
    diagnosis: Diagnosis | None = None
    """For "diagnosis": what the log read after the engine went down or restarted found."""


Subscriber = Callable[[Update], None]


class Backlog:
    """The updates told before a client subscribed, kept in order and handed over (a runtime started while
    its view still loads: the console starts the polls before Textual is imported, and the first poll's
    alerts and problems are still the view's to tell)."""

    def __init__(self, runtime: LivePool) -> None:
        self.updates: list[Update] = []
        self.runtime = runtime
        self._unsubscribe = runtime.subscribe(self.updates.append)

    def hand_over(self, subscriber: Subscriber) -> Callable[[], None]:
        """`subscriber` hears what was kept, then every update after it; nothing is kept any more."""
        self._unsubscribe()
        kept, self.updates = self.updates, []
        for update in kept:
            subscriber(update)
        return self.runtime.subscribe(subscriber)


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


@dataclass
class GcPolicy:
    """The cyclic collector of a long-running process, settled once the pool is up: what exists then
    (config, connections, library objects) lives as long as the process, so it is moved out of the
    collector's sight (gc.freeze), and a young collection runs after GC_THRESHOLD net new objects
    instead of 700. Measured on the 72-engine demo (benchmarks/ui_bench.py): every full collection
    walked ~245,000 objects and took ~260 ms, and collections cost ~5 % of a core in all. With so few
    collections, cycles that outlive a young one would wait long, so a full one runs every full_every_s.

    The same policy holds from the start (`start`): what the imports made (modules, classes, the config) is
    frozen as the loops begin, and young collections are as rare, so the first polls' objects are not
    walked again and again. At 1,000 engines read through Prometheus (benchmarks/scale_bench.py) the
    collector took 0.47 s in 646 runs, 5 of them full, before the first frame with data.

    The command pauses the collector for its start-up (poolconsole/__main__.py) and `start` resumes it. What
    `start` froze then holds start-up's unreachable cycles too (about 1,700 objects), so `settle` unfreezes
    before its collection: it walks start-up's objects once more (about 50 ms here, once, off the first
    frame's path) and freezes what survives."""

    settle_s: float = GC_SETTLE_S
    full_every_s: float = GC_FULL_EVERY_S
    settled: bool = False
    full_collections: int = 0
    trims_returned: int = 0

    def start(self) -> None:
        gc.freeze()
        gc.set_threshold(GC_THRESHOLD, 20, 20)
        gc.enable()  # the command paused it for start-up (poolconsole/__main__.py)

    def settle(self) -> None:
        gc.unfreeze()  # what `start` froze includes start-up's own garbage (no collection ran before it)
        gc.collect()
        gc.freeze()
        gc.set_threshold(GC_THRESHOLD, 20, 20)
        self.settled = True

    def collect(self) -> None:
        gc.collect()
        self.full_collections += 1
        self.trims_returned += trim_heap()  # what the collection freed goes back to the system (runtime.heap)


class LivePool:
    def __init__(
        self,
        config: PoolConfig,
        *,
        clock: Callable[[], float] = time.time,
        recorder: Recorder | None = None,
    ) -> None:
        self.config = config
        self.state = PoolState(config, clock)
        self.alerts = Alerts(config.alerts)
        self.events = EventLog()
        """The timeline (restarts with their cause, alerts, and what the console adds: actions, smoke runs)."""
        self.recorder = recorder
        self.ssh: SSHPool | None = None
        self.sleepers: set[asyncio.Future[None]] = set()
        self.update_times = ApplyTimes()
        self.gc = GcPolicy()
        self.container_check_s = CONTAINER_CHECK_S
        """How often a container's restart record is read while its engine stays up (a restart between two
        polls of an idle engine shows nowhere else)."""
        self.container_starts: dict[str, ContainerStart] = {}
        self._inspect = {e.name: command for e in config.engines if (command := inspect_command(e.control)) is not None}
        self._logged = {e.name for e in config.engines if has_log_source(e)}
        """Engines whose log can be read (a control backend or a declared source): only theirs is read."""
        self._inspected_at: dict[str, float] = {}
        self._subscribers: list[Subscriber] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self._timers: list[asyncio.TimerHandle] = []
        self.subscribe(self.events.heard)  # the first subscriber: the timeline is current when the others hear

    # -- subscribers ----------------------------------------------------------------------------------
    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        self._subscribers.append(callback)
        return lambda: self._subscribers.remove(callback)

    def _tell(self, update: Update) -> None:
        for callback in list(self._subscribers):
            callback(update)

    # -- lifecycle ------------------------------------------------------------------------------------
    def start(self, *, settle_gc: bool = True) -> None:
        """Start every loop on the running event loop (call it from a coroutine, or a callback on the loop),
        and the collector's policy with them unless `settle_gc` is False (tests and embedders that keep
        their own, or a client that loads more before it calls `start_gc`)."""
        settings = self.config.settings
        if settle_gc:
            self.start_gc()
        engines = engine_pollers(self.config)  # direct, or read from [prometheus]
        self._spawn_polls([(p.engine.name, p, p.shared) for p in engines], self.apply_engine, "engines")
        remote = [h for h in self.config.hosts if not h.local]
        self.ssh = SSHPool(remote, settings.ssh_timeout_s, settings.ssh_concurrency)
        # where each host is read from (SSH streaming, NVML, [prometheus]): the one choice, as `status` makes it
        hosts = host_pollers(self.config, self.ssh, interval_s=settings.poll_interval_s, wakers=self.sleepers)
        self._spawn_polls([(h.host.name, h, h.shared) for h in hosts], self.apply_host, "hosts")
        every = settings.litellm_health_interval_s
        if every > 0:
            for gateway in (e for e in self.config.engines if e.kind is EngineKind.LITELLM):
                self._spawn(self._deep_health_loop(gateway, every), gateway.name)

    def start_gc(self) -> None:
        """The collector's long-running policy (GcPolicy): what exists now is frozen, young collections are
        rare, the settle and the full collections are timed from here. Once, after what start-up loads."""
        self.gc.start()
        self._timers.append(asyncio.get_running_loop().call_later(self.gc.settle_s, self.gc.settle))
        self._spawn(self._full_collections(), "gc")

    async def stop(self) -> None:
        for timer in self._timers:
            timer.cancel()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        for task in tasks:
            await reap(task, Exception)
        if self.ssh is not None:
            await self.ssh.close()

    def _spawn(self, coro: Coroutine[Any, Any, None], target: str) -> None:
        task = asyncio.get_running_loop().create_task(coro, name=f"poll {target}")
        self._tasks.add(task)
        task.add_done_callback(lambda t: self._ended(t, target))

    def _ended(self, task: asyncio.Task[None], target: str) -> None:
        """Where a loop's failure lands: it is told, the other loops keep running."""
        self._tasks.discard(task)
        if not task.cancelled() and (error := task.exception()) is not None:
            self._stopped(target, error)

    def _stopped(self, target: str, error: BaseException) -> None:
        """A target's polls stopped on `error` (its loop ended, or a batch loop left it out): told."""
        said = f"the poll loop of {target} stopped: {error!r}"
        self._tell(Update(target, "problem", message=said, at=self.state.clock()))

    def poll_now(self) -> None:
        """Every loop polls now (`r`): the sleeping ones, and the streamed hosts waiting for a sample."""
        for waiter in list(self.sleepers):
            _release(waiter)

    async def _sleep(self, seconds: float) -> None:
        """Until the next poll is due, or poll_now: asyncio.sleep's own mechanism (one future, one timer)
        with the future also reachable by poll_now. No task per sleep: a shielded wait left a task behind
        on every timeout (measured: 143 a second on a 72-engine pool, memory growing); a timeout scope
        around an event wait cost twice this."""
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        timer = loop.call_later(max(0.05, seconds), _release, waiter)
        self.sleepers.add(waiter)
        try:
            await waiter
        finally:
            timer.cancel()
            self.sleepers.discard(waiter)

    async def _full_collections(self) -> None:
        while True:
            await asyncio.sleep(self.gc.full_every_s)
            self.gc.collect()

    # -- the loops -------------------------------------------------------------------------------------
    def _spawn_polls(
        self, sources: Sequence[tuple[str, Polled[T], object | None]], apply: Callable[[T], object], what: str
    ) -> None:
        """A loop for each target, but one for the targets of each batch they share (`shared`, not None)."""
        batches: dict[int, list[tuple[str, Polled[T]]]] = {}
        for name, source, shared in sources:
            if shared is None:
                self._spawn(self._loop(source, apply), name)
            else:
                batches.setdefault(id(shared), []).append((name, source))
        for members in batches.values():
            self._spawn(self._batch_loop(members, apply), f"{len(members)} {what}")

    async def _loop(self, source: Polled[T], apply: Callable[[T], object]) -> None:
        """One target's loop: the next poll starts only after this one finished (no overlap)."""
        try:
            while True:
                started = time.monotonic()
                apply(await source.poll())
                await self._sleep(self.config.settings.poll_interval_s - (time.monotonic() - started))
        finally:
            await source.aclose()

    async def _batch_loop(self, members: Sequence[tuple[str, Polled[T]]], apply: Callable[[T], object]) -> None:
        """The targets read from one shared batch (a query API's engines, or its hosts), polled in one pass a
        tick: their readings come from one batch anyway, and a loop each woke 1,250 tasks every 2 s at 1,000
        engines and 250 hosts, each with its timer, its future and its task step (issue 39). The event loop
        gets a turn every HANDOUT targets, so a redraw or a key press never waits for the whole pass. A target
        whose result fails to apply stops as its own loop would: told, and left out of the next passes."""
        live = list(members)
        try:
            while live:
                started = time.monotonic()
                for place, (name, source) in enumerate(list(live), 1):
                    try:
                        apply(await source.poll())
                    except Exception as error:  # one target's failure is told; the others go on
                        live.remove((name, source))
                        self._stopped(name, error)
                    if place % HANDOUT == 0:
                        await asyncio.sleep(0)
                await self._sleep(self.config.settings.poll_interval_s - (time.monotonic() - started))
        finally:
            for _, source in members:
                await source.aclose()

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
                self._tell(Update(gateway.name, "gateway"))
        finally:
            await poller.aclose()

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
        why = restarted(self.container_starts.get(engine.name), start)
        if start is not None:
            self.container_starts[engine.name] = start
        if why is not None and start is not None and self.state.record_restart(engine.name, now, start.started_epoch):
            events = tuple(self.alerts.restarted(engine.name, now))
            self._tell(Update(engine.name, "restart", events, why, at=now, restarts=(now,)))
            if engine.name in self._logged:
                self._spawn(self._read_log(engine, f"restarted ({why})"), engine.name)
        elif why is not None:  # the restart its counters marked already: the container's record says why
            self.events.cause(engine.name, why, now)

    async def _read_log(self, engine: Engine, why: str) -> None:
        """The engine's recent log, read after it went down or restarted and run through the failure-mode
        library: each mode found is an alert saying what it means and what to change, attached to that event."""
        conn = self.ssh.connections.get(engine.host or "") if self.ssh else None
        if conn is None or not has_log_source(engine):
            return
        read = await read_logs(conn, engine, since_s=LOG_WINDOW_S, lines=LOG_LINES)
        now = self.state.clock()
        diagnosis = Diagnosis(now, why, read.source, read.findings, read.error)
        self.state.engines[engine.name].diagnosis = diagnosis
        events = self.alerts.log_findings(engine.name, read.findings, now, f"{engine.name} {why}")
        self._tell(Update(engine.name, "diagnosis", tuple(events), read.error, at=now, diagnosis=diagnosis))

    async def _read_ollama_server(self, engine: Engine) -> None:
        """OLLAMA_KEEP_ALIVE / OLLAMA_NUM_PARALLEL from the server config line of the Ollama engine's log."""
        conn = self.ssh.connections.get(engine.host or "") if self.ssh else None
        if conn is None or not has_log_source(engine):
            return
        self.state.engines[engine.name].ollama_server = await read_server_settings(conn, engine)
        self._tell(Update(engine.name, "engine"))

    def fill_history(self, stored: StoredHistory) -> None:
        """The charts' points read back on launch (the history store, `[prometheus]`) put before the live
        ones, on the event loop; the restarts among them told, as the live ones are."""
        from poolconsole.runtime.store.charts import fill_history  # the store's modules load with a store

        for name, marks in fill_history(self.state, stored).items():
            self._tell(Update(name, "history", restarts=marks))

    # -- applying results ----------------------------------------------------------------------------
    # The loops run on the event loop of the runtime's clients, so a result goes straight into the model
    # (no message per poll: a UI framework's dispatch cost more than the update itself, 143 times a
    # second on a 72-engine pool).
    def apply_engine(self, snapshot: EngineSnapshot) -> EngineView:
        started = time.perf_counter()
        track = self.state.engines[snapshot.name]
        was = track.view.state if track.view is not None else None
        last = track.last_read
        # The same sample again (read from Prometheus between two scrapes: PoolState.apply_engine's test):
        # the pool state keeps its view, and the alerts saw that view at that sample's time already (a
        # repeat's time is the scrape's), so they are not asked again, nor are its restart mark and log
        # read told twice, nor is it recorded again: the store keeps each scrape once, at its time (a
        # repeat's row was the same view a microsecond after it; at 1,000 engines scraped every 5 s and
        # polled every 2 s, 60 % of the rows and a third of the store's writer's time; issue 39).
        repeat = snapshot.metrics is not None and last is not None and track.view is not None
        repeat = repeat and last is not None and snapshot.monotonic == last.monotonic
        view = self.state.apply_engine(snapshot)
        events = [] if repeat else self.alerts.engine(view, snapshot.fetched_at, restarted=track.counted_reset)
        if self.recorder is not None and not repeat:
            self.recorder.engine(view, dict(track.totals), snapshot.fetched_at)
        down = view.state is EngineState.DOWN and was is not None and was != EngineState.DOWN
        if track.config.kind is EngineKind.OLLAMA and view.state is EngineState.OK and was != EngineState.OK:
            self._spawn(self._read_ollama_server(track.config), snapshot.name)  # first answer, or back from down
        if (down or (view.counter_resets and was is not None and not repeat)) and snapshot.name in self._logged:
            self._spawn(self._read_log(track.config, "went down" if down else "restarted"), snapshot.name)
        if snapshot.name in self._inspect and view.state is EngineState.OK:
            due = self._inspected_at.get(snapshot.name, -1e18) + self.container_check_s
            if was is not EngineState.OK or snapshot.fetched_at >= due:  # the baseline, back up, or once a minute
                self._inspected_at[snapshot.name] = snapshot.fetched_at
                self._spawn(self._container_check(track.config), snapshot.name)
        self.update_times.add(time.perf_counter() - started)
        marks = (snapshot.fetched_at,) if track.counted_reset and not repeat else ()
        self._tell(Update(snapshot.name, "engine", tuple(events), at=snapshot.fetched_at, restarts=marks))
        return view

    def apply_host(self, snapshot: HostSnapshot) -> None:
        started = time.perf_counter()
        last = self.state.hosts[snapshot.name].snapshot
        # The same scrapes again (a host read from Prometheus between two scrapes keeps their time, as an
        # engine's repeat keeps its stamp): the alerts saw it at that time already, and the store holds it.
        repeat = last is not None and snapshot.fetched_at == last.fetched_at and snapshot.state is last.state
        self.state.apply_host(snapshot)
        events = [] if repeat else self.alerts.host(snapshot, snapshot.fetched_at)
        if self.recorder is not None and not repeat:
            self.recorder.host(snapshot, snapshot.fetched_at)
        self.update_times.add(time.perf_counter() - started)
        self._tell(Update(snapshot.name, "host", tuple(events), at=snapshot.fetched_at))
