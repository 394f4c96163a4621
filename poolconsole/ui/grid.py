"""The pool overview's table: a Line API widget built for fixed-width, one-line rows updated in place.

DataTable is general (any renderable, row heights, fixed rows and columns, per-cell cursors), and pays
for it on every frame: each visible cell is looked up and styled again after any update, and its line
cache is keyed by the table's update count, so at a 1 s refresh every line is rebuilt each second
(measured on a 72-engine pool: ~7 % of a core, the console's largest cost). Here each row keeps its
cells' segments, rebuilt only for the cells that changed; a row's strip is built once per change and
style, and only the lines of changed rows are redrawn.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Region, Size, Spacing
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

PAD = 1  # blank cells either side of a column's content


@dataclass(frozen=True)
class Column:
    key: str
    label: str
    width: int
    """Content width; the column takes width + 2 * PAD cells."""


@dataclass
class Row:
    cells: list[Text]
    styled: dict[int, list[list[Segment] | None]] = field(default_factory=dict)
    """Per style variant (odd, even, cursor), each cell's segments in that style; None: not built yet.
    Built when first drawn, so rows scrolled out of sight cost nothing but their Text."""
    strips: dict[tuple[int, int, int], Strip] = field(default_factory=dict)
    """Built strips by (style variant, scroll x, width); emptied when a cell changes."""

    def change(self, index: int, text: Text) -> None:
        self.cells[index] = text
        for cells in self.styled.values():
            cells[index] = None
        self.strips.clear()


def cell_segments(text: Text, width: int, console: Console, column: Style) -> list[Segment]:
    """A cell's content cut or padded to `width`, with its padding, in its own styles. `column` (meta
    naming the column) keeps neighbouring cells apart in exported screenshots, whose SVG would
    otherwise run same-styled cells together into one stretched text run."""
    if text.cell_len > width:
        text = text.copy()
        text.truncate(width, overflow="crop")
    rendered: Iterable[Segment] = text.render(console)
    if text.style:  # Text.render leaves the text's own style out when it has no spans
        rendered = Segment.apply_style(rendered, console.get_style(text.style))
    segments = [Segment(" " * PAD), *rendered, Segment(" " * (width - text.cell_len + PAD))]
    return list(Segment.apply_style(segments, column))


class PoolGrid(ScrollView, can_focus=True):
    """Rows by key, a header that stays on top, a row cursor that survives updates."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "cursor(-1)", "Up", show=False),
        Binding("down", "cursor(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home", "jump(0)", "First row", show=False),
        Binding("end", "jump(-1)", "Last row", show=False),
        Binding("left", "scroll_left", "Scroll left", show=False),
        Binding("right", "scroll_right", "Scroll right", show=False),
    ]
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "pool-grid--header",
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

    def __init__(self, columns: Sequence[Column], *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.columns = tuple(columns)
        self._column_index = {column.key: index for index, column in enumerate(self.columns)}
        self._column_meta = [Style.from_meta({"column": index}) for index in range(len(self.columns))]
        self.order: list[str] = []
        self.position: dict[str, int] = {}
        self.rows: dict[str, Row] = {}
        self.cursor_row = 0
        self._styles: dict[int, tuple[Style, Style | None]] = {}
        self._header: Strip | None = None
        self._header_at: tuple[int, int] = (-1, -1)
        self._resize()

    # -- data ----------------------------------------------------------------------------------------
    @property
    def row_count(self) -> int:
        return len(self.order)

    @property
    def cursor_key(self) -> str | None:
        return self.order[self.cursor_row] if self.order else None

    def get_cell(self, key: str, column: str) -> Text:
        return self.rows[key].cells[self._column_index[column]]

    def set_rows(self, order: Iterable[str], cells: dict[str, list[Text]]) -> None:
        """Replace every row (a new order, rows added or gone); the cursor stays on its row's key."""
        keep = self.cursor_key
        self.order = list(order)
        self.position = {key: line for line, key in enumerate(self.order)}
        self.rows = {key: Row(list(cells[key])) for key in self.order}
        self._resize()
        self.move_cursor(self.position[keep] if keep in self.rows else min(self.cursor_row, len(self.order) - 1))
        self.refresh()

    def update_cells(self, changes: Iterable[tuple[str, str, Text]]) -> None:
        """Several cells at once; only the lines of rows that changed are drawn again."""
        changed: set[str] = set()
        for key, column, text in changes:
            self.rows[key].change(self._column_index[column], text)
            changed.add(key)
        if changed:
            lines = sorted(self.position[key] for key in changed)
            top = lines[0]
            self.refresh_lines(top + 1, lines[-1] - top + 1)  # +1: the header's line

    def _resize(self) -> None:
        self.virtual_size = Size(sum(c.width + 2 * PAD for c in self.columns), len(self.order) + 1)

    # -- cursor --------------------------------------------------------------------------------------
    def move_cursor(self, row: int) -> None:
        old = self.cursor_row
        self.cursor_row = max(0, min(row, len(self.order) - 1))
        if old != self.cursor_row:
            self.refresh_lines(old + 1)
            self.refresh_lines(self.cursor_row + 1)
        if self.is_mounted:
            self.scroll_to_region(
                Region(int(self.scroll_x), self.cursor_row + 1, 1, 1), spacing=Spacing(top=1), animate=False, force=True
            )

    def action_cursor(self, step: int) -> None:
        self.move_cursor(self.cursor_row + step)

    def action_page(self, direction: int) -> None:
        self.move_cursor(self.cursor_row + direction * max(1, self.scrollable_content_region.height - 1))

    def action_jump(self, row: int) -> None:
        self.move_cursor(row if row >= 0 else len(self.order) - 1)

    async def _on_click(self, event: events.Click) -> None:
        line = event.y + int(self.scroll_y) - 1
        if event.y >= 1 and 0 <= line < len(self.order):
            self.move_cursor(line)
            self.post_message(self.RowSelected(self, self.order[line]))

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
        row = self.rows[self.order[index]]
        variant = 2 if index == self.cursor_row else index % 2
        strip = row.strips.get((variant, scroll_x, width))
        if strip is None:
            strip = row.strips[(variant, scroll_x, width)] = self._strip(row, variant, scroll_x, width)
        return strip

    def _strip(self, row: Row, variant: int, scroll_x: int, width: int) -> Strip:
        """The visible part of a row: whole cells as built (each styled once per change), the cells cut by
        the edges cropped, blank fill past the last column."""
        style, post = self._variant(variant)
        styled = row.styled.get(variant)
        if styled is None:
            styled = row.styled[variant] = [None] * len(self.columns)
        console = self.app.console
        end = scroll_x + width
        segments: list[Segment] = []
        x = 0
        for index, column in enumerate(self.columns):
            span = column.width + 2 * PAD
            if x + span > scroll_x and x < end:
                cell = styled[index]
                if cell is None:
                    plain = cell_segments(row.cells[index], column.width, console, self._column_meta[index])
                    cell = styled[index] = list(Segment.apply_style(plain, style, post))
                if x < scroll_x or x + span > end:
                    cell = list(Strip(cell, span).crop(max(0, scroll_x - x), min(span, end - x)))
                segments.extend(cell)
            x += span
        shown = max(0, min(x, end) - scroll_x)
        if shown < width:
            segments.append(Segment(" " * (width - shown), style))
        return Strip(segments, width)

    def _header_strip(self, scroll_x: int, width: int) -> Strip:
        if self._header is None or self._header_at != (scroll_x, width):
            console = self.app.console
            style = self.get_component_rich_style("pool-grid--header")
            segments = [
                s
                for i, c in enumerate(self.columns)
                for s in cell_segments(Text(c.label), c.width, console, self._column_meta[i])
            ]
            self._header = Strip(Segment.apply_style(segments, style)).crop_extend(scroll_x, scroll_x + width, style)
            self._header_at = (scroll_x, width)
        return self._header
