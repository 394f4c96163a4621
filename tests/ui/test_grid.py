"""The overview's grid widget on its own: rows by key, cells updated in place, the cursor kept on its row,
keys and clicks, horizontal crop, and only the rows that changed built again."""

from __future__ import annotations

from rich.text import Text
from textual.app import App, ComposeResult
from textual.widgets import Footer

from poolconsole.ui.columns import Column
from poolconsole.ui.grid import PoolGrid

COLUMNS = [Column("name", "Name", 8), Column("value", "Value", 6), Column("note", "Note", 10)]


def rows(count: int) -> tuple[list[str], dict[str, list[Text]]]:
    keys = [f"r{i:02d}" for i in range(count)]
    return keys, {k: [Text(k), Text(str(i)), Text("note " + k)] for i, k in enumerate(keys)}


class GridApp(App[None]):
    def __init__(self, count: int) -> None:
        super().__init__()
        self.count = count
        self.selected: list[str] = []

    def compose(self) -> ComposeResult:
        yield PoolGrid(COLUMNS, id="grid")
        yield Footer()

    def on_mount(self) -> None:
        grid = self.query_one(PoolGrid)
        grid.set_rows(*rows(self.count))
        grid.focus()

    def on_pool_grid_row_selected(self, event: PoolGrid.RowSelected) -> None:
        self.selected.append(event.key)


def line_text(grid: PoolGrid, y: int) -> str:
    return grid.render_line(y).text


async def test_cells_update_in_place_and_the_cursor_follows_its_row() -> None:
    app = GridApp(5)
    async with app.run_test(size=(40, 12)) as pilot:
        grid = app.query_one(PoolGrid)
        assert line_text(grid, 0).split() == ["Name", "Value", "Note"]
        assert line_text(grid, 1).split() == ["r00", "0", "note", "r00"]
        await pilot.press("down", "down")
        assert grid.cursor_key == "r02"
        grid.update_cells([("r03", "value", Text("42", style="bold"))])
        assert grid.get_cell("r03", "value").plain == "42"
        await pilot.pause()
        assert "42" in line_text(grid, 4)
        keys, cells = rows(5)
        grid.set_rows(list(reversed(keys)), cells)  # a new order (a sort): the cursor stays on r02's row
        assert grid.cursor_key == "r02" and grid.cursor_row == 2
        grid.set_rows(["r00", "r01"], cells)  # its row gone: the cursor stays in range
        assert grid.cursor_key in ("r00", "r01") and grid.row_count == 2


async def test_keys_move_the_cursor_and_scroll_it_into_view() -> None:
    app = GridApp(60)
    async with app.run_test(size=(40, 12)) as pilot:
        grid = app.query_one(PoolGrid)
        await pilot.press("end")
        assert grid.cursor_key == "r59"
        await pilot.pause()
        assert grid.scroll_y > 0 and "r59" in line_text(grid, grid.size.height - 1)
        assert line_text(grid, 0).split()[0] == "Name"  # the header stays on top
        await pilot.press("home")
        assert grid.cursor_key == "r00"
        await pilot.press("pagedown")  # a page: the data rows in view (the height less the header)
        assert grid.cursor_row == grid.size.height - 1
        await pilot.press("up")
        assert grid.cursor_row == grid.size.height - 2


async def test_a_click_selects_its_row() -> None:
    app = GridApp(5)
    async with app.run_test(size=(40, 12)) as pilot:
        grid = app.query_one(PoolGrid)
        await pilot.click(PoolGrid, offset=(2, 3))  # the header is line 0: line 3 is the third row
        await pilot.pause()
        assert app.selected == ["r02"] and grid.cursor_key == "r02"
        await pilot.click(PoolGrid, offset=(2, 0))  # the header selects nothing
        await pilot.pause()
        assert app.selected == ["r02"]


async def test_narrow_cells_crop_and_horizontal_scroll() -> None:
    app = GridApp(3)
    async with app.run_test(size=(16, 8)):
        grid = app.query_one(PoolGrid)
        grid.update_cells([("r00", "name", Text("a-very-long-name"))])
        assert line_text(grid, 1).startswith(" a-very-l ")  # cut to the column's 8 cells, padding kept
        grid.scroll_to(x=10, animate=False, immediate=True)
        assert grid.scroll_x == 10
        line = line_text(grid, 1)
        assert len(line) == grid.size.width and line.startswith(" 0      ") and "note" in line


async def test_only_changed_rows_are_built_again() -> None:
    app = GridApp(6)
    async with app.run_test(size=(40, 12)) as pilot:
        grid = app.query_one(PoolGrid)
        await pilot.pause()
        assert all(grid.rows[k].strips for k in grid.order)  # every row was drawn once
        kept = {k: next(iter(grid.rows[k].strips.values())) for k in grid.order}
        grid.update_cells([("r04", "note", Text("changed"))])
        assert not grid.rows["r04"].strips
        await pilot.pause()
        assert "changed" in line_text(grid, 5)
        for key in grid.order:
            if key != "r04":
                assert next(iter(grid.rows[key].strips.values())) is kept[key]


async def test_the_cursor_row_is_drawn_blurred_without_focus() -> None:
    app = GridApp(3)
    async with app.run_test(size=(40, 12)) as pilot:
        grid = app.query_one(PoolGrid)
        await pilot.pause()

        def cursor_background() -> object:
            return next(iter(grid.render_line(1))).style.bgcolor  # type: ignore[union-attr]

        focused = cursor_background()
        grid.blur()
        await pilot.pause()
        assert cursor_background() != focused  # the blurred cursor's colours
        grid.focus()
        await pilot.pause()
        assert cursor_background() == focused


async def test_a_theme_switch_redraws_the_rows_in_its_colours() -> None:
    app = GridApp(3)
    async with app.run_test(size=(40, 12)) as pilot:
        grid = app.query_one(PoolGrid)
        await pilot.pause()
        before = [segment.style for segment in grid.render_line(2)]
        app.theme = "textual-light" if app.theme != "textual-light" else "textual-dark"
        await pilot.pause()
        assert [segment.style for segment in grid.render_line(2)] != before


async def test_left_and_right_scroll_by_whole_columns() -> None:
    app = GridApp(3)
    async with app.run_test(size=(16, 8)) as pilot:
        grid = app.query_one(PoolGrid)
        assert grid.column_starts() == [0, 10, 18] and grid.max_scroll_x == 14  # 30 cells in 16
        await pilot.press("right")
        assert grid.scroll_x == 10 and line_text(grid, 0).startswith(" Value  ")  # the next column at the left
        await pilot.press("right")  # the last column whole at the right edge: as far as it goes
        assert grid.scroll_x == 14 and line_text(grid, 0).rstrip().endswith("Note")
        await pilot.press("right")
        assert grid.scroll_x == 14
        await pilot.press("left")
        assert grid.scroll_x == 10
        await pilot.press("left")
        assert grid.scroll_x == 0 and line_text(grid, 0).startswith(" Name ")
