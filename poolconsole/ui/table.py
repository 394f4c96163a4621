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
from textual.cache import LRUCache
from textual.widgets import DataTable


class PoolTable(DataTable[Text | str]):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        # Every update invalidates every cached cell (the keys carry an update count), so what the stock
        # 10,000-cell cache holds is mostly dead: one screen of cells, twice over, is enough.
        self._cell_render_cache = LRUCache(2048)
        self._row_render_cache = LRUCache(256)

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
