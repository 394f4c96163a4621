"""A DataTable whose one-line cells are rendered without Rich's layout pipeline.

DataTable renders every cell through `console.render_lines(Styled(Padding(cell)))`: wrapping, cropping
and padding machinery for what is, in the pool overview, one line of fixed width. Its cell cache is
also invalidated by any update anywhere in the table, so at a 1 s refresh every visible cell is
rendered again each second: measured, 48 % of the console's CPU on a 72-engine pool
(benchmarks/ui_bench.py). Here a one-line data cell is cut or padded to its width with Text's own
methods and its segments styled directly; headers, row labels and multi-line rows keep the stock path.
"""

from __future__ import annotations

from typing import Any, cast

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual._types import SegmentLines
from textual.cache import LRUCache
from textual.color import Color
from textual.coordinate import Coordinate
from textual.geometry import Region
from textual.strip import Strip
from textual.widgets import DataTable
from textual.widgets._data_table import CellDoesNotExist, ColumnKey, RowKey


class PoolTable(DataTable[Text | str]):
    def __init__(self, **kwargs: Any) -> None:
        self._row_styles: dict[tuple[int, Style, Any], Style] = {}  # before the base class clears caches
        self._frame_style: Style | None = None
        super().__init__(**kwargs)
        # Cells are cached by what they show (see _render_cell): a screen of cells (~600 at 160x45) plus
        # the ones that changed since is what the cache needs, not the stock 10,000.
        self._cell_render_cache = LRUCache(2048)
        self._row_render_cache = LRUCache(256)

    def update_cells(self, changes: list[tuple[str, str, Text]]) -> None:
        """Several cells at once: DataTable.update_cell marks the whole table dirty for each one (240
        times a second on a 72-engine pool); the table is redrawn once either way."""
        data = self._data
        for row_key, column_key, value in changes:
            if RowKey(row_key) not in self._row_locations or ColumnKey(column_key) not in self._column_locations:
                raise CellDoesNotExist(f"No cell exists for row_key={row_key!r}, column_key={column_key!r}.")
            data[RowKey(row_key)][ColumnKey(column_key)] = value
        if changes:
            self._update_count += 1
            self.refresh()

    def render_lines(self, crop: Region) -> list[Strip]:
        # The stock render_line resolves the widget's rich_style through the DOM (~0.1 ms) for every line
        # drawn: once per frame is enough, nothing can restyle the widget in the middle of one.
        self._frame_style = self.rich_style
        try:
            return super().render_lines(crop)
        finally:
            self._frame_style = None

    def render_line(self, y: int) -> Strip:
        frame_style = self._frame_style
        if frame_style is None or self.fixed_rows:
            return super().render_line(y)
        width = self.size.width
        scroll_x, scroll_y = self.scroll_offset
        if self.show_header:
            if y >= self.get_row_height(self._header_row_key):
                y += scroll_y
        else:
            y += scroll_y
        return self._render_line(y, scroll_x, scroll_x + width, frame_style)

    def notify_style_update(self) -> None:
        self._row_styles.clear()
        super().notify_style_update()

    def _clear_caches(self) -> None:
        self._row_styles.clear()
        super()._clear_caches()

    def _get_row_style(self, row_index: int, base_style: Style) -> Style:
        """The stock method resolves a component style through the DOM (~0.2 ms) for every row drawn;
        there are only a few distinct answers (header, odd, even), kept until styles change."""
        odd = self.zebra_stripes and row_index >= self.fixed_rows and row_index % 2 == 1
        key = (
            -1 if row_index == -1 else 0 if row_index < self.fixed_rows else 1 + odd,
            base_style,
            self._pseudo_class_state,
        )
        style = self._row_styles.get(key)
        if style is None:
            style = self._row_styles[key] = super()._get_row_style(row_index, base_style)
        return style

    def _render_line_in_row(
        self,
        row_key: RowKey,
        line_no: int,
        base_style: Style,
        cursor_location: Coordinate,
        hover_location: Coordinate,
    ) -> tuple[SegmentLines, SegmentLines]:
        """A data row of this table (no fixed columns, no row labels): the stock method's output, built
        without its per-row DOM style lookups; anything else takes the stock path."""
        if (
            row_key is self._header_row_key
            or self.fixed_columns
            or (self._labelled_row_exists and self.show_row_labels)
            or row_key not in self._row_locations
        ):
            return super()._render_line_in_row(row_key, line_no, base_style, cursor_location, hover_location)
        cache_key = (
            row_key,
            line_no,
            base_style,
            cursor_location,
            hover_location,
            self.cursor_type,
            self.show_cursor,
            self._show_hover_cursor,
            self._update_count,
            self._pseudo_class_state,
        )
        cached = self._row_render_cache.get(cache_key)
        if cached is not None:
            return cached
        row_index = self._row_locations.get(row_key)
        assert row_index is not None
        cursor_type = self.cursor_type
        should_highlight = self._should_highlight
        row_style = self._get_row_style(row_index, base_style)
        scrollable_row: list[list[Segment]] = []
        table_width = self._row_label_column_width
        for column_index, column in enumerate(self.ordered_columns):
            width = column.get_render_width(self)
            table_width += width
            cell_location = Coordinate(row_index, column_index)
            scrollable_row.append(
                self._render_cell(
                    row_index,
                    column_index,
                    row_style,
                    width,
                    cursor=should_highlight(cursor_location, cell_location, cursor_type),
                    hover=should_highlight(hover_location, cell_location, cursor_type),
                )[line_no]
            )
        remaining_space = max(0, self.size.width - table_width)
        extend_style = self._extend_style(row_index, row_style, cursor_location, hover_location)
        scrollable_row.append([Segment(" " * remaining_space, extend_style)])
        self._row_render_cache[cache_key] = ([], scrollable_row)
        return [], scrollable_row

    def _extend_style(self, row_index: int, row_style: Style, cursor: Coordinate, hover: Coordinate) -> Style:
        """The style that fills a row out to the table's width, as the stock method computes it."""
        if self.cursor_type == "row":
            extend_style, _ = self._get_styles_to_render_cell(
                False,
                False,
                False,
                self._should_highlight(hover, Coordinate(row_index or 0, 0), self.cursor_type),
                row_index == cursor.row,
                self.show_cursor,
                self._show_hover_cursor,
                False,
                False,
            )
            extend_style = row_style + extend_style
        elif row_style.bgcolor is not None:
            faded = Color.from_rich_color(row_style.bgcolor).blend(self.background_colors[1], factor=0.25)
            extend_style = Style.from_color(color=row_style.color, bgcolor=faded.rich_color)
        else:
            extend_style = Style.from_color(row_style.color, row_style.bgcolor)
        return extend_style + Style.from_meta({"row": row_index, "column": 0, "out_of_bounds": True})

    def _render_cell(
        self,
        row_index: int,
        column_index: int,
        base_style: Style,
        width: int,
        cursor: bool = False,
        hover: bool = False,
    ) -> list[list[Segment]]:
        if row_index < 0 or column_index < 0 or row_index < self.fixed_rows or column_index < self.fixed_columns:
            return super()._render_cell(row_index, column_index, base_style, width, cursor, hover)
        row_key = self._row_locations.get_key(row_index)
        column_key = self._column_locations.get_key(column_index)
        row = self.rows.get(row_key) if row_key is not None else None
        if row is None or row.height != 1 or row_key is None or column_key is None:
            return super()._render_cell(row_index, column_index, base_style, width, cursor, hover)
        _, row_cells = self._get_row_renderables(row_index)
        cell = row_cells[column_index]
        text = cell if isinstance(cell, Text) else Text(str(cell))
        # Keyed by what the cell shows, not by the table's update count: a cell whose text did not change
        # since the last frame is not rendered again (at a 1 s refresh most of a row's cells do not).
        cache_key = (
            text.plain,
            text.style,
            tuple(text.spans),
            width,
            row_index,
            column_index,
            base_style,
            cursor,
            hover,
            self._show_hover_cursor,
            self._pseudo_class_state,
        )
        cache = cast("LRUCache[Any, list[list[Segment]]]", self._cell_render_cache)  # cleared with the stock caches
        cached = cache.get(cache_key)
        if cached is not None:
            return cached
        component_style, post_style = self._get_styles_to_render_cell(
            False,
            False,
            False,
            hover,
            cursor,
            self.show_cursor,
            self._show_hover_cursor,
            self.cursor_foreground_priority == "css",
            self.cursor_background_priority == "css",
        )
        pad = self.cell_padding
        inner = max(0, width - 2 * pad)
        line = text
        if text.cell_len > inner:
            line = text.copy()
            line.truncate(inner, overflow="crop")
        style = base_style + component_style + Style.from_meta({"row": row_index, "column": column_index})
        fill = " " * (inner - line.cell_len + pad)
        console = self.app.console
        rendered = line.render(console)
        if line.style:  # Text.render leaves the text's own style out when it has no spans
            rendered = Segment.apply_style(rendered, console.get_style(line.style))
        segments = [Segment(" " * pad), *rendered, Segment(fill)]
        lines = [list(Segment.apply_style(segments, style, post_style))]
        cache[cache_key] = lines
        return lines
