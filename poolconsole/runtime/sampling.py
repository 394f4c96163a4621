"""A bounded sampling run of the pool, for `status`: the runtime's own pollers (engines from `engine_pollers`,
hosts from `host_pollers`: the one choice of source, as the live pool makes it), every engine polled N times
S seconds apart and every host once, all concurrently, then closed. A dead target only delays itself.

What it returns is what the live pool would show of the same polls: each engine's view of its samples
(model.view) and each host's snapshot, in the config's order."""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from dataclasses import dataclass
from typing import Any

from poolconsole.collect.engine_sources import EngineSource, engine_pollers
from poolconsole.collect.hosts.sampling import sample_hosts
from poolconsole.config.models import PoolConfig
from poolconsole.model.hosts import HostSnapshot, HostState
from poolconsole.model.snapshots import EngineSnapshot, EngineState
from poolconsole.model.view import EngineView, engine_view


async def _poll_engine_n(poller: EngineSource, samples: int, interval_s: float) -> list[EngineSnapshot]:
    out: list[EngineSnapshot] = []
    for i in range(samples):
        started = time.monotonic()
        out.append(await poller.poll())
        if i + 1 < samples:
            await asyncio.sleep(max(0.0, interval_s - (time.monotonic() - started)))
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


async def sample(config: PoolConfig, samples: int = 2, interval_s: float = 1.0) -> PoolSample:
    """The bounded run: `samples` polls of each engine `interval_s` apart, one of each host, concurrently."""
    engines, hosts = await asyncio.gather(sample_engines(config, samples, interval_s), sample_hosts(config))
    return PoolSample(
        dt.datetime.now(dt.UTC),
        tuple(engine_view(engines[e.name]) for e in config.engines),
        tuple(hosts),
    )
