"""One tick of the console at 1,000 engines (issue 39, item 4): a new poll of one engine in view builds that
engine's row and makes that engine's part of the summary's totals, and nothing else: no other row, no other
target's part (counting wrappers around the parts; the overview's own count of rows built)."""

from __future__ import annotations

from pathlib import Path

import pytest

from poolconsole.model import tally
from poolconsole.ui.grid import PoolGrid
from tests.helpers import bigpool
from tests.ui.test_console import settle
from tests.ui.test_overview_scale import ENGINES, big_app, overview, poll
from tests.unit.test_summary_tally import counted


async def test_one_engine_changed_builds_its_row_and_its_part_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = bigpool.config(ENGINES)
    pages = bigpool.Pages()
    app = big_app(tmp_path, cfg)
    async with app.run_test(size=(120, 40)) as pilot:
        poll(app, pages, 0)
        poll(app, pages, 1)
        await settle(pilot, app)
        screen, grid = overview(app), app.screen.query_one(PoolGrid)
        made = counted(monkeypatch)
        built = screen.built
        screen.refresh_rows()  # a tick with nothing new: no row built, no part made
        assert screen.built == built and not made
        in_view = next(k for k in grid.order[int(grid.scroll_y) + 3 :] if k.startswith("engine:"))
        name = in_view.removeprefix("engine:")
        app.apply_engine(bigpool.engine_poll(cfg, pages, int(name[1:]), 3))
        screen.refresh_rows()
        assert screen.built == built + 1  # its row, no other
        assert sum(made.values()) == 1 and made[f"engine {name}"] == 1  # its part of the totals, no other
        assert tally._TALLIES[app.state].touched == (("engine", name),)
