"""The ledger screen (issue 15): opened by its registry key from the overview, it reads the history store
in a worker and shows output tokens per day per engine as a chart, the day-by-engine table and the
decision; read-only changes nothing about it, and in a replay it reads the recording on the recording's
clock. The store is written here from real views (the example pool's captures) at chosen times."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

from textual.geometry import Region
from textual.pilot import Pilot
from textual.widgets import DataTable, Static
from textual_plotext import PlotextPlot

from poolconsole.model.pool_state import PoolState
from poolconsole.runtime.replay import Replay
from poolconsole.runtime.store import Store
from poolconsole.ui import registry
from poolconsole.ui.app import PoolApp
from poolconsole.ui.screens.ledger import LedgerScreen
from tests.helpers import uipool

DAY_S = 86400.0
KEY = next(a.key for a in registry.ACTIONS if a.id == "ledger")


def write_store(path: Path) -> tuple[str, float]:
    """One engine polled for 20 s yesterday and the last 20 s, 1,000 output tokens a poll; its host beside
    it. Returns the engine's name and the last poll's time. (The times are the wall clock's: a replay reads
    the recording's end from when the store was last written.)"""
    cfg = uipool.config()
    state = PoolState(cfg)
    view = next(v for v in (state.apply_engine(s) for s in uipool.engine_snapshots(cfg)) if v.host is not None)
    host = next(h for h in uipool.host_snapshots(cfg) if h.name == view.host)
    store = Store(path, background=False)
    first = at = time.time() - DAY_S - 30
    for day in range(2):
        for i in range(10):
            at = first + day * DAY_S + i * 2.0
            total = float((day * 10 + i) * 1000)
            polled = replace(
                view,
                polled_at=at,
                generation_tokens_total=total,
                increase={} if at == first else {"generation_tokens_total": 1000.0},
                requests_running=1.0,
            )
            store.add("engine", polled, {"generation_tokens_total": total}, at)
            store.host(replace(host, fetched_at=at), at)
    store.flush()
    store.close()
    return view.name, at


async def open_ledger(pilot: Pilot[None], app: PoolApp) -> LedgerScreen:
    await pilot.pause()
    await pilot.press(KEY)
    for _ in range(100):
        await pilot.pause(0.05)
        screen = app.screen
        if isinstance(screen, LedgerScreen) and (screen.doc is not None or screen.problem is not None):
            return screen
    raise AssertionError(f"the ledger screen did not open or did not read the store: {app.screen!r}")


def legend_text(screen: LedgerScreen) -> str:
    """The chart's legend as drawn, its lines joined."""
    legend = screen.query_one("#ledger-legend", Static)
    return " ".join(s.text for s in legend.render_lines(Region(0, 0, legend.size.width, legend.size.height)))


def assert_shows(screen: LedgerScreen, engine: str) -> None:
    assert screen.problem is None, screen.problem
    assert screen.doc is not None
    produced = {e["date"]: e["output_tokens"] for e in screen.doc["entries"] if e["engine"] == engine}
    # the first poll of the first day counts nothing; every other poll 1,000 tokens
    assert sum(produced.values()) == 19_000 and len(produced) >= 2
    table = screen.query_one("#ledger-table", DataTable)
    assert table.row_count == len(screen.doc["entries"]) > 0
    decision = str(screen.query_one("#ledger-decision", Static).render())
    assert f"{len(produced)} days of data" in decision and "too early" in decision
    chart = screen.query_one("#ledger-chart", PlotextPlot)
    drawn = chart.plt.build()
    assert "output tokens per day" in drawn and "█" in drawn  # the bars, not an empty frame
    assert "k┤" in drawn  # the axis in tokens: "10k", not "10000.0"
    assert f"██ {engine}" in legend_text(screen)  # over the chart, not drawn on its bars
    assert engine not in drawn


async def test_the_ledger_opens_from_its_key_in_a_read_only_console(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite3"
    engine, last = write_store(path)
    app = PoolApp(uipool.config(), live=False, read_only=True, clock=lambda: last + 1, theme_state=tmp_path / "ui.json")
    async with app.run_test(size=(140, 44)) as pilot:
        app.store_path = path  # as if the console recorded into it (mounting without one records nothing)
        screen = await open_ledger(pilot, app)
        assert_shows(screen, engine)
        # a larger pool: the six engines with the most output get a bar each, the rest one bar together
        many = [
            {"date": "2026-12-01", "engine": f"e{i}", "kind": "vllm", "output_tokens": 1000 * (i + 1)} for i in range(9)
        ]
        screen._chart(many)
        await pilot.pause()
        legend = legend_text(screen)
        names = [w.strip() for w in legend.split("██") if w.strip()]
        assert names == ["e3", "e4", "e5", "e6", "e7", "e8", "3 others"], legend
        screen._chart(many[2:])  # seven: the seventh as itself, not "1 others"
        await pilot.pause()
        names = [w.strip() for w in legend_text(screen).split("██") if w.strip()]
        assert names == ["e2", "e3", "e4", "e5", "e6", "e7", "e8"], names
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, LedgerScreen)


async def test_without_a_store_the_console_says_so(tmp_path: Path) -> None:
    app = PoolApp(uipool.config(), live=False, clock=uipool.clock, theme_state=tmp_path / "ui.json")
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.press(KEY)
        await pilot.pause()
        assert not isinstance(app.screen, LedgerScreen)
        assert any("no history store" in str(n.message) for n in app._notifications)


async def test_the_ledger_in_a_replay_reads_the_recording(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite3"
    engine, last = write_store(path)
    replay = Replay(path, start=last)
    app = PoolApp(replay.config, replay=replay, theme_state=tmp_path / "ui.json")
    try:
        async with app.run_test(size=(140, 44)) as pilot:
            app.action_replay_pause()
            screen = await open_ledger(pilot, app)
            assert screen.store == path
            assert abs(screen.now - last) < 60  # the recording's clock, not today's
            assert_shows(screen, engine)
    finally:
        replay.close()


async def test_the_ledger_shows_idle_burn_per_host_today(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite3"
    _, last = write_store(path)
    app = PoolApp(uipool.config(), live=False, read_only=True, clock=lambda: last + 1, theme_state=tmp_path / "ui.json")
    async with app.run_test(size=(140, 50)) as pilot:
        app.store_path = path
        screen = await open_ledger(pilot, app)
        assert screen.doc is not None
        (host,) = [h for h in screen.doc["hosts"] if h["date"] == screen.doc["to"]]
        assert host["busy_s"] > 0 and host["idle_s"] == 0  # the engine ran a request at every poll
        table = screen.query_one("#ledger-hosts", DataTable)
        assert table.row_count == 1
        assert str(table.get_cell(host["host"], "busy")) == "0 min"
        assert str(table.get_cell(host["host"], "load_w")) == f"{host['load_power_w']:.0f} W"
        assert str(table.get_cell(host["host"], "idle_w")) == "n/a"  # never idle: unknown, not 0 W
