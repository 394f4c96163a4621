"""The events timeline (issue 18 item 4) as an operator meets it: on the demo pool's restart scenario the
overview's pane names each restart with its cause, newest first; `e` hides and shows the pane, `E` opens
every event with a filter (typing "q" into it types, it does not quit); in a replay the pane shows the
restarts and alerts the recording holds and says the rest is live-only."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path

from textual.widgets import DataTable, Input, Static

from poolconsole.config import parse_config
from poolconsole.model.pool_state import PoolState
from poolconsole.runtime.replay import Replay
from poolconsole.runtime.store import Store
from poolconsole.sim.demo import SimPool
from poolconsole.ui.app import PoolApp
from poolconsole.ui.grid import PoolGrid
from poolconsole.ui.screens.events import EventsScreen
from poolconsole.ui.screens.overview import OverviewScreen
from tests.helpers import uipool
from tests.ui.test_console import settle

RESTARTING = ("qwen2.5-coder-3090", "qwen3-30b-a3b")
"""The restart scenario's two engines: llama.cpp answering 503 while it loads, vLLM refusing connections."""


@asynccontextmanager
async def restart_scenario(keys: Path) -> AsyncIterator[SimPool]:
    """`poolconsole demo --scenario restart`, its restarts every 6 s instead of 40 (hosts over SSH)."""
    pool = SimPool("restart", seed=21)
    pool.restart_every_s = 6.0
    await pool.start(keys)
    try:
        await pool.wait_ready()
        yield pool
    finally:
        await pool.stop()


def pane(app: PoolApp) -> list[str]:
    return str(app.screen.query_one("#events", Static).render()).splitlines()


async def test_the_pane_shows_the_restart_scenarios_restarts(tmp_path: Path) -> None:
    async with restart_scenario(tmp_path / "keys") as pool:
        config = parse_config(pool.config_toml().replace("poll_interval_s = 1.0", "poll_interval_s = 0.5"))
        app = PoolApp(config, theme_state=tmp_path / "ui.json")
        app.audit_path = tmp_path / "audit.sqlite3"  # none yet: no past actions
        async with app.run_test(size=(120, 40)) as pilot:
            seen: dict[str, str] = {}
            for _ in range(120):
                await asyncio.sleep(0.25)
                await settle(pilot, app)
                for line in pane(app)[1:]:
                    found = re.match(r"\d\d:\d\d:\d\d  (\S+)  restarted \((.+)\)$", line)
                    if found:
                        seen[found.group(1)] = found.group(2)
                if set(RESTARTING) <= set(seen):
                    break
            assert set(RESTARTING) <= set(seen), pane(app)
            for cause in seen.values():  # each with its cause: its counters, the container's record, its log
                assert "counters" in cause or "container" in cause or "log" in cause, seen
            lines = pane(app)
            assert lines[0].startswith("Events, newest first")
            times = [line[:8] for line in lines[1:]]
            assert times == sorted(times, reverse=True)  # newest first

            table = app.screen.query_one("#pool", PoolGrid)
            rows_with_pane = table.size.height
            await pilot.press("e")  # the registry's key: the pane goes, the table takes its lines
            await settle(pilot, app)
            assert not app.screen.query_one("#events", Static).display
            assert table.size.height > rows_with_pane
            await pilot.press("e")
            await settle(pilot, app)
            assert app.screen.query_one("#events", Static).display

            await pilot.press("E")
            await settle(pilot, app)
            assert isinstance(app.screen, EventsScreen)
            log = app.screen.query_one("#event-log", DataTable)
            targets = {str(log.get_row_at(i)[1]) for i in range(log.row_count)}
            assert set(RESTARTING) <= targets
            await pilot.press(*"qwen2.5")  # "q" is a letter in the filter, not quit
            await settle(pilot, app)
            assert app.is_running and isinstance(app.screen, EventsScreen)
            assert app.screen.query_one("#events-filter", Input).value == "qwen2.5"
            assert 0 < log.row_count < len(app.events.entries)
            assert all(str(log.get_row_at(i)[1]) == "qwen2.5-coder-3090" for i in range(log.row_count))
            await pilot.press("escape")
            await settle(pilot, app)
            assert isinstance(app.screen, OverviewScreen)


def write_recording(path: Path) -> tuple[str, float]:
    """One engine recorded for 20 s whose counters reset (a restart) at the 6th poll. Returns the engine
    and the restart's time (wall-clock times: a replay reads the recording's end from its last write)."""
    cfg = uipool.config()
    state = PoolState(cfg)
    view = next(v for v in (state.apply_engine(s) for s in uipool.engine_snapshots(cfg)) if v.host is not None)
    store = Store(path, background=False)
    first = time.time() - 30
    restart_at = first + 10.0
    for i in range(10):
        at = first + i * 2.0
        polled = replace(view, polled_at=at, counter_resets=1 if at == restart_at else 0)
        store.add("engine", polled, {}, at)
    store.flush()
    store.close()
    return view.name, restart_at


async def test_a_replay_shows_the_recordings_restarts_and_says_the_rest_is_live_only(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite3"
    engine, restart_at = write_recording(path)
    replay = Replay(path)
    app = PoolApp(replay.config, replay=replay, theme_state=tmp_path / "ui.json")
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            app.action_replay_pause()
            replay.seek(60)  # to the end of the recording
            await settle(pilot, app)
            lines = pane(app)
            assert lines[0].startswith("Events in the recording: restarts and alerts")
            assert "live-only" in lines[0]
            clock = time.strftime("%H:%M:%S", time.gmtime(restart_at))
            assert f"{clock}  {engine}  restarted (its counters went back to zero: a new process)" in lines, lines
    finally:
        replay.close()
