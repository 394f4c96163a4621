"""Keyed diffs for the secondary screens' DataTables: rows are added, updated cell by cell and removed by
key, so the cursor and the scroll stay where the operator left them across redraws (never clear and
refill). Every cell is plain text: data from config or the network is never parsed as markup. A FitTable
keeps to its width: its long text is cut to fit and ends in "…", never cut silently at the screen's edge.
Home and End go to the first and the last row in every table here (RowTable), as on the overview: a
DataTable scrolls sideways on them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import ClassVar, Generic, TypeVar

from rich.cells import cell_len
from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.coordinate import Coordinate
from textual.widgets import DataTable
from textual.widgets.data_table import CellDoesNotExist, CursorType, RowDoesNotExist

Cell = str | Text
CellT = TypeVar("CellT")


def _text(cell: Cell) -> Text:
    return cell if isinstance(cell, Text) else Text(cell)


def _plain(cell: Cell) -> str:
    return cell.plain if isinstance(cell, Text) else cell


def sync_rows(table: DataTable[Text], rows: Mapping[str, Sequence[Cell]]) -> None:
    """Make `table` show `rows` (key -> cells, in order): only what changed is touched. A change of order
    (a new newest-first entry) re-adds the rows, keeping the cursor on the same key."""
    keys = [str(k.value) for k in table.rows]
    wanted = list(rows)
    columns = list(table.columns)
    if keys == wanted[: len(keys)] or not keys:
        for key in keys:
            for column, cell in zip(columns, rows[key], strict=False):
                try:
                    current = table.get_cell(key, column)
                except (CellDoesNotExist, RowDoesNotExist):
                    continue
                if _plain(current) != _plain(cell) or (isinstance(cell, Text) and current != cell):
                    table.update_cell(key, column, _text(cell))
        for key in wanted[len(keys) :]:
            table.add_row(*(_text(c) for c in rows[key]), key=key)
        return
    refill(table, rows)


def refill(table: DataTable[Text], rows: Mapping[str, Sequence[Cell]], *, columns: bool = False) -> None:
    """Clear `table` and add `rows` again, the cursor kept on its key and the scroll where it was. With
    `columns`, the columns are added again too: their widths are measured afresh (a DataTable widens an
    auto-width column as its cells grow, but never narrows it when they are cleared)."""
    keys = [str(k.value) for k in table.rows]
    cursor_key = keys[table.cursor_row] if 0 <= table.cursor_row < len(keys) else None
    scroll = table.scroll_y
    kept = [(c.label, str(c.key.value), None if c.auto_width else c.width) for c in table.ordered_columns]
    table.clear(columns=columns)
    if columns:
        for label, key, width in kept:
            table.add_column(label, width=width, key=key)
    wanted = list(rows)
    for key in wanted:
        table.add_row(*(_text(c) for c in rows[key]), key=key)
    if cursor_key is not None and cursor_key in rows:
        table.move_cursor(row=wanted.index(cursor_key), animate=False)
    table.scroll_to(y=scroll, animate=False)


class RowTable(DataTable[CellT], Generic[CellT]):
    """A DataTable of rows whose Home and End keys go to the first and the last row."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("home", "first_row", "First row", show=False),
        Binding("end", "last_row", "Last row", show=False),
    ]

    def action_first_row(self) -> None:
        if self.row_count:
            self.move_cursor(row=0, animate=False)

    def action_last_row(self) -> None:
        if self.row_count:
            self.move_cursor(row=self.row_count - 1, animate=False)
            # and to the very end once laid out: a pane under the table that grows for the new row (the help
            # screen's words of a longer action) shortens the table after the cursor scrolled into view
            self.call_after_refresh(self.scroll_end, animate=False)


class FitTable(RowTable[Text]):
    """A DataTable that fits its width: the cells of its `elastic` columns (key -> the least width each keeps)
    are cut to the room the other columns leave, the first named first, and a cut cell ends in "…" (Rich's
    Text.truncate). Where even the least widths do not fit, the table scrolls sideways as any DataTable does.
    It keeps the rows it was shown whole (`wanted`) and fits them again when its size changes; when a
    column's width changes, the columns are measured afresh (`refill`)."""

    def __init__(self, elastic: Mapping[str, int], *, id: str | None = None, cursor_type: CursorType = "row") -> None:
        super().__init__(id=id, cursor_type=cursor_type)
        self.elastic = dict(elastic)
        self.wanted: dict[str, tuple[Cell, ...]] = {}
        self._widths: dict[str, int] | None = None
        """The column widths the rows were last fitted to."""

    def highlighted(self) -> str | None:
        """The key of the row under the cursor (None: no rows)."""
        if not 0 <= self.cursor_row < self.row_count:
            return None
        return self.coordinate_to_cell_key(Coordinate(self.cursor_row, 0)).row_key.value

    def show(self, rows: Mapping[str, Sequence[Cell]]) -> None:
        """Make the table show `rows` (as sync_rows does), the elastic columns cut to fit."""
        self.wanted = {key: tuple(cells) for key, cells in rows.items()}
        self._fit()

    def on_resize(self, event: events.Resize) -> None:
        if self.wanted:
            self._fit()

    def _fit(self) -> None:
        widths = self.widths()
        if widths != self._widths and self.row_count:
            refill(self, self.fitted(widths), columns=True)
        else:
            sync_rows(self, self.fitted(widths))
        self._widths = widths

    def widths(self) -> dict[str, int]:
        """Each column's width: its widest cell or its label, the elastic ones less what the table is too
        wide by (the vertical scrollbar counted once the rows overflow its height). Where the table cannot
        fit even so, it scrolls sideways, and each elastic column is at most as wide as the table."""
        columns = self.ordered_columns
        widths = {str(c.key.value): c.label.cell_len for c in columns}
        for cells in self.wanted.values():
            for column, cell in zip(columns, cells, strict=False):
                key = str(column.key.value)
                widths[key] = max(widths[key], cell_len(_plain(cell)))
        if self.size.width == 0:
            return widths  # not laid out yet: fitted on the first resize
        rows_height = len(self.wanted) + (self.header_height if self.show_header else 0)
        scrollbar = self.styles.scrollbar_size_vertical if rows_height > self.size.height else 0
        room = self.size.width - scrollbar
        elastic = [key for key in self.elastic if key in widths]
        fitted = dict(widths)
        excess = sum(widths.values()) + 2 * self.cell_padding * len(widths) - room
        for key in elastic:
            cut = min(max(excess, 0), max(0, widths[key] - self.elastic[key]))
            fitted[key] -= cut
            excess -= cut
        if excess <= 0:
            return fitted
        return widths | {key: min(widths[key], max(1, room - 2 * self.cell_padding)) for key in elastic}

    def fitted(self, widths: Mapping[str, int]) -> dict[str, tuple[Cell, ...]]:
        """The rows with each elastic cell wider than its column (`widths`) cut to it, ending in "…"."""
        keys = [str(c.key.value) for c in self.ordered_columns]
        cut = {index: widths[key] for index, key in enumerate(keys) if key in self.elastic}
        out: dict[str, tuple[Cell, ...]] = {}
        for key, cells in self.wanted.items():
            row = list(cells)
            for index, width in cut.items():
                if index < len(row) and cell_len(_plain(row[index])) > width:
                    text = _text(row[index]).copy()
                    text.truncate(width, overflow="ellipsis")
                    row[index] = text
            out[key] = tuple(row)
        return out
