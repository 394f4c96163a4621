"""A detail opened on an engine whose rings are short (issue 39: every engine keeps SHORT_POINTS, only those
opened lately the full HISTORY_POINTS) shows its whole history: the older points are read back from the
history store when it opens, the chart drawing what it had meanwhile.

The engine answers nothing (a closed port on 127.0.0.1): its polls fail, so every point before them comes
from the store, which holds an hour of polls 2 s apart."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

from poolconsole.config import parse_config
from poolconsole.model.pool_state import HISTORY_POINTS, SHORT_POINTS, PoolState
from poolconsole.runtime.replay import Replay
from poolconsole.runtime.store import Store
from poolconsole.ui.app import PoolApp
from poolconsole.ui.screens.detail import DetailScreen
from tests.helpers import uipool
from tests.ui.test_history_fill import closed_port

HOUR = 1790
"""Stored polls: an hour at 2 s (less the 20 s before the console starts)."""


async def test_a_detail_shows_the_stored_hour_of_an_engine_with_short_rings(tmp_path: Path) -> None:
    cfg = uipool.config()
    view = next(v for v in (PoolState(cfg).apply_engine(s) for s in uipool.engine_snapshots(cfg)) if v.kind == "vllm")
    config = parse_config(
        f'[[engines]]\nname = "{view.name}"\nkind = "vllm"\nurl = "http://127.0.0.1:{closed_port()}"\n'
        "[settings]\npoll_interval_s = 1\n"
    )
    path = tmp_path / "history.sqlite3"
    store = Store(path, background=False)
    t0 = time.time() - 3590  # within the hour the detail reads (HISTORY_POINTS polls of 1 s), the last 12 s ago
    for i in range(HOUR):
        store.engine(replace(view, polled_at=t0 + 2 * i, kv_cache_usage=i / HOUR), {}, t0 + 2 * i)
    store.close()

    app = PoolApp(config, theme_state=tmp_path / "ui.json", store=path)
    async with app.run_test(size=(120, 40)) as pilot:
        track = app.state.engines[view.name]
        for _ in range(200):  # the launch's fill: the short rings take the newest stored points
            await pilot.pause(0.05)
            if len(track.history.times) >= SHORT_POINTS:
                break
        await pilot.pause(0.1)
        assert track.history.capacity == SHORT_POINTS and len(track.history.times) == SHORT_POINTS
        app.open_detail(f"engine:{view.name}")
        await pilot.pause(0.05)
        assert isinstance(app.screen, DetailScreen)
        assert track.history.capacity == HISTORY_POINTS, "the engine in detail does not keep full rings"
        for _ in range(200):
            await pilot.pause(0.05)
            if len(track.history.times) >= HOUR:
                break
        history = track.history
        assert len(history.times) >= HOUR, "the stored hour was not read back when the detail opened"
        assert history.times[0] == t0
        assert history.kv.tail(len(history.kv))[:HOUR] == [i / HOUR for i in range(HOUR)]
        assert len(history.window(3600.0, app.state.clock())) >= HOUR - 2  # what the 1 h chart draws


async def test_a_replays_detail_reads_its_recording_back(tmp_path: Path) -> None:
    """A replay keeps short rings too: the detail reads the recording it plays, up to the replay's position."""
    cfg = uipool.config()
    view = next(v for v in (PoolState(cfg).apply_engine(s) for s in uipool.engine_snapshots(cfg)) if v.kind == "vllm")
    path = tmp_path / "history.sqlite3"
    store = Store(path, background=False)
    polls = SHORT_POINTS + 220
    t0 = time.time() - 2 * polls - 30
    for i in range(polls):
        store.engine(replace(view, polled_at=t0 + 2 * i, kv_cache_usage=i / polls), {}, t0 + 2 * i)
    store.close()
    replay = Replay(path, start=t0 + 2 * (polls - 1))
    app = PoolApp(replay.config, replay=replay, theme_state=tmp_path / "ui.json")
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            app.action_replay_pause()
            track = app.state.engines[view.name]
            for _ in range(100):
                await pilot.pause(0.05)
                if len(track.history.times):
                    break
            await pilot.pause(0.1)
            assert 0 < len(track.history.times) <= SHORT_POINTS  # a short ring: the replay's preload at most
            app.open_detail(f"engine:{view.name}")
            for _ in range(200):
                await pilot.pause(0.05)
                if len(track.history.times) >= polls:
                    break
            history = track.history
            assert len(history.times) == polls, "the recording was not read back when the detail opened"
            assert history.times[0] == t0 and history.kv[0] == 0.0
    finally:
        replay.close()
