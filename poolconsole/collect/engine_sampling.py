"""Poll every engine of a pool concurrently, N times S seconds apart (the `status` command's loop)."""

from __future__ import annotations

import asyncio
import time

from poolconsole.collect.engine_sources import EngineSource, engine_pollers
from poolconsole.config.models import PoolConfig
from poolconsole.model.snapshots import EngineSnapshot


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
    """One independent loop per engine, all concurrent: a dead engine only delays itself."""
    pollers = engine_pollers(config)
    try:
        results = await asyncio.gather(*(_poll_engine_n(p, samples, interval_s) for p in pollers))
        return {p.engine.name: r for p, r in zip(pollers, results, strict=True)}
    finally:
        await asyncio.gather(*(p.aclose() for p in pollers))
