"""The launch's fill of the charts reads only what the rings keep (issue 39): from the history store each
engine's newest points up to twice its rings' capacity, with every restart of the window kept as a time;
from `[prometheus]` a range of as many steps as the engine's rings keep, a few engines at a time. Before,
it read two hours of every engine (RSS 133 -> 240 MiB at 1,000 engines read through Prometheus)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from poolconsole.collect.prometheus.range import RangeReading
from poolconsole.collect.prometheus.source import PrometheusAPI
from poolconsole.config import parse_config
from poolconsole.config.models import Engine
from poolconsole.model.pool_state import HISTORY_POINTS, SHORT_POINTS, PoolState
from poolconsole.runtime import prometheus_history
from poolconsole.runtime.store import Store, StoredHistory, fill_history, read_history
from tests.helpers import uipool
from tests.integration.test_store import sample_view

POLLS = 3 * SHORT_POINTS


def test_the_store_read_keeps_what_the_rings_hold_and_every_restart(tmp_path: Path) -> None:
    cfg = uipool.config()
    view = sample_view()
    path = tmp_path / "history.sqlite3"
    store = Store(path, background=False)
    t0 = time.time() - 3600
    restarted = (3, POLLS - 10)
    for i in range(POLLS):
        store.engine(replace(view, polled_at=t0 + 2 * i, counter_resets=int(i in restarted)), {}, t0 + 2 * i)
    store.close()

    state = PoolState(cfg)
    stored = read_history(path, cfg, t0 - 1, t0 + 2 * POLLS, None, state.capacity_of)
    points = stored.engines[view.name]
    assert len(points) == 2 * SHORT_POINTS  # not POLLS
    assert points[-1][0] == t0 + 2 * (POLLS - 1)
    assert stored.restarts == {view.name: [t0 + 6]}  # the older one, pushed out, as a time
    marked = fill_history(state, stored)
    assert marked == {view.name: (t0 + 6, t0 + 2 * (POLLS - 10))}
    history = state.engines[view.name].history
    assert len(history.times) == SHORT_POINTS and history.times[-1] == t0 + 2 * (POLLS - 1)

    everything = read_history(path, cfg, t0 - 1, t0 + 2 * POLLS)  # a detail's read: no capacity, all of it
    assert len(everything.engines[view.name]) == POLLS and everything.restarts == {}


async def test_the_prometheus_range_asks_for_what_each_ring_keeps(monkeypatch: pytest.MonkeyPatch) -> None:
    engines = "".join(
        f'[[engines]]\nname = "e{i}"\nkind = "vllm"\nurl = "http://127.0.0.1:{8000 + i}"\nread = "prometheus"\n'
        for i in range(40)
    )
    config = parse_config(f'[prometheus]\nurl = "http://127.0.0.1:9"\n{engines}')
    asked: list[tuple[int, float, float, float]] = []

    async def read_range(
        api: PrometheusAPI, chosen: Sequence[Engine], start: float, end: float, step: float
    ) -> RangeReading:
        asked.append((len(chosen), start, end, step))
        return RangeReading({})

    monkeypatch.setattr(prometheus_history, "read_range", read_range)
    state = PoolState(config)
    state.keep_full("e7")
    until = 1_000_000.0
    fill = prometheus_history.with_prometheus_history
    assert await fill(config, StoredHistory(), until, None, state.capacity_of) == []
    step = config.settings.poll_interval_s
    short = until - (SHORT_POINTS - 1) * step
    full = until - (HISTORY_POINTS - 1) * step
    assert asked == [(32, short, until, step), (7, short, until, step), (1, full, until, step)]

    asked.clear()  # a detail's read (no capacity): the whole window
    await fill(config, StoredHistory(), until, ("e3",))
    assert asked == [(1, full, until, step)]
