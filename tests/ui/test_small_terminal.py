"""A small terminal is usable (issue 34, items 4 and 6). At 80x24 with a node down (the demo's `node-down`
scenario: ws48 unreachable, its engine down) the summary folds to its verdict and one line of figures, the
events pane gives way, and every engine of the pool is a row on screen; at 120x40 nothing of that folds.
At 120 columns the model column reads a long model name (14 cells of it), and a 4-GPU engine's memory
cell shows its used/total figure (the bars only where room remains). The rows are counted in what the
table draws, line by line, not in its list of rows."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import Static

from poolconsole.cli import DEMO_HINT
from poolconsole.ui.app import PoolApp
from poolconsole.ui.grid import PoolGrid
from tests.helpers import uipool
from tests.ui.test_console import feed, settle
from tests.ui.test_overview_summary import down

HINT = DEMO_HINT.format(user="~/.config/poolconsole/hosts.toml")
"""The demo's lines over the summary, as `poolconsole demo` fills them in."""
LONG_MODEL = "Qwen/Qwen3-Coder-480B-A35B-Instruct-FP8"


def app_for(tmp_path: Path, hint: str | None = None) -> PoolApp:
    return PoolApp(
        uipool.config(),
        live=False,
        clock=uipool.clock,
        theme_state=tmp_path / "ui.json",
        subtitle="test pool",
        hint=hint,
    )


def grid(app: PoolApp) -> PoolGrid:
    return app.screen.query_one("#pool", PoolGrid)


def summary(app: PoolApp) -> list[str]:
    return str(app.screen.query_one("#summary", Static).render()).splitlines()


def engines_on_screen(app: PoolApp) -> list[str]:
    """The engine rows the table draws in its visible region (its header line aside), each checked in the
    line drawn: the engine's name is there."""
    table = grid(app)
    top = int(table.scroll_y)
    lines = table.scrollable_content_region.height - 1  # the header line stays on top
    seen = []
    for y, key in enumerate(table.order[top : top + lines], start=1):
        if key.startswith("engine:"):
            drawn = table.render_line(y).text
            assert key[7:] in drawn, (key, drawn)
            seen.append(key)
    return seen


async def node_down(pilot: Pilot[Any]) -> None:
    app = pilot.app
    assert isinstance(app, PoolApp)
    await feed(app)
    down(app)
    await settle(pilot, app)
    app.clear_notifications()  # the alerts' toasts come and go with time, not with state
    await settle(pilot, app)


@pytest.mark.parametrize("hint", [None, HINT], ids=["own-pool", "demo-hint"])
async def test_at_80x24_with_a_node_down_every_engine_row_is_on_screen(tmp_path: Path, hint: str | None) -> None:
    app = app_for(tmp_path, hint)
    async with app.run_test(size=(80, 24)) as pilot:
        await node_down(pilot)
        lines = summary(app)
        assert lines[0].startswith("1 problem: ws48 unreachable (connection refused)"), lines
        assert len(lines) == 2, lines  # the verdict and one line of figures
        assert lines[1].startswith("engines 7/8 ok · generation "), lines
        assert not app.screen.query_one("#events", Static).display  # the events pane gave way first
        seen = engines_on_screen(app)
        assert len(seen) >= 8, seen
        assert set(seen) == {f"engine:{e.name}" for e in app.config.engines}
        assert seen[0] == "engine:qwen3-30b-a3b"  # the down one first


async def test_at_120x40_the_summary_and_the_events_stay_whole(tmp_path: Path) -> None:
    app = app_for(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await node_down(pilot)
        lines = summary(app)
        assert len(lines) == 5, lines
        text = " ".join(lines)
        for part in ("hosts 6/7 ok: ws48", "prompt", "VRAM dedicated", "power", "gateway", "oldest data"):
            assert part in text, lines
        assert app.screen.query_one("#events", Static).display
        assert len(engines_on_screen(app)) == 8


async def test_the_layout_folds_and_unfolds_with_the_terminal(tmp_path: Path) -> None:
    app = app_for(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await node_down(pilot)
        whole = summary(app)
        events = app.screen.query_one("#events", Static)
        await pilot.resize_terminal(80, 24)
        await settle(pilot, app)
        assert len(summary(app)) == 2 and not events.display
        assert len(engines_on_screen(app)) == 8
        await pilot.press("e")  # asked for, the pane shows on a short terminal too
        await settle(pilot, app)
        assert events.display and len(summary(app)) == 2
        await pilot.press("e")
        await settle(pilot, app)
        assert not events.display
        await pilot.resize_terminal(120, 40)
        await settle(pilot, app)
        assert not events.display  # as `e` left it
        await pilot.press("e")
        await settle(pilot, app)
        assert events.display and summary(app) == whole


async def test_at_120_columns_the_model_reads_and_a_4_gpu_engine_shows_its_memory(tmp_path: Path) -> None:
    app = app_for(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await feed(app)
        snap = [s for s in uipool.engine_snapshots(app.config) if s.name == "qwen3-next-80b"][-1]
        app.apply_engine(
            replace(snap, models=(LONG_MODEL,), fetched_at=snap.fetched_at + 1, monotonic=snap.monotonic + 1)
        )
        await settle(pilot, app)
        table = grid(app)
        keys = table.column_keys
        assert "model" in keys and "vram" in keys
        line = table.render_line(1 + table.order.index("engine:qwen3-next-80b") - int(table.scroll_y)).text
        x = 0
        drawn: dict[str, str] = {}
        for column in table.columns:
            start = x + table.pad[0]
            drawn[column.key] = line[start : start + column.width]
            x += column.width + sum(table.pad)
        assert LONG_MODEL[:14] in drawn["model"], drawn
        memory = table.get_cell("engine:qwen3-next-80b", "vram").plain
        assert re.search(r"\d+/\d+G", memory), memory  # four cards: the figure, not bars alone
        assert memory.strip() in drawn["vram"], drawn


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_node_down_snapshot(snap_compare: Any, tmp_path: Path, size: tuple[int, int]) -> None:
    app = app_for(tmp_path)
    assert snap_compare(app, terminal_size=size, run_before=node_down)
