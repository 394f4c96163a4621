"""`r` polls streamed hosts at once too (issue 13): the simulated pool's hosts over asyncssh, whose
telemetry comes from one remote loop per host (collect.hosts.stream) sampling once a minute here."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from poolconsole.config import parse_config
from poolconsole.sim.demo import SimPool
from poolconsole.ui.app import PoolApp


async def wait_for(condition: Callable[[], bool], timeout_s: float) -> bool:
    for _ in range(int(timeout_s / 0.1)):
        if condition():
            return True
        await asyncio.sleep(0.1)
    return condition()


async def test_r_polls_streamed_hosts_now(tmp_path: Path) -> None:
    pool = SimPool(seed=14)
    await pool.start(tmp_path / "keys")
    try:
        await pool.wait_ready()
        config = parse_config(pool.config_toml().replace("poll_interval_s = 1.0", "poll_interval_s = 60.0"))
        assert config.hosts
        app = PoolApp(config, theme_state=tmp_path / "ui.json")
        async with app.run_test(size=(160, 40)) as pilot:
            hosts = app.state.hosts
            assert await wait_for(lambda: all(t.snapshot is not None for t in hosts.values()), 30.0)
            await asyncio.sleep(1.0)
            before = {name: t.snapshot for name, t in hosts.items()}
            assert all(s is not None and s.state.value == "ok" for s in before.values()), before
            await pilot.press("r")
            # each host's remote loop samples once a minute: a new snapshot within seconds is `r`'s
            assert await wait_for(lambda: all(t.snapshot is not before[n] for n, t in hosts.items()), 10.0), [
                n for n, t in hosts.items() if t.snapshot is before[n]
            ]
            assert all(t.snapshot is not None and t.snapshot.state.value == "ok" for t in hosts.values())
    finally:
        await pool.stop()
