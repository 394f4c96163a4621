"""The overview's header says how the rows are sorted: ▲ on the sorted column when it runs up (names A to
Z, numbers lowest first), ▼ when it runs down (numbers highest first, the default for them); `s` moves the
marker to the next sort column, sorting by the same column again (a header click) turns it round. Read
from the header line the grid draws."""

from __future__ import annotations

from pathlib import Path

from textual.pilot import Pilot

from poolconsole.ui import registry
from poolconsole.ui.app import PoolApp
from poolconsole.ui.grid import PoolGrid
from poolconsole.ui.screens.overview import OverviewScreen
from tests.helpers import uipool
from tests.ui.test_every_screen import app_for

SORT_KEY = next(a.key for a in registry.ACTIONS if a.id == "sort")
MARKERS = ("▲", "▼")


def marked(grid: PoolGrid) -> tuple[str, str] | None:
    """The column whose header cells hold the sort marker, and the marker (None: no marker)."""
    header = grid.render_line(0).text
    found = [(at, ch) for at, ch in enumerate(header) if ch in MARKERS]
    assert len(found) <= 1, f"more than one sort marker: {header!r}"
    if not found:
        return None
    at, marker = found[0]
    x = 0
    for column in grid.columns:
        x += column.width + sum(grid.pad)
        if at < x:
            return column.key, marker
    raise AssertionError(f"the marker is past the columns: {header!r}")


async def overview(pilot: Pilot[None], app: PoolApp) -> tuple[OverviewScreen, PoolGrid]:
    for host in uipool.host_snapshots(app.config):
        app.apply_host(host)
    for snap in uipool.engine_snapshots(app.config):
        app.apply_engine(snap)
    app.refresh_screen()
    await pilot.pause()
    assert isinstance(app.screen, OverviewScreen)
    return app.screen, app.screen.query_one(PoolGrid)


async def test_the_sorted_columns_header_shows_the_direction(tmp_path: Path) -> None:
    app = app_for(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        screen, grid = await overview(pilot, app)
        assert marked(grid) == ("host", "▲")  # the default: by host, A to Z
        assert "Host ▲" in grid.render_line(0).text  # the label whole where the column has room

        await pilot.press(SORT_KEY)  # tok/s, highest first
        await pilot.pause()
        assert screen.sort_key == "tps" and marked(grid) == ("tps", "▼")

        screen.sort_by("tps")  # a click on the same header: lowest first
        await pilot.pause()
        assert screen.reverse and marked(grid) == ("tps", "▲")

        screen.sort_by("engine")  # a name column: A to Z, then Z to A
        await pilot.pause()
        assert marked(grid) == ("engine", "▲")
        screen.sort_by("engine")
        await pilot.pause()
        assert marked(grid) == ("engine", "▼")


async def test_the_marker_stays_on_a_column_its_label_fills(tmp_path: Path) -> None:
    """Run/Wait is exactly as wide as its label and has no blank on its right: the marker takes the blank on
    its left, and neither the label nor the marker is cut ("Run/▼" read as a cut word)."""
    app = app_for(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        screen, grid = await overview(pilot, app)
        screen.sort_by("queue")
        await pilot.pause()
        assert marked(grid) == ("queue", "▼")
        header = grid.render_line(0).text
        assert "▼Run/Wait" in header, header


async def test_the_sorted_columns_header_is_one_highlighted_block(tmp_path: Path) -> None:
    """`Run/Wait▼tok/s`: with one blank between columns, a marker in a blank could be read as its neighbour's.
    The sorted column's header cells, its blank and its marker included, are drawn as one highlighted block."""
    app = app_for(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        _, grid = await overview(pilot, app)
        await pilot.press(SORT_KEY)  # tok/s: its label fills its width, the marker takes the blank on its left
        await pilot.pause()
        strip = grid.render_line(0)
        highlight = grid.get_component_rich_style("pool-grid--header-sorted", partial=True).bgcolor
        lit = "".join(s.text if s.style and s.style.bgcolor == highlight else "\0" for s in strip)
        blocks = [b for b in lit.split("\0") if b]
        assert blocks == ["▼tok/s"], blocks  # the marker and the whole label, nothing of the neighbours
