"""The simulated pool answering for the length of a test: started (its hosts over SSH when `keys` is given),
ready, and stopped whatever the test did."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from poolconsole.sim.demo import SimPool


@contextlib.asynccontextmanager
async def answering(pool: SimPool, keys: Path | None) -> AsyncIterator[SimPool]:
    await pool.start(keys)
    try:
        await pool.wait_ready()
        yield pool
    finally:
        await pool.stop()
