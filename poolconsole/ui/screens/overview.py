"""Pool overview: one row per engine grouped by host, plus hosts without engines. Rows are updated in
place (keyed diffs inside one batch), the cursor stays where it is, `/` filters, `s` sorts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import Footer, Header, Input, Static

from poolconsole.model.pool_state import PoolState
from poolconsole.ui import cells
from poolconsole.ui.grid import Column, PoolGrid

SORTS: tuple[tuple[str, str], ...] = (
    ("host", "host"),
    ("tps", "tok/s"),
    ("kv", "KV"),
    ("queue", "waiting"),
    ("engine", "name"),
)


def _plain(value: Text | str) -> str:
    return value.plain if isinstance(value, Text) else value


def _signature(value: Text | str) -> str:
    """What a cell shows, to compare with the last frame (a Text is made only for cells that changed)."""
    return value if isinstance(value, str) else value.plain + str(value.style) + str(value.spans)


def _text(value: Text | str) -> Text:
    return value if isinstance(value, Text) else Text(value)  # a str cell would be parsed as markup on every render


def _view_number(state: PoolState, key: str, column: str) -> float | None:
    """The model's number behind a sortable column (None: unknown, or a host row without an engine)."""
    track = state.engines.get(key.removeprefix("engine:")) if key.startswith("engine:") else None
    view = track.view if track else None
    if view is None:
        return None
    value: float | None = {
        "tps": view.generation_tokens_per_s,
        "kv": view.kv_cache_usage,
        "queue": view.requests_waiting,
    }[column]
    return value


class OverviewScreen(Screen[None]):
    CSS_PATH = Path(__file__).with_suffix(".tcss")

    def __init__(self, state: PoolState) -> None:
        super().__init__()
        self.state = state
        self.rendered: dict[str, dict[str, str]] = {}
        self.filter_text = ""
        self.sort_index = 0
        self.status_text = ""

    def compose(self) -> ComposeResult:
        yield Header()
        with Vertical():
            yield Input(placeholder="filter rows (Esc clears)", id="filter")
            hint = getattr(self.app, "hint", None)
            if hint:
                yield Static(hint, id="hint", markup=False)
            yield PoolGrid([Column(*c) for c in cells.COLUMNS], id="pool")
            yield Static("", id="status-line")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one(PoolGrid)
        box = self.query_one("#filter", Input)
        box.display = False
        box.disabled = True  # hidden: it must not take focus (and the keys) from the table
        table.focus()
        self.refresh_rows()
        self.ready = True

    # -- data ----------------------------------------------------------------------------------------
    def rows(self) -> dict[str, dict[str, Text | str]]:
        c = cells.Colors.from_theme(self.app.theme_variables)
        out: dict[str, dict[str, Any]] = {}
        with_engines = set()
        for track in self.state.engines.values():
            out[f"engine:{track.config.name}"] = cells.engine_row(self.state, track, c)
            with_engines.add(track.config.host)
        for host in self.state.hosts.values():
            if host.config.name not in with_engines:
                out[f"host:{host.config.name}"] = cells.host_row(self.state, host, c)
        if self.filter_text:
            needle = self.filter_text.lower()
            out = {k: r for k, r in out.items() if any(needle in _plain(v).lower() for v in r.values())}
        return out

    def _order(self, rows: dict[str, dict[str, Any]]) -> list[str]:
        column = SORTS[self.sort_index][0]
        if column in ("host", "engine"):
            return sorted(rows, key=lambda k: (_plain(rows[k]["host"]), _plain(rows[k]["engine"])))
        # The model's numbers, highest first; unknown ones last (never read as 0, never parsed from text).
        values = {k: _view_number(self.state, k, column) for k in rows}
        return sorted(rows, key=lambda k: (values[k] is None, -(values[k] or 0.0), k))

    def refresh_rows(self) -> None:
        """Apply the latest model to the table: update changed cells only, add and drop rows as needed."""
        table = self.query_one(PoolGrid)
        rows = self.rows()
        order = self._order(rows)
        with self.app.batch_update():
            if list(self.rendered) != order:
                table.set_rows(order, {key: [_text(v) for v in rows[key].values()] for key in order})
                self.rendered = {key: {c: _signature(v) for c, v in rows[key].items()} for key in order}
            else:
                changes = []
                for key in order:
                    old = self.rendered[key]
                    for column, value in rows[key].items():
                        signature = _signature(value)
                        if old.get(column) != signature:
                            changes.append((key, column, _text(value)))
                            old[column] = signature
                table.update_cells(changes)
        self._status_line()

    def selected(self) -> str | None:
        return self.query_one(PoolGrid).cursor_key

    def _status_line(self) -> None:
        app: Any = self.app
        alerts = len(app.alerts.active) if hasattr(app, "alerts") else 0
        mode = "  READ-ONLY" if getattr(app, "read_only", False) else ""
        shown = self.query_one(PoolGrid).row_count
        filt = f"  filter: {self.filter_text!r}" if self.filter_text else ""
        line = f"{shown} rows  sorted by {SORTS[self.sort_index][1]}{filt}  active alerts: {alerts}{mode}"
        if line != self.status_text:
            self.status_text = line
            # One line of fixed height: no layout pass (one would also redraw the whole table).
            self.query_one("#status-line", Static).update(line, layout=False)

    # -- interaction ---------------------------------------------------------------------------------
    def open_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.display = True
        box.disabled = False
        box.focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        self.filter_text = event.value.strip()
        self.refresh_rows()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.query_one(PoolGrid).focus()

    def clear_filter(self) -> bool:
        box = self.query_one("#filter", Input)
        if not box.display:
            return False
        box.value = ""
        box.display = False
        box.disabled = True
        self.filter_text = ""
        self.query_one(PoolGrid).focus()
        self.refresh_rows()
        return True

    def next_sort(self) -> None:
        self.sort_index = (self.sort_index + 1) % len(SORTS)
        self.refresh_rows()

    def on_pool_grid_row_selected(self, event: PoolGrid.RowSelected) -> None:
        self.app.call_later(self.app.run_action, "open_detail")
