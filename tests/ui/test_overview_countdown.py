"""The overview's summary shows what the watcher is about to do (issue 38, item 3), so an operator sees it without
opening the alert log: a row on the remediation board in the watcher's state file reads "auto-restart of X in
N s (2 of 3 left this hour)" under the verdict, counting each second, at 120x40 and at 80x24 (where the summary
is folded); it says where to cancel it (the alert log's X), except read-only, and goes when the board empties."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import Static

from poolconsole.ui.app import PoolApp
from poolconsole.ui.screens.overview import OverviewScreen
from tests.ui.test_alert_log_pager import console
from tests.ui.test_remediation_countdown import LINE, board


def summary(app: PoolApp) -> str:
    screen = app.screen
    assert isinstance(screen, OverviewScreen), screen
    return str(screen.query_one("#summary", Static).render())


async def seconds_shown(pilot: Pilot[None], app: PoolApp, below: int = 10**9) -> int:
    """The countdown's seconds in the summary once it shows fewer than `below` (each read within 4 s: the
    overview reads the board first a second after its mount)."""
    said = ""
    for _ in range(80):
        await pilot.pause(0.05)
        said = summary(app)
        found = LINE.search(said)
        if found and int(found[1]) < below:
            return int(found[1])
    raise AssertionError(f"no countdown below {below} s in the summary: {said!r}")


@pytest.mark.parametrize("size", [(120, 40), (80, 24)], ids=lambda s: f"{s[0]}x{s[1]}")
async def test_the_summary_counts_down_the_pending_action_until_the_board_empties(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    shown, _ = board(tmp_path)
    app = console(tmp_path, "")
    try:
        async with app.run_test(size=size) as pilot:
            first = await seconds_shown(pilot, app)
            assert 35 <= first <= 40
            lines = summary(app).splitlines()
            assert LINE.search(lines[1]), lines  # under the verdict, before the totals
            if size[0] >= 120:
                assert lines[1].endswith("(a, then X, cancels)"), lines
            else:  # where the way to cancel it does not fit, the line stands whole without it
                assert lines[1].endswith("left this hour)"), lines
            await seconds_shown(pilot, app, below=first)  # redrawn each second while it waits
            shown.show([])  # the watcher acted, or the case cleared
            for _ in range(100):
                await pilot.pause(0.05)
                if "auto-restart" not in summary(app):
                    break
            assert "auto-restart" not in summary(app)
    finally:
        shown.close()


async def test_read_only_shows_the_countdown_without_the_way_to_cancel_it(tmp_path: Path) -> None:
    shown, _ = board(tmp_path)
    app = console(tmp_path, "", read_only=True)
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await seconds_shown(pilot, app)
            assert "cancels" not in summary(app)
    finally:
        shown.close()


async def test_no_board_no_line(tmp_path: Path) -> None:
    app = console(tmp_path, "")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.5)
        assert "auto-" not in summary(app)
        assert summary(app)  # the verdict is drawn
