"""Home and End in the secondary screens' tables go to the first and the last row, as on the overview: a
DataTable scrolls sideways on them, so on the help screen (30 rows at 80x24) End did nothing to be seen."""

from __future__ import annotations

from pathlib import Path

from poolconsole.ui import registry
from poolconsole.ui.screens.others import HelpScreen
from poolconsole.ui.tables import RowTable
from tests.ui.test_cut_text import opened
from tests.ui.test_every_screen import app_for

KEY = {a.id: a.key for a in registry.ACTIONS}


async def test_home_and_end_go_to_the_first_and_the_last_row_of_the_help(tmp_path: Path) -> None:
    app = app_for(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await opened(pilot, app, KEY["help"], HelpScreen)
        table = app.screen.query_one("#help", RowTable)
        assert table.row_count > table.size.height and table.cursor_row == 0  # more rows than the screen holds
        await pilot.press("end")
        await pilot.pause()
        assert table.cursor_row == table.row_count - 1
        assert table.scroll_y == table.max_scroll_y > 0  # scrolled to it
        await pilot.press("home")
        await pilot.pause()
        assert table.cursor_row == 0 and table.scroll_y == 0
