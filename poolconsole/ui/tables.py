"""Keyed diffs for the secondary screens' DataTables: rows are added, updated cell by cell and removed by
key, so the cursor and the scroll stay where the operator left them across redraws (never clear and
refill). Every cell is plain text: data from config or the network is never parsed as markup."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rich.text import Text
from textual.widgets import DataTable
from textual.widgets.data_table import CellDoesNotExist, RowDoesNotExist

Cell = str | Text


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
    cursor_key = keys[table.cursor_row] if 0 <= table.cursor_row < len(keys) else None
    scroll = table.scroll_y
    table.clear()
    for key in wanted:
        table.add_row(*(_text(c) for c in rows[key]), key=key)
    if cursor_key is not None and cursor_key in rows:
        table.move_cursor(row=wanted.index(cursor_key), animate=False)
    table.scroll_to(y=scroll, animate=False)
