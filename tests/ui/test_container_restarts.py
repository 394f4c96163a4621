"""Restarts the engine's counters cannot show are still seen: the container's own record (docker /
podman inspect over SSH, read when an engine comes back from being down) marks the restart."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType
from typing import cast

from poolconsole.collect.containers import ContainerStart, inspect_command, parse_inspect, restarted
from poolconsole.config import parse_config
from poolconsole.config.models import Control
from poolconsole.model.pool_state import PoolState
from poolconsole.model.snapshots import COUNTERS, EngineSnapshot
from poolconsole.ui.app import PoolApp
from tests.helpers import uipool
from tests.ui.test_console import demo_pool

ONE_ENGINE = """
[[engines]]
name = "e"
kind = "vllm"
url = "http://127.0.0.1:9"
"""


def test_inspect_command_and_its_answer() -> None:
    assert inspect_command(Control(backend="podman", name="vllm-a")) == (
        "podman inspect --format '{{.RestartCount}} {{.State.StartedAt}}' vllm-a"
    )
    assert inspect_command(Control(backend="systemd", name="llama.service")) is None
    first = parse_inspect("0 2026-12-01T09:00:00.1Z\n")
    assert first == ContainerStart(0, "2026-12-01T09:00:00.1Z")
    assert restarted(first, first) is None and restarted(None, first) is None
    again = parse_inspect("1 2026-12-01T09:05:00.2Z")
    assert restarted(first, again) == "container restarted, restart count 0 -> 1"
    assert parse_inspect("Error: no such container") is None
    assert parse_inspect("3 2026-12-01T09:05:00.123456789Z").started_epoch == 1796115900.123456  # type: ignore[union-attr]


def test_a_restart_read_late_from_the_container_is_not_counted_again() -> None:
    """The counters mark a restart at the first ok poll; the container's record of the same start can
    arrive much later on a loaded machine (a slow SSH round trip): its start time says it is the same."""
    state = PoolState(parse_config(ONE_ENGINE))
    history = state.engines["e"].history
    history.restarts.append(1000.0)  # the counters saw it at the first poll after the start at 998
    assert not state.record_restart("e", 1030.0, started_at=998.0)
    assert list(history.restarts) == [1000.0]
    assert state.record_restart("e", 1060.0, started_at=1050.0)  # a later start is a new restart
    assert not state.record_restart("e", 1061.0)  # and within two polls of it, the same one
    assert list(history.restarts) == [1000.0, 1060.0]


def test_a_restart_the_container_showed_first_is_not_counted_again_by_the_counters() -> None:
    """On a loaded machine the container's record can show the new start before the counters' reset is
    read (an ok poll without metrics, then the reset a second later): one restart, not two."""
    config = uipool.config()
    first = next(s for s in uipool.engine_snapshots(config) if s.kind == "vllm" and s.metrics is not None)
    assert first.metrics is not None
    lower = {k: (1.0 if k in COUNTERS else v) for k, v in first.metrics.values.items()}

    def reset_at(dt: float) -> EngineSnapshot:
        assert first.metrics is not None
        metrics = replace(first.metrics, values=cast(MappingProxyType[str, float], lower))
        return replace(first, fetched_at=first.fetched_at + dt, monotonic=first.monotonic + dt, metrics=metrics)

    plain = PoolState(config, uipool.clock)  # the counters alone: their reset is the restart
    plain.apply_engine(first)
    plain.apply_engine(reset_at(2.0))
    assert list(plain.engines[first.name].history.restarts) == [first.fetched_at + 2.0]
    assert plain.engines[first.name].counted_reset

    state = PoolState(config, uipool.clock)
    state.apply_engine(first)
    assert state.record_restart(first.name, first.fetched_at + 1.0, started_at=first.fetched_at + 0.5)
    state.apply_engine(reset_at(2.0))  # the same restart, read a second later by the counters
    track = state.engines[first.name]
    assert list(track.history.restarts) == [first.fetched_at + 1.0] and not track.counted_reset


async def test_the_container_record_marks_a_restart_once(tmp_path: Path) -> None:
    async with demo_pool(21, tmp_path / "keys") as pool:
        name = "qwen2.5-coder-3090"
        app = PoolApp(parse_config(pool.config_toml()), theme_state=tmp_path / "ui.json")
        app.runtime.container_check_s = 1.0
        async with app.run_test(size=(140, 40)):
            for _ in range(80):
                if name in app.runtime.container_starts:
                    break
                await asyncio.sleep(0.25)
            baseline = app.runtime.container_starts[name]
            assert baseline.restart_count == 0  # read once, at the first ok poll
            assert not app.state.engines[name].history.restarts
            # a restart the counters did not show: the container's record alone says so
            app.runtime.container_starts[name] = ContainerStart(0, "2026-01-01T00:00:00.0Z")
            await app.runtime._container_check(app.state.engines[name].config)
            assert len(app.state.engines[name].history.restarts) == 1
            assert len(app.alerts.restarts[name]) == 1  # the restart-loop rule counted it
            # a real restart, seen by both the counters and the container: counted once
            await asyncio.sleep(2 * app.config.settings.poll_interval_s + 1.5)
            await pool.restart(name)  # loading (503) for a while, then back
            for _ in range(80):
                if app.runtime.container_starts[name].restart_count == 1:
                    break
                await asyncio.sleep(0.25)
            assert app.runtime.container_starts[name].restart_count == 1
            await asyncio.sleep(1.0)
            assert len(app.state.engines[name].history.restarts) == 2
