"""Snapshots of every screen at 120x40 and 80x24, from the deterministic capture-based pool with a
fixed clock (update with `scripts/test.sh tests/ui/test_snapshots.py --snapshot-update`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from poolconsole.ui.app import PoolApp
from poolconsole.ui.grid import PoolGrid
from tests.helpers import uipool
from tests.ui.test_console import feed

SIZES = [(120, 40), (80, 24)]


def keys(*press: str, row: str | None = None) -> Callable[[Pilot[Any]], Awaitable[None]]:
    async def run_before(pilot: Pilot[Any]) -> None:
        app = pilot.app
        assert isinstance(app, PoolApp)
        await feed(app)
        await pilot.pause()
        app.refresh_screen()
        await pilot.pause()
        if row is not None:
            table = app.screen.query_one("#pool", PoolGrid)
            table.move_cursor(row=list(table.order).index(row))
        await pilot.press(*press)
        await pilot.pause()
        app.refresh_screen()
        await pilot.pause()
        app.clear_notifications()  # toasts come and go with time, not with state
        await pilot.pause()

    return run_before


SCREENS = {
    "overview": keys(),
    "detail": keys("enter", row="engine:qwen3-next-80b"),
    "gateway": keys("g"),
    "alerts": keys("a"),
    "help": keys("question_mark"),
}


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("screen", list(SCREENS))
def test_screen(snap_compare: Any, tmp_path: Path, screen: str, size: tuple[int, int]) -> None:
    app = PoolApp(
        uipool.config(), live=False, clock=uipool.clock, theme_state=tmp_path / "ui.json", subtitle="snapshot pool"
    )
    assert snap_compare(app, terminal_size=size, run_before=SCREENS[screen])
