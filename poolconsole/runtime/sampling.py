"""A bounded sampling run of the pool, for `status`, as a PoolSource (runtime.source): the runtime's own pollers
(engines from `engine_pollers`, hosts from `host_pollers`: the one choice of source, as the live pool makes it),
every engine polled N times S seconds apart and every host once, all concurrently, then closed. A dead target
only delays itself.

Its state holds what the live pool would show of the same polls: each engine's view of all its samples
(model.view), applied when its last poll is in, and each host's snapshot. Subscribers hear each applied
result, as the live pool tells them, and the alert rules see it."""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from poolconsole.collect.engine_sources import EngineSource, engine_pollers
from poolconsole.collect.hosts.sampling import HostSource, host_pollers
from poolconsole.collect.ssh import SSHPool
from poolconsole.collect.tasks import reap
from poolconsole.config.models import PoolConfig
from poolconsole.model.alerts import Alerts
from poolconsole.model.events import EventLog
from poolconsole.model.hosts import HostSnapshot, HostState
from poolconsole.model.pool_state import PoolState
from poolconsole.model.snapshots import EngineSnapshot, EngineState
from poolconsole.model.view import EngineView, engine_view
from poolconsole.runtime.live import Subscriber, Update
from poolconsole.runtime.source import Capabilities, Unrecorded

CAPABILITIES = Capabilities(live=True, replay=False, read_only=True)
"""It polls the pool, and changes nothing in it: `status` offers no action."""


async def _poll_engine_n(
    poller: EngineSource, samples: int, interval_s: float, wait: Callable[[float], Awaitable[None]] = asyncio.sleep
) -> list[EngineSnapshot]:
    out: list[EngineSnapshot] = []
    for i in range(samples):
        started = time.monotonic()
        out.append(await poller.poll())
        if i + 1 < samples:
            await wait(max(0.0, interval_s - (time.monotonic() - started)))
    return out


async def sample_engines(
    config: PoolConfig,
    samples: int = 2,
    interval_s: float = 1.0,
) -> dict[str, list[EngineSnapshot]]:
    """Every engine's `samples` polls, oldest first: one independent loop per engine, all concurrent."""
    pollers = engine_pollers(config)
    try:
        results = await asyncio.gather(*(_poll_engine_n(p, samples, interval_s) for p in pollers))
        return {p.engine.name: r for p, r in zip(pollers, results, strict=True)}
    finally:
        await asyncio.gather(*(p.aclose() for p in pollers))


@dataclass(frozen=True)
class PoolSample:
    """One sampling run: each engine's view of its polls and each host's snapshot, in the config's order."""

    taken_at: dt.datetime
    engines: tuple[EngineView, ...]
    hosts: tuple[HostSnapshot, ...]

    @property
    def healthy(self) -> bool:
        """Every engine and every host answered as it should (`status` exits 0)."""
        return all(e.state is EngineState.OK for e in self.engines) and all(h.state is HostState.OK for h in self.hosts)

    def to_json(self) -> dict[str, Any]:
        """The document `status --json` prints."""
        return {
            "taken_at": self.taken_at.isoformat(timespec="seconds"),
            "engines": [e.to_json() for e in self.engines],
            "hosts": [h.to_json() for h in self.hosts],
        }


class SampleSource(Unrecorded):
    """The bounded run as a PoolSource: `start` begins it on the running loop, `finished` waits for its end and
    says what it took, `stop` ends it early (or after) and closes every poller. `poll_now` cuts the wait before
    each engine's next poll short."""

    def __init__(
        self, config: PoolConfig, samples: int = 2, interval_s: float = 1.0, *, clock: Callable[[], float] = time.time
    ) -> None:
        self.config = config
        self.samples = samples
        self.interval_s = interval_s
        self.state = PoolState(config, clock)
        self.alerts = Alerts(config.alerts)
        self.events = EventLog()
        self.taken_at: dt.datetime | None = None
        """When the run ended (None: not yet)."""
        self._subscribers: list[Subscriber] = []
        self._wakers: set[asyncio.Future[None]] = set()
        self._task: asyncio.Task[None] | None = None
        self.subscribe(self.events.heard)  # the first subscriber, as in the live pool: the timeline is current

    # -- the PoolSource contract ----------------------------------------------------------------------
    @property
    def capabilities(self) -> Capabilities:
        return CAPABILITIES

    def clock(self) -> float:
        return self.state.clock()

    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        self._subscribers.append(callback)
        return lambda: self._subscribers.remove(callback)

    def start(self) -> None:
        self._started()

    async def stop(self) -> None:
        if self._task is not None and not self._task.done():
            await reap(self._task)

    def poll_now(self) -> None:
        for waiter in list(self._wakers):
            _release(waiter)

    # -- the run --------------------------------------------------------------------------------------
    async def finished(self) -> PoolSample:
        """Wait for the run (started here if it was not) and say what it took; a poller's failure is raised."""
        await self._started()
        return self.sample()

    def sample(self) -> PoolSample:
        """What the state holds at the run's end: each engine's view and each host's snapshot, in the
        config's order."""
        if self.taken_at is None:
            raise RuntimeError("the sampling run has not finished")
        views = [self.state.engines[e.name].view for e in self.config.engines]
        hosts = [self.state.hosts[h.name].snapshot for h in self.config.hosts]
        return PoolSample(
            self.taken_at,
            tuple(v for v in views if v is not None),
            tuple(h for h in hosts if h is not None),
        )

    def _started(self) -> asyncio.Task[None]:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="sample the pool")
        return self._task

    def _tell(self, update: Update) -> None:
        for callback in list(self._subscribers):
            callback(update)

    async def _run(self) -> None:
        await asyncio.gather(self._engines(), self._hosts())
        self.taken_at = dt.datetime.now(dt.UTC)

    async def _engines(self) -> None:
        pollers = engine_pollers(self.config)
        try:
            await asyncio.gather(*(self._engine(p) for p in pollers))
        finally:
            await asyncio.gather(*(p.aclose() for p in pollers))

    async def _engine(self, poller: EngineSource) -> None:
        samples = await _poll_engine_n(poller, self.samples, self.interval_s, self._wait)
        view = engine_view(samples)  # the run's view: rates, latencies and resets over all its samples
        at = samples[-1].fetched_at
        self.state.apply_view(view, at)
        events = tuple(self.alerts.engine(view, at))
        self._tell(Update(view.name, "engine", events, at=at))

    async def _hosts(self) -> None:
        remote = [h for h in self.config.hosts if not h.local]
        ssh = SSHPool(remote, self.config.settings.ssh_timeout_s, self.config.settings.ssh_concurrency)
        sources = host_pollers(self.config, ssh)
        try:
            await asyncio.gather(*(self._host(s) for s in sources))
        finally:
            for source in sources:
                await source.aclose()
            await ssh.close()

    async def _host(self, source: HostSource) -> None:
        snapshot = await source.poll()
        self.state.apply_host(snapshot)
        events = tuple(self.alerts.host(snapshot, snapshot.fetched_at))
        self._tell(Update(snapshot.name, "host", events, at=snapshot.fetched_at))

    async def _wait(self, seconds: float) -> None:
        """Until the next poll is due, or poll_now."""
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        timer = asyncio.get_running_loop().call_later(seconds, _release, waiter)
        self._wakers.add(waiter)
        try:
            await waiter
        finally:
            timer.cancel()
            self._wakers.discard(waiter)


def _release(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)
