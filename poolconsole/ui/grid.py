"""The pool overview's table: a Line API widget built for fixed-width, one-line rows updated in place.

DataTable is general (any renderable, row heights, fixed rows and columns, per-cell cursors), and pays
for it on every frame: each visible cell is looked up and styled again after any update, and its line
cache is keyed by the table's update count, so at a 1 s refresh every line is rebuilt each second
(measured on a 72-engine pool: ~7 % of a core, the console's largest cost). Here each row keeps its
cells' segments, rebuilt only for the cells that changed; a row's strip is built once per change and
style, and only the lines of changed rows are redrawn.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Region, Size, Spacing
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from poolconsole.ui.columns import PAD, Column, Row, cell_segments

SORTED = {True: "▲", False: "▼"}
"""The sorted column's header marker: ascending (A to Z, lowest first), descending."""
SPAN = "line"
"""The one cell of a row drawn across every column (get_cell, update_cells)."""


class PoolGrid(ScrollView, can_focus=True):
    """Rows by key, a header that stays on top, a row cursor that survives updates."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "cursor(-1)", "Up", show=False),
        Binding("down", "cursor(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home", "jump(0)", "First row", show=False),
        Binding("end", "jump(-1)", "Last row", show=False),
        Binding("left", "scroll_column(-1)", "Scroll left a column", show=False),
        Binding("right", "scroll_column(1)", "Scroll right a column", show=False),
    ]
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "pool-grid--header",
        "pool-grid--header-sorted",
        "pool-grid--cursor",
        "pool-grid--even-row",
        "pool-grid--odd-row",
    }
    DEFAULT_CSS = """
    PoolGrid {
        background: $surface;
        color: $foreground;
        &:focus {
            background-tint: $foreground 5%;
            & > .pool-grid--cursor {
                background: $block-cursor-background;
                color: $block-cursor-foreground;
                text-style: $block-cursor-text-style;
            }
            & > .pool-grid--header { background-tint: $foreground 5%; }
        }
        &:dark > .pool-grid--even-row { background: $surface-darken-1 40%; }
        & > .pool-grid--header { text-style: bold; background: $panel; color: $foreground; }
        & > .pool-grid--header-sorted { background: $primary-muted; color: $text-primary; }
        & > .pool-grid--even-row { background: $surface-lighten-1 50%; }
        & > .pool-grid--cursor {
            background: $block-cursor-blurred-background;
            color: $block-cursor-blurred-foreground;
            text-style: $block-cursor-blurred-text-style;
        }
    }
    """

    class RowSelected(Message):
        """A row was clicked."""

        def __init__(self, grid: PoolGrid, key: str) -> None:
            super().__init__()
            self.grid = grid
            self.key = key

        @property
        def control(self) -> PoolGrid:
            return self.grid

    class RowActivated(Message):
        """A row was double-clicked (the owner opens it, as Enter does)."""

        def __init__(self, grid: PoolGrid, key: str) -> None:
            super().__init__()
            self.grid = grid
            self.key = key

        @property
        def control(self) -> PoolGrid:
            return self.grid

    class HeaderClicked(Message):
        """A column's header was clicked (the owner sorts by it)."""

        def __init__(self, grid: PoolGrid, column: str) -> None:
            super().__init__()
            self.grid = grid
            self.column = column

        @property
        def control(self) -> PoolGrid:
            return self.grid

    class ColumnsChanged(Message):
        """`fit` gave other columns for a new width: the rows' cells must be given again, in their order."""

        def __init__(self, grid: PoolGrid) -> None:
            super().__init__()
            self.grid = grid

        @property
        def control(self) -> PoolGrid:
            return self.grid

    def __init__(
        self,
        columns: Sequence[Column],
        *,
        id: str | None = None,
        pad: tuple[int, int] = (PAD, PAD),
        fit: Callable[[int], Sequence[Column]] | None = None,
        provide: Callable[[str], list[Text]] | None = None,
    ) -> None:
        super().__init__(id=id)
        self.pad = pad
        self.fit = fit
        """Columns for a content width (folding, widening): asked again whenever the width changes."""
        self.provide = provide
        """A stale row's cells, asked for when the row is first drawn (or read) after it was marked stale:
        the owner builds only the rows in view, and a row that scrolls into view is built then."""
        self.stale: set[str] = set()
        self._fitted_for = -1
        self.columns: tuple[Column, ...] = ()
        self._set_columns(columns)
        self.order: list[str] = []
        self.position: dict[str, int] = {}
        self.rows: dict[str, Row] = {}
        self.cursor_row = 0
        self._styles: dict[int, tuple[Style, Style | None]] = {}
        self._header: Strip | None = None
        self._header_at: tuple[int, int] = (-1, -1)
        self.sorted_by: tuple[str, bool] | None = None
        """The column the owner sorted the rows by, and whether ascending: its header shows SORTED."""
        self._resize()

    # -- data ----------------------------------------------------------------------------------------
    @property
    def row_count(self) -> int:
        return len(self.order)

    @property
    def cursor_key(self) -> str | None:
        return self.order[self.cursor_row] if self.order else None

    def get_cell(self, key: str, column: str) -> Text:
        """A cell's text; a spanning row's one line is its cell "line"."""
        row = self._row(key)
        if row.span:
            if column != SPAN:
                raise KeyError(f"{key} is one line across the columns: its cell is {SPAN!r}")
            return row.cells[0]
        return row.cells[self._column_index[column]]

    def is_span(self, key: str) -> bool:
        return self.rows[key].span

    @property
    def row_width(self) -> int:
        """The cells the columns take, padding included (a spanning row is drawn this wide)."""
        return sum(c.width + sum(self.pad) for c in self.columns)

    @property
    def column_keys(self) -> list[str]:
        """The shown columns' keys, in order (set_rows takes each row's cells in this order)."""
        return [c.key for c in self.columns]

    def _set_columns(self, columns: Sequence[Column]) -> None:
        self.columns = tuple(columns)
        self._column_index = {column.key: index for index, column in enumerate(self.columns)}
        self._column_meta = [Style.from_meta({"column": index}) for index in range(len(self.columns))]

    def content_width(self) -> int:
        """The width the columns may take: the widget's, less the vertical scrollbar when rows overflow."""
        overflow = len(self.order) + 1 > self.size.height
        return self.size.width - (self.styles.scrollbar_size_vertical if overflow else 0)

    def refit(self) -> None:
        """Ask `fit` for the columns of the current width; when they change, the rows are emptied and
        ColumnsChanged asks for them again."""
        width = self.content_width()
        if self.fit is None or width <= 0 or width == self._fitted_for:
            return
        self._fitted_for = width
        columns = tuple(self.fit(width))
        if columns != self.columns:
            self._set_columns(columns)
            self._header = None
            blank = [Text() for _ in columns]  # until the owner gives the cells again (the cursor stays)
            spans = {key for key, row in self.rows.items() if row.span}
            self.rows = {key: Row([Text()], True) if key in spans else Row(list(blank)) for key in self.order}
            if self.provide is not None:
                self.stale = set(self.order)
            self._resize()
            self.refresh()
            self.post_message(self.ColumnsChanged(self))

    def on_resize(self, event: events.Resize) -> None:
        self.refit()

    def set_rows(self, order: Iterable[str], cells: dict[str, list[Text]], spans: Collection[str] = ()) -> None:
        """Replace every row (a new order, rows added or gone); the cursor stays on its row's key. The rows
        named in `spans` are one line across the columns (their cells: that one Text)."""
        keep = self.cursor_key
        self.order = list(order)
        self.position = {key: line for line, key in enumerate(self.order)}
        self.rows = {key: Row(list(cells[key]), key in spans) for key in self.order}
        self.stale.clear()
        self._resize()
        self.refit()  # rows past the height bring a scrollbar: a narrower content width
        self.move_cursor(self._kept(keep), scroll=keep is not None)
        self.refresh()

    def reorder(
        self,
        order: Iterable[str],
        new: Mapping[str, list[Text]],
        spans: Collection[str] = (),
        stale: Collection[str] = (),
    ) -> None:
        """A new order (rows sorted again, added, gone) that keeps every row already here: its cells and the
        strips built for it (a row that scrolled out of sight and back costs nothing). Rows not here yet, or
        turning from a data row into a line across the columns or back, take their cells from `new`, or are
        named in `stale`: their cells are asked of `provide` when they are first drawn. The cursor stays on
        its row's key."""
        keep = self.cursor_key
        order = list(order)
        stale = set(stale)
        rows: dict[str, Row] = {}
        blank = [Text() for _ in self.columns]
        for key in order:
            row = self.rows.get(key)
            span = key in spans
            if key in new:
                rows[key] = Row(list(new[key]), span)
                self.stale.discard(key)
            elif key in stale:
                empty = [Text()] if span else list(blank)
                rows[key] = row if row is not None and row.span == span else Row(empty, span)
                self.stale.add(key)
            else:
                rows[key] = Row(list(new[key]), span) if row is None or row.span != span else row
        moved = order != self.order
        self.order, self.rows = order, rows
        self.stale.intersection_update(rows)
        if moved:
            self.position = {key: line for line, key in enumerate(order)}
            self._resize()
            self.refit()
            self.move_cursor(self._kept(keep), scroll=keep is not None)
        self.refresh()  # the lines in view are drawn from the rows' built strips where nothing changed

    def update_cells(self, changes: Iterable[tuple[str, str, Text]]) -> None:
        """Several cells at once; only the lines of rows that changed are drawn again."""
        changed: set[str] = set()
        for key, column, text in changes:
            row = self.rows[key]
            row.change(0 if row.span else self._column_index[column], text)
            changed.add(key)
        if changed:
            lines = sorted(self.position[key] for key in changed)
            top = lines[0]
            self.refresh_lines(top + 1, lines[-1] - top + 1)  # +1: the header's line

    def _row(self, key: str) -> Row:
        """A row, its cells asked of `provide` first if it was marked stale."""
        row = self.rows[key]
        if key in self.stale and self.provide is not None:
            self.stale.discard(key)
            row.cells = list(self.provide(key))
            row.styled.clear()
            row.strips.clear()
        return row

    def _resize(self) -> None:
        self.virtual_size = Size(sum(c.width + sum(self.pad) for c in self.columns), len(self.order) + 1)

    # -- cursor --------------------------------------------------------------------------------------
    def _kept(self, key: str | None) -> int:
        """Where the cursor goes after new rows: on its row's key; the first time rows come, on the first data
        row, not a group's line (the first Enter folded a group where the footer said Detail); else where it
        stood."""
        if key in self.rows:
            return self.position[key]
        if key is None:
            return next((line for line, k in enumerate(self.order) if not self.rows[k].span), 0)
        return min(self.cursor_row, len(self.order) - 1)

    def move_cursor(self, row: int, scroll: bool = True) -> None:
        """The cursor to `row`, scrolled into view (`scroll` False: the first rows, where the first data row is
        in view already and a grid not laid out yet would scroll its group's line away)."""
        old = self.cursor_row
        self.cursor_row = max(0, min(row, len(self.order) - 1))
        if old != self.cursor_row:
            self.refresh_lines(old + 1)
            self.refresh_lines(self.cursor_row + 1)
        if scroll and self.is_mounted:
            self.scroll_to_region(
                Region(int(self.scroll_x), self.cursor_row + 1, 1, 1), spacing=Spacing(top=1), animate=False, force=True
            )

    def action_cursor(self, step: int) -> None:
        self.move_cursor(self.cursor_row + step)

    def action_page(self, direction: int) -> None:
        self.move_cursor(self.cursor_row + direction * max(1, self.scrollable_content_region.height - 1))

    def action_jump(self, row: int) -> None:
        self.move_cursor(row if row >= 0 else len(self.order) - 1)

    def column_starts(self) -> list[int]:
        """Where each column begins, in cells from the table's left edge."""
        starts, x = [], 0
        for column in self.columns:
            starts.append(x)
            x += column.width + sum(self.pad)
        return starts

    def action_scroll_column(self, step: int) -> None:
        """Scroll by whole columns: the next (or previous) column's left edge to the left of the view."""
        at = int(self.scroll_x)
        starts = [x for x in self.column_starts() if x <= self.max_scroll_x] + [int(self.max_scroll_x)]
        target = (
            min((x for x in starts if x > at), default=at)
            if step > 0
            else max((x for x in starts if x < at), default=0)
        )
        self.scroll_to(x=target, animate=False, immediate=True)

    async def _on_click(self, event: events.Click) -> None:
        if event.y == 0:  # the header: the column under the pointer
            x, at = 0, event.x + int(self.scroll_x)
            for column in self.columns:
                x += column.width + sum(self.pad)
                if at < x:
                    self.post_message(self.HeaderClicked(self, column.key))
                    return
            return
        line = event.y + int(self.scroll_y) - 1
        if event.y >= 1 and 0 <= line < len(self.order):
            self.move_cursor(line)
            key = self.order[line]
            self.post_message(self.RowActivated(self, key) if event.chain >= 2 else self.RowSelected(self, key))

    # -- drawing -------------------------------------------------------------------------------------
    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._forget_styles()

    def _forget_styles(self) -> None:
        self._styles.clear()
        self._header = None
        for row in self.rows.values():
            row.styled.clear()
            row.strips.clear()

    def _variant(self, variant: int) -> tuple[Style, Style | None]:
        """A data row's style and post style as DataTable draws them: the zebra style under the cells' own
        styles, and on the cursor row (variant 2) the cursor's colours over them."""
        cached = self._styles.get(variant)
        if cached is None:
            style = self.get_component_rich_style("pool-grid--odd-row" if variant == 1 else "pool-grid--even-row")
            post = None
            if variant == 2:
                cursor = self.get_component_rich_style("pool-grid--cursor")
                style, post = style + cursor, Style.from_color(cursor.color)
            cached = self._styles[variant] = (style, post)
        return cached

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        scroll_x, scroll_y = int(self.scroll_x), int(self.scroll_y)
        if y == 0:
            return self._header_strip(scroll_x, width)
        index = y - 1 + scroll_y
        if index >= len(self.order):
            return Strip.blank(width, self.rich_style)
        row = self._row(self.order[index])
        variant = 2 if index == self.cursor_row else index % 2
        strip = row.strips.get((variant, scroll_x, width))
        if strip is None:
            strip = row.strips[(variant, scroll_x, width)] = self._strip(row, variant, scroll_x, width)
        return strip

    def _strip(self, row: Row, variant: int, scroll_x: int, width: int) -> Strip:
        """The visible part of a row: whole cells as built (each styled once per change), the cells cut by
        the edges cropped, blank fill past the last column."""
        style, post = self._variant(variant)
        if row.span:
            return self._span_strip(row, variant, style, post, scroll_x, width)
        styled = row.styled.get(variant)
        if styled is None:
            styled = row.styled[variant] = [None] * len(self.columns)
        console = self.app.console
        end = scroll_x + width
        segments: list[Segment] = []
        x = 0
        for index, column in enumerate(self.columns):
            span = column.width + sum(self.pad)
            if x + span > scroll_x and x < end:
                cell = styled[index]
                if cell is None:
                    plain = cell_segments(
                        row.cells[index], column.width, console, self._column_meta[index], self.pad, column.ellipsis
                    )
                    cell = styled[index] = list(Segment.apply_style(plain, style, post))
                if x < scroll_x or x + span > end:
                    cell = list(Strip(cell, span).crop(max(0, scroll_x - x), min(span, end - x)))
                segments.extend(cell)
            x += span
        shown = max(0, min(x, end) - scroll_x)
        if shown < width:
            segments.append(Segment(" " * (width - shown), style))
        return Strip(segments, width)

    def _span_strip(self, row: Row, variant: int, style: Style, post: Style | None, scroll_x: int, width: int) -> Strip:
        """A spanning row: its one Text across the columns' width (ending in "…" past it), padded."""
        styled = row.styled.get(variant)
        if styled is None or styled[0] is None:
            console, inner = self.app.console, max(0, self.row_width - self.pad[0])
            plain = cell_segments(row.cells[0], inner, console, Style(), (self.pad[0], 0), True)
            styled = row.styled[variant] = [list(Segment.apply_style(plain, style, post))]
        cells = styled[0]
        assert cells is not None
        return Strip(cells).crop_extend(scroll_x, scroll_x + width, style)

    def mark_sorted(self, column: str | None, ascending: bool = True) -> None:
        """Mark `column`'s header as the one the rows are sorted by, ▲ ascending or ▼ (None: no column)."""
        marked = None if column is None else (column, ascending)
        if marked != self.sorted_by:
            self.sorted_by = marked
            self._header = None
            self.refresh(Region(0, 0, self.size.width, 1))

    def heading(self, column: Column) -> tuple[Text, int, tuple[int, int]]:
        """A column's header, the width it takes and its blanks left and right: its label; the sorted
        column's with its marker, after a space where the width leaves room, else in the blank on its right,
        else in the blank on its left ("▼tok/s"): the label stays whole. Cut by a cell only where the grid
        has no blank beside the column at all."""
        text, pad = Text(column.label), self.pad
        if self.sorted_by is None or self.sorted_by[0] != column.key:
            return text, column.width, pad
        marker = SORTED[self.sorted_by[1]]
        if text.cell_len + 2 <= column.width:
            text.append(f" {marker}")
            return text, column.width, pad
        if pad[1] or not pad[0]:
            width = column.width + min(1, pad[1])
            text.truncate(max(0, width - 1), overflow="crop")
            text.append(marker)
            return text, width, (pad[0], pad[1] - (width - column.width))
        return Text(marker) + text, column.width + 1, (pad[0] - 1, pad[1])

    def _header_strip(self, scroll_x: int, width: int) -> Strip:
        if self._header is None or self._header_at != (scroll_x, width):
            console = self.app.console
            style = self.get_component_rich_style("pool-grid--header")
            sorted_style = self.get_component_rich_style("pool-grid--header-sorted", partial=True)
            segments: list[Segment] = []
            for i, c in enumerate(self.columns):
                text, inner, pad = self.heading(c)
                cell = cell_segments(text, inner, console, self._column_meta[i], pad, c.ellipsis)
                if self.sorted_by is not None and self.sorted_by[0] == c.key:  # its cells and blanks: one block
                    cell = list(Segment.apply_style(cell, post_style=sorted_style))
                segments += cell
            self._header = Strip(Segment.apply_style(segments, style)).crop_extend(scroll_x, scroll_x + width, style)
            self._header_at = (scroll_x, width)
        return self._header
