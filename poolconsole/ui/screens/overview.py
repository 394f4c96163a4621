"""Pool overview: the pool's summary (a verdict in words, then its totals) over one row per engine, plus
hosts without engines. Rows are updated in place (keyed diffs inside one batch), the cursor stays where it
is, `/` filters, `s` sorts, `!` puts the rows that need attention first (on by default while anything is
wrong), and the columns fit the width (folding the least important ones on a narrow terminal)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import Footer, Header, Input, Static

from poolconsole.model.alerts import Alerts
from poolconsole.model.events import CRITICAL, OK, WARNING, EventLog
from poolconsole.model.pool_state import PoolState, host_vram_fraction
from poolconsole.model.summary import Summary, summarise
from poolconsole.ui import cells
from poolconsole.ui.grid import SPAN, PoolGrid

SORTS: tuple[tuple[str, str], ...] = (
    ("host", "host"),
    ("tps", "tok/s"),
    ("kv", "KV"),
    ("queue", "waiting"),
    ("engine", "name"),
)


LABELS = {s.key: s.label for s in cells.SPECS} | {"engine": "name", "queue": "waiting", "spark": "tok/s trend"}
"""How the status line names the sort column."""
TEXT_SORTS = frozenset({"host", "engine", "kind", "model", "why"})
"""Columns sorted by their text (A to Z, empty last); the others by the model's numbers, highest first."""
STATE_RANK = {"ok": 0.0, "degraded": 1.0, "down": 2.0, "auth_failed": 2.0}


def _clock(at: float) -> str:
    return dt.datetime.fromtimestamp(at, dt.UTC).strftime("%H:%M:%S")


def events_lines(height: int) -> int:
    """How many lines the events pane takes on a terminal `height` lines tall (its title included)."""
    return 3 if height < 30 else 5 if height < 45 else 7


def _plain(value: Text | str) -> str:
    return value.plain if isinstance(value, Text) else value


def _signature(value: Text | str) -> str:
    """What a cell shows, to compare with the last frame (a Text is made only for cells that changed)."""
    return value if isinstance(value, str) else value.plain + str(value.style) + str(value.spans)


def _text(value: Text | str) -> Text:
    return value if isinstance(value, Text) else Text(value)  # a str cell would be parsed as markup on every render


def pack(line: str, width: int) -> list[str]:
    """A summary line (parts joined by " · ") wrapped to `width` at its parts, a part too long on its own
    ending in "…": each screen line reads whole, nothing is cut mid-figure but an overlong name."""
    out: list[str] = []
    for part in line.split(" · "):
        if len(part) > width:
            part = part[: max(0, width - 1)] + "…"
        if out and len(out[-1]) + 3 + len(part) <= width:
            out[-1] += " · " + part
        else:
            out.append(part)
    return out


def summary_text(summary: Summary, width: int, c: cells.Colors) -> Text:
    """The verdict on one line (cut with "…" past the width: the most severe problems come first), in
    the colour of its worst problem, then the totals packed to the width."""
    verdict = summary.verdict if len(summary.verdict) <= width else summary.verdict[: max(0, width - 1)] + "…"
    critical = any(p.severity == "critical" for p in summary.problems)
    colour = c.ok if summary.healthy else c.bad if critical else c.warn
    text = Text()
    text.append(verdict, style=f"bold {colour}")
    for line in summary.lines:
        for packed in pack(line, width):
            text.append("\n" + packed)  # in the widget's own (muted) colour
    return text


def _view_number(state: PoolState, key: str, column: str) -> float | None:
    """The model's number behind a sortable column (None: unknown, or a host row without an engine)."""
    if key.startswith("host:"):
        host = state.hosts.get(key[5:])
        snap = host.snapshot if host else None
        if column == "age" and host is not None:
            return state.age_s(host.last_ok_at)
        if column == "vram" and snap is not None:
            return host_vram_fraction(snap)
        return STATE_RANK.get(snap.state.value, 2.0) if column == "state" and snap is not None else None
    track = state.engines.get(key.removeprefix("engine:"))
    view = track.view if track else None
    if track is None or view is None:
        return None
    value: float | None = {
        "tps": view.generation_tokens_per_s,
        "spark": view.generation_tokens_per_s,
        "kv": view.kv_cache_usage,
        "queue": view.requests_waiting,
        "ttft": view.ttft_p50_s,
        "age": state.age_s(track.last_ok_at),
        "vram": state.engine_vram_fraction(track.config.name),
        "state": STATE_RANK.get(view.state.value, 2.0),
    }.get(column)
    return value


class OverviewScreen(Screen[None]):
    CSS_PATH = Path(__file__).with_suffix(".tcss")

    def __init__(self, state: PoolState, alerts: Alerts | None = None, events: EventLog | None = None) -> None:
        super().__init__()
        self.state = state
        self.alerts = alerts
        """The alerts the summary counts and the rows' "why" names (None: the app's)."""
        self.events = events
        """The timeline the events pane shows, newest first (None: no pane)."""
        self.show_events = True
        self._events_drawn: tuple[int, int, int, str] | None = None
        self.sort_key = "host"
        """The column rows are sorted by (`s` cycles SORTS; a click on a header picks any column)."""
        self.reverse = False
        self.spans: set[str] = set()
        """The rows drawn as one line across the columns: the host lines, while rows are grouped by host."""
        self.rendered: dict[str, dict[str, str]] = {}
        self.filter_text = ""
        self.sort_index = 0
        self.status_text = ""
        self.attention: bool | None = None
        """Rows that need attention first: None follows the pool (on while anything is wrong)."""
        self.summary: Summary | None = None
        self._summary_drawn: tuple[str, int] | None = None

    def compose(self) -> ComposeResult:
        yield Header()
        with Vertical():
            yield Input(placeholder="filter rows (Esc clears)", id="filter")
            hint = getattr(self.app, "hint", None)
            if hint:
                yield Static(hint, id="hint", markup=False)
            yield Static("", id="summary", markup=False)
            yield PoolGrid(
                cells.overview_columns(sum(s.min + sum(cells.PAD) for s in cells.SPECS)),
                id="pool",
                pad=cells.PAD,
                fit=cells.overview_columns,
            )
            yield Static("", id="events", markup=False)
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
    def _alerts(self) -> Alerts:
        if self.alerts is None:
            self.alerts = getattr(self.app, "alerts", None) or Alerts(self.state.config.alerts)
        return self.alerts

    def rows(self) -> dict[str, dict[str, Text | str]]:
        c = cells.Colors.from_theme(self.app.theme_variables)
        summary = self.summary or summarise(self.state, self._alerts())
        why = summary.why()
        grid = self.query_one(PoolGrid)
        widths = {column.key: column.width for column in grid.columns}
        out: dict[str, dict[str, Any]] = {}
        with_engines = set()
        for track in self.state.engines.values():
            name, host = track.config.name, track.config.host or ""
            reason = why.get(name) or why.get(host)  # the host's own trouble (swap in use) is the engine's too
            out[f"engine:{name}"] = cells.engine_row(self.state, track, c, widths, reason)
            with_engines.add(track.config.host)
        self.spans = set()
        for host_track in self.state.hosts.values():
            key, reason = f"host:{host_track.config.name}", why.get(host_track.config.name)
            if self.grouped():  # a line over its engines: the host's GPUs, a bar per card
                width = grid.row_width - grid.pad[0]
                out[key] = {SPAN: cells.host_line(self.state, host_track, c, width, reason)}
                self.spans.add(key)
            elif host_track.config.name not in with_engines:
                out[key] = cells.host_row(self.state, host_track, c, widths, reason)
        if self.filter_text:
            needle = self.filter_text.lower()
            out = {k: r for k, r in out.items() if any(needle in _plain(v).lower() for v in r.values())}
        return out

    def attention_first(self) -> bool:
        """Whether the rows that need attention come first: as toggled (`!`), else while anything is wrong."""
        if self.attention is not None:
            return self.attention
        return self.summary is not None and not self.summary.healthy

    def grouped(self) -> bool:
        """Rows grouped by host, each group under its host line: while sorted by host."""
        return self.sort_key == "host"

    def _order(self, rows: dict[str, dict[str, Any]]) -> list[str]:
        column = self.sort_key
        rank = self.summary.rank() if self.attention_first() and self.summary is not None else {}

        def need(key: str) -> int:  # critical, warning, then the rest; each in the sort's order
            name = key.split(":", 1)[1]
            host = cells.host_of_row(self.state, key) or ""
            return min(rank.get(name, 2), rank.get(host, 2))

        if self.grouped():
            groups: dict[str, list[str]] = {}
            for key in rows:
                groups.setdefault(cells.host_of_row(self.state, key) or "", []).append(key)
            for members in groups.values():  # the host line first, then its engines by name
                members.sort(key=lambda k: (not k.startswith("host:"), k))
            hosts = sorted(groups, reverse=self.reverse)
            if rank:
                hosts.sort(key=lambda h: min(need(k) for k in groups[h]))
                for members in groups.values():
                    members.sort(key=lambda k: -1 if k.startswith("host:") else need(k))
            return [key for host in hosts for key in groups[host]]
        if column in TEXT_SORTS:
            texts = {k: _plain(rows[k].get(column, "")) for k in rows}
            order = sorted(rows, key=lambda k: (texts[k], _plain(rows[k]["engine"])), reverse=self.reverse)
            order.sort(key=lambda k: texts[k] == "")  # empty last, either way
        else:
            # The model's numbers, highest first (reversed: lowest); unknown ones last either way (never
            # read as 0, never parsed from text).
            values = {k: _view_number(self.state, k, column) for k in rows}
            sign = 1.0 if self.reverse else -1.0
            order = sorted(rows, key=lambda k: (values[k] is None, sign * (values[k] or 0.0), k))
        if rank:
            order.sort(key=need)
        return order

    def refresh_rows(self) -> None:
        """Apply the latest model to the table: update changed cells only, add and drop rows as needed."""
        table = self.query_one(PoolGrid)
        self.summary = summarise(self.state, self._alerts())
        rows = self.rows()
        order = self._order(rows)
        keys = table.column_keys
        with self.app.batch_update():
            self._draw_summary()
            self._draw_events()
            spans = self.spans

            def columns(key: str) -> list[str]:
                return [SPAN] if key in spans else keys

            if list(self.rendered) != order or any(k in table.rows and table.is_span(k) != (k in spans) for k in order):
                table.set_rows(order, {key: [_text(rows[key][c]) for c in columns(key)] for key in order}, spans)
                self.rendered = {key: {c: _signature(rows[key][c]) for c in columns(key)} for key in order}
            else:
                changes = []
                for key in order:
                    old = self.rendered[key]
                    for column in columns(key):
                        value = rows[key][column]
                        signature = _signature(value)
                        if old.get(column) != signature:
                            changes.append((key, column, _text(value)))
                            old[column] = signature
                table.update_cells(changes)
        self._status_line()

    def selected(self) -> str | None:
        return self.query_one(PoolGrid).cursor_key

    def _draw_summary(self) -> None:
        box = self.query_one("#summary", Static)
        if self.summary is None:
            return
        width = max(20, box.content_size.width or self.app.size.width - 2)
        drawn = (self.summary.verdict + "\n".join(self.summary.lines), width)
        if drawn == self._summary_drawn:
            return
        self._summary_drawn = drawn
        box.update(summary_text(self.summary, width, cells.Colors.from_theme(self.app.theme_variables)))

    def _draw_events(self) -> None:
        """The newest events under the table, as many as the pane's lines hold; redrawn only when the
        log, the width or the theme changed."""
        pane = self.query_one("#events", Static)
        log = self.events
        pane.display = log is not None and self.show_events
        if log is None or not self.show_events:
            return
        lines = events_lines(self.app.size.height)
        width = max(20, pane.content_size.width or self.app.size.width - 2)
        drawn = (log.version, width, lines, self.app.theme)
        if drawn == self._events_drawn:
            return
        self._events_drawn = drawn
        c = cells.Colors.from_theme(self.app.theme_variables)
        colour = {CRITICAL: c.bad, WARNING: c.warn, OK: c.ok}
        title = "Events, newest first (e hides, E opens them all with a filter)"
        if not log.live:
            title = "Events in the recording: restarts and alerts (actions and smoke runs are live-only)"
        text = Text()
        text.append(title[: width - 1] + "…" if len(title) > width else title, style="bold")
        shown = log.newest(limit=lines - 1)
        if not shown:
            text.append("\nnothing has happened yet" if log.live else "\nnone so far in the recording")
        for event in shown:
            line = f"{_clock(event.at)}  {event.target}  {event.text()}"
            text.append("\n")
            text.append(line if len(line) <= width else line[: width - 1] + "…", style=colour.get(event.severity, ""))
        pane.update(text)

    def toggle_events(self) -> None:
        """Show or hide the events pane (the table takes its lines)."""
        self.show_events = not self.show_events
        self._events_drawn = None
        self._draw_events()

    def on_resize(self) -> None:
        self._summary_drawn = None  # packed again to the new width
        self._events_drawn = None
        if getattr(self, "ready", False):
            self.call_after_refresh(self._draw_summary)

    def on_pool_grid_columns_changed(self, event: PoolGrid.ColumnsChanged) -> None:
        """A new width folded or widened columns: every row's cells again, in the new columns."""
        self.rendered = {}
        if getattr(self, "ready", False):
            self.refresh_rows()

    def _status_line(self) -> None:
        app: Any = self.app
        alerts = len(app.alerts.active) if hasattr(app, "alerts") else 0
        mode = "  READ-ONLY" if getattr(app, "read_only", False) else ""
        shown = self.query_one(PoolGrid).row_count
        filt = f"  filter: {self.filter_text!r}" if self.filter_text else ""
        first = ", problems first" if self.attention_first() else ""
        sort = LABELS.get(self.sort_key, self.sort_key) + (", reversed" if self.reverse else "")
        sort += ", grouped by host" if self.grouped() else ""
        line = f"{shown} rows  sorted by {sort}{first}{filt}  active alerts: {alerts}{mode}"
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
            return self.summary is not None and not self.summary.healthy
        box.value = ""
        box.display = False
        box.disabled = True
        self.filter_text = ""
        self.query_one(PoolGrid).focus()
        self.refresh_rows()
        return True

    def next_sort(self) -> None:
        self.sort_index = (self.sort_index + 1) % len(SORTS)
        self.sort_key, self.reverse = SORTS[self.sort_index][0], False
        self.refresh_rows()

    def sort_by(self, column: str) -> None:
        """Sort by `column`; by the same column again, the other way round."""
        self.reverse = not self.reverse if column == self.sort_key else False
        self.sort_key = column
        self.refresh_rows()

    def on_pool_grid_header_clicked(self, event: PoolGrid.HeaderClicked) -> None:
        self.sort_by(event.column)

    def toggle_attention(self) -> None:
        """`!`: rows that need attention first, or not (from then on as chosen, whatever the pool does)."""
        self.attention = not self.attention_first()
        self.refresh_rows()

    def on_pool_grid_row_selected(self, event: PoolGrid.RowSelected) -> None:
        self.app.call_later(self.app.run_action, "open_detail")
