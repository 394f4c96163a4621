"""Pool overview: the pool's summary (a verdict in words, then its totals) over one row per engine, plus
hosts without engines. Rows are updated in place (keyed diffs inside one batch), the cursor stays where it
is, `/` filters, `s` sorts, `!` puts the rows that need attention first (on by default while anything is
wrong), and the columns fit the width (folding the least important ones on a narrow terminal)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import Header, Input, Static

from poolconsole.config.models import EngineKind
from poolconsole.model.alerts import Alerts
from poolconsole.model.events import CRITICAL, OK, WARNING, EventLog
from poolconsole.model.hosts import HostSnapshot
from poolconsole.model.pool_state import EngineTrack, PoolState, host_vram_fraction
from poolconsole.model.summary import Summary, summarise
from poolconsole.model.view import EngineView
from poolconsole.ui import cells, overview_rows
from poolconsole.ui.footer import KeysFooter
from poolconsole.ui.grid import SPAN, PoolGrid

SORTS: tuple[tuple[str, str], ...] = (
    ("host", "host"),
    ("tps", "tok/s"),
    ("kv", "KV"),
    ("queue", "waiting"),
    ("engine", "name"),
)


LABELS = {s.key: s.label for s in overview_rows.SPECS} | {"queue": "Run/Wait (waiting)"}
"""How the status line names the sort column: its header's words ("name" and "waiting" were not)."""
TEXT_SORTS = frozenset({"host", "engine", "kind", "model", "why"})
"""Columns sorted by their text (A to Z, empty last); the others by the model's numbers, highest first."""


BY_IDENTITY = (EngineView, HostSnapshot)
GROUPINGS = ("host", "model", "engine")
"""`G` cycles: grouped by host, grouped by model, one flat list ("engine": a row per engine)."""


GATEWAYS = "gateways (routing to the engines)"
"""The group a LiteLLM gateway goes in when grouped by model: it routes every model it lists, so under its
first one it was counted as a second engine of that model (and its tok/s twice)."""


def model_of(track: EngineTrack) -> str:
    """The model an engine serves, to group by: the first it lists, else the configured one; a gateway's
    group is the gateways'."""
    if track.config.kind is EngineKind.LITELLM:
        return GATEWAYS
    view = track.view
    return (view.models[0] if view and view.models else None) or track.config.model or "no model"


def _clock(at: float) -> str:
    return dt.datetime.fromtimestamp(at, dt.UTC).strftime("%H:%M:%S")


def events_lines(height: int) -> int:
    """How many lines the events pane takes on a terminal `height` lines tall (its title included)."""
    return 3 if height < 30 else 5 if height < 45 else 7


ROWS_KEPT = 16
"""Lines of rows the table keeps on a short terminal (a host line over each engine: about 8 engines). The
events pane gives way first (hidden while it would leave fewer), then the summary folds to its verdict and
one line of figures. At 120x40 neither happens; at 80x24 both do."""
CHROME = 4
"""The overview's lines that are not the summary, the events pane or the table's rows: the header, the
table's header, the status line and the keys."""
FOLDED = ("engines", "generation", "running", "waiting", "hosts", "alerts")
"""The figures a folded summary keeps, most wanted first (as many as fit its one line), each a part of
summarise()'s lines up to its ": " (the names after it are the verdict's)."""


def _plain(value: Text | str) -> str:
    return value.plain if isinstance(value, Text) else value


def _signature(value: Text | str) -> str:
    """What a cell shows, to compare with the last frame (a Text is made only for cells that changed)."""
    return value if isinstance(value, str) else value.plain + str(value.style) + str(value.spans)


def _spanning(build: Callable[[], Text]) -> dict[str, Text | str]:
    """A line across the columns as a row's cells: its one cell."""
    return {SPAN: build()}


def _text(value: Text | str) -> Text:
    return value if isinstance(value, Text) else Text(value)  # a str cell would be parsed as markup on every render


def _same(a: Any, b: Any) -> bool:
    """Whether two row stamps are the same: the model's views and snapshots by identity (each poll makes a
    new one; comparing two field by field, sixteen GPUs each, cost more than building the row), tuples item
    by item, the rest by value."""
    if a is b:
        return True
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, BY_IDENTITY) or isinstance(b, BY_IDENTITY):
        return False
    return bool(a == b)


@dataclass
class RowEntry:
    """A row as the model has it now: what its cells are made from (`stamp`), how to build them, and its text
    columns in plain words. The cells are built only when the row is drawn (in view, or scrolled into view)
    or read, once per stamp: at 1,000 engines building every changed row each refresh was most of its cost.
    The words are what the text sorts and the filter read, so neither needs a row built."""

    stamp: tuple[Any, ...]
    build: Callable[[], dict[str, Any]]
    words: Callable[[], dict[str, str]]
    cells: dict[str, Any] | None = None
    _search: str | None = None

    def search(self) -> str:
        """The row's words in lower case, as the filter matches them."""
        if self._search is None:
            self._search = "\0".join(self.words().values()).lower()
        return self._search


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


def folded_figures(lines: Iterable[str], width: int) -> str:
    """The one line of figures a folded summary shows: the FOLDED parts of summarise()'s lines (each up to
    its ": "), most wanted first, each whole, as many as fit `width`."""
    parts: dict[str, str] = {}
    for line in lines:
        for part in line.split(" · "):
            word = part.split(" ", 1)[0]
            if word in FOLDED and word not in parts:
                parts[word] = part.split(": ", 1)[0]
    out = ""
    for word in FOLDED:
        figure = parts.get(word)
        if figure is None:
            continue
        joined = f"{out} · {figure}" if out else figure
        if len(joined) <= width:
            out = joined
    return out


def summary_text(summary: Summary, width: int, c: cells.Colors, folded: bool = False) -> Text:
    """The verdict on one line (cut with "…" past the width: the most severe problems come first), in
    the colour of its worst problem, then the totals packed to the width; `folded` (a short terminal),
    one line of the main figures instead of the totals."""
    verdict = summary.verdict if len(summary.verdict) <= width else summary.verdict[: max(0, width - 1)] + "…"
    critical = any(p.severity == "critical" for p in summary.problems)
    colour = c.ok if summary.healthy else c.bad if critical else c.warn
    text = Text()
    text.append(verdict, style=f"bold {colour}")
    if folded:
        figures = folded_figures(summary.lines, width)
        if figures:
            text.append("\n" + figures)
        return text
    for line in summary.lines:
        for packed in pack(line, width):
            text.append("\n" + packed)  # in the widget's own (muted) colour
    return text


def summary_lines(summary: Summary, width: int) -> int:
    """How many lines the whole summary takes at `width`: its verdict and its totals packed."""
    return 1 + sum(len(pack(line, width)) for line in summary.lines)


def _view_number(state: PoolState, key: str, column: str) -> float | None:
    """The model's number behind a sortable column (None: unknown, or a host row without an engine)."""
    if key.startswith("host:"):
        host = state.hosts.get(key[5:])
        snap = host.snapshot if host else None
        if column == "age" and host is not None:
            return state.age_s(host.last_ok_at)
        if column == "vram" and snap is not None:
            return host_vram_fraction(snap)
        return float(snap.state.severity) if column == "state" and snap is not None else None
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
        "state": float(view.state.severity),
    }.get(column)
    return value


class OverviewScreen(Screen[None]):
    CSS_PATH = Path(__file__).with_suffix(".tcss")

    def __init__(
        self,
        state: PoolState,
        alerts: Alerts | None = None,
        events: EventLog | None = None,
        *,
        hint: str | None = None,
        read_only: bool = False,
        opener: Callable[[str], None] | None = None,
    ) -> None:
        super().__init__()
        self.state = state
        self.alerts = alerts
        """The alerts the summary counts and the rows' "why" names (None: none fired)."""
        self.events = events
        """The timeline the events pane shows, newest first (None: no pane)."""
        self.hint = hint
        """A line shown above the table (the demo says how to point the console at a real pool)."""
        self.read_only = read_only
        """Said on the status line (READ-ONLY)."""
        self.opener = opener
        """Opens a row's detail (Enter, a double click): the app's navigation."""
        self.show_events: bool | None = None
        """The events pane as `e` left it (None: shown while the table keeps ROWS_KEPT lines of rows with it)."""
        self.folded = False
        """Whether the summary is folded to its verdict and one line of figures (a short terminal)."""
        self._events_drawn: tuple[int, int, int, str] | None = None
        self._box_lines: dict[str, int] = {}
        """Lines each `height: auto` box (summary, events) took when last drawn."""
        self.sort_key = "host"
        """The column rows are sorted by (`s` cycles SORTS; a click on a header picks any column)."""
        self.grouping: str | None = "host"
        """How rows are grouped (`G` cycles GROUPINGS), apart from the sort."""
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
        self._summary_drawn: tuple[str, int, bool] | None = None
        self.collapsed: set[str] = set()
        """The group lines whose rows are folded away (`c`, Enter or a click on the line; `C` all of them)."""
        self.problems_only = False
        """`p`: only the rows that need attention (and their groups' lines)."""
        self.hidden = 0
        """Engines left out by the filter, the problems-only view and folding (the status line says how many:
        it counts engines, not the group lines and hosts among the rows)."""
        self.engines_shown = 0
        self.by_filter = 0
        """Of the hidden engines, those the filter leaves out ..."""
        self.by_problems = 0
        """... and those `p` leaves out (the filter's matches that need no attention); the rest are folded."""
        self.group_of: dict[str, str] = {}
        """Row key -> its group's line key ("host:NAME", "model:NAME"; "" for rows outside every group)."""
        self.members: dict[str, list[str]] = {}
        """A group's line key -> the keys of its rows."""
        self._rank: dict[str, int] = {}
        self._cache: dict[str, RowEntry] = {}
        self._shape: tuple[Any, ...] = ()
        """Row key -> the row as the model has it (its cells once built)."""
        self.built = 0
        """How many rows' cells were built (tests count them: an unchanged target builds none, a row out of
        view none until it is drawn)."""

    def compose(self) -> ComposeResult:
        yield Header()
        with Vertical():
            yield Input(placeholder="filter rows (Esc clears)", id="filter")
            if self.hint:
                yield Static(self.hint, id="hint", markup=False)
            yield Static("", id="summary", markup=False)
            yield PoolGrid(
                overview_rows.overview_columns(sum(s.min + sum(overview_rows.PAD) for s in overview_rows.SPECS)),
                id="pool",
                pad=overview_rows.PAD,
                fit=overview_rows.overview_columns,
                provide=self._provide,
            )
            yield Static("", id="events", markup=False)
            yield Static("", id="status-line")
        yield KeysFooter()

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
            self.alerts = Alerts(self.state.config.alerts)
        return self.alerts

    def rows(self) -> dict[str, RowEntry]:
        """Every row (before the filter, the problems-only view and folding), keyed by row, its cells not
        built: a row's entry is made again only when what it shows changed (its target's latest view or
        snapshot, its host's snapshot, its "why", its age, the column widths or the theme), and its cells
        are built when it is drawn (cells_of). Also sets the rows' groups (`members`, `group_of`)."""
        c = cells.Colors.from_theme(self.app.theme_variables)
        summary = self.summary or summarise(self.state, self._alerts())
        why, rank = summary.why(), summary.rank()
        grid = self.query_one(PoolGrid)
        widths = {column.key: column.width for column in grid.columns}
        shape = (tuple(widths.items()), c)
        if shape == self._shape:  # the same object while the widths and the theme stay: stamps compare fast
            shape = self._shape
        self._shape = shape
        grouping = self.grouped()
        span_width = grid.row_width - grid.pad[0]
        state = self.state
        out: dict[str, RowEntry] = {}
        self.group_of, self.members = {}, {}
        self._rank = {}
        cache = self._cache

        def kept(key: str, stamp: tuple[Any, ...]) -> bool:
            """Keeps the row's entry (and its cells, if built) while its stamp is the same."""
            hit = cache.get(key)
            if hit is not None and _same(hit.stamp, stamp):
                out[key] = hit
                return True
            return False

        with_engines: set[str] = set()
        for track in state.engines.values():
            name, host = track.config.name, track.config.host or ""
            key = f"engine:{name}"
            need = min(rank.get(name, 2), rank.get(host, 2))
            self._rank[key] = need
            reason = why.get(name) or why.get(host)  # the host's own trouble (swap in use) is the engine's too
            host_track = state.hosts.get(host)
            snap = host_track.snapshot if host_track else None
            stamp: tuple[Any, ...] = (
                track.view,
                snap,
                reason,
                cells.age(state.age_s(track.last_ok_at)),
                len(track.history.times),
                shape,
            )
            if not kept(key, stamp):
                build = partial(overview_rows.engine_row, state, track, c, widths, reason, track.view, snap)
                out[key] = RowEntry(stamp, build, partial(overview_rows.engine_words, track, reason, track.view))
            with_engines.add(host)
            if grouping == "host":
                self._join(f"host:{host}", key)
            elif grouping == "model":
                self._join(f"model:{model_of(track)}", key)
        self.spans = set()
        for host_track in state.hosts.values():
            host = host_track.config.name
            key, reason = f"host:{host}", why.get(host)
            self._rank[key] = rank.get(host, 2)
            snap = host_track.snapshot
            if grouping == "host":  # a line over its engines: the host's GPUs, a bar per card
                tag = self._tag(key, snap.state if snap else None, c)
                stamp = (snap, reason, span_width, tag and (tag.plain, str(tag.style)), shape)
                if not kept(key, stamp):
                    line = partial(cells.host_line, state, host_track, c, span_width, reason, tag, snap)
                    words = partial(overview_rows.host_words, host_track, reason, snap)
                    out[key] = RowEntry(stamp, partial(_spanning, line), words)
                self.spans.add(key)
                self._join(key, key)
            elif host not in with_engines:
                age = cells.age(state.age_s(host_track.last_ok_at))
                if not kept(key, stamp := (snap, reason, age, shape)):
                    build = partial(overview_rows.host_row, state, host_track, c, widths, reason, snap)
                    out[key] = RowEntry(stamp, build, partial(overview_rows.host_words, host_track, reason, snap))
                self._join("", key)
        if grouping == "model":
            for group in [g for g in self.members if g.startswith("model:")]:
                tracks = [state.engines[k[7:]] for k in self.members[group]]
                tag = self._tag(group, None, c)
                stamp = (tuple(t.view for t in tracks), span_width, tag and (tag.plain, str(tag.style)), shape)
                if not kept(group, stamp):
                    line = partial(cells.model_line, group[6:], tracks, c, span_width, tag)
                    out[group] = RowEntry(stamp, partial(_spanning, line), partial(dict, model=group[6:]))
                self._rank[group] = min((self._rank[k] for k in self.members[group]), default=2)
                self.members[group].insert(0, group)
                self.group_of[group] = group
                self.spans.add(group)
        self._cache = out  # targets gone from the pool leave with it
        return out

    def cells_of(self, key: str) -> dict[str, Any]:
        """A row's cells, built now if they were not yet for what the row shows."""
        row = self._cache[key]
        if row.cells is None:
            row.cells = row.build()
            self.built += 1
        return row.cells

    def _columns(self, key: str) -> list[str]:
        return [SPAN] if key in self.spans else self.query_one(PoolGrid).column_keys

    def _provide(self, key: str) -> list[Text]:
        """The grid's call for a stale row it is about to draw (or a test reads): its cells, built now."""
        if key not in self._cache:  # gone from the pool since: drawn blank until the grid's next order
            return [Text() for _ in self._columns(key)]
        now = self.cells_of(key)
        columns = self._columns(key)
        self.rendered[key] = {column: _signature(now[column]) for column in columns}
        return [_text(now[column]) for column in columns]

    def _join(self, group: str, key: str) -> None:
        self.group_of[key] = group
        if key != group:
            self.members.setdefault(group, []).append(key)
        else:
            self.members.setdefault(group, [])

    def _tag(self, group: str, own: Any, c: cells.Colors) -> Text | None:
        """A folded group line's count and worst state (None while it is open): over every row of the group,
        whatever the filter hides, so a problem is never folded out of sight."""
        if group not in self.collapsed:
            return None
        keys = [k for k in self.members.get(group, []) if k.startswith("engine:")]
        words = [cells.state_word(v.state if (v := self.state.engines[k[7:]].view) else None) for k in keys]
        if own is not None:
            words.append(cells.state_word(own))
        needs = [self._rank.get(k, 2) for k in keys] + [self._rank.get(group, 2)]
        problems = sum(1 for n in needs[:-1] if n < 2)
        worst = min(needs)
        return cells.group_tag(words, len(keys), problems, worst if worst < 2 else None, c)

    def attention_first(self) -> bool:
        """Whether the rows that need attention come first: as toggled (`!`), else while anything is wrong."""
        if self.attention is not None:
            return self.attention
        return self.summary is not None and not self.summary.healthy

    def grouped(self) -> str | None:
        """How rows are grouped, each group under its line: "host", "model" or None (one flat list). `G`
        cycles it; it is apart from the sort, which orders the rows inside each group."""
        return self.grouping

    def _sorted(self, rows: dict[str, RowEntry]) -> list[str]:
        """Every row in the sort's order, groups aside: a text column A to Z (empty last either way), a
        number highest first (unknown last either way, never read as 0, never parsed from text)."""
        column = self.sort_key
        if column == self.grouped():  # by the grouping's own column: by name in each group (no words read)
            return sorted(rows, reverse=self.reverse)
        if column in TEXT_SORTS:
            words = {k: rows[k].words() for k in rows}
            texts = {k: words[k].get(column, "") for k in rows}
            order = sorted(rows, key=lambda k: (texts[k], words[k].get("engine", ""), k), reverse=self.reverse)
            order.sort(key=lambda k: texts[k] == "")
            return order
        values = {k: _view_number(self.state, k, column) for k in rows}
        sign = 1.0 if self.reverse else -1.0
        return sorted(rows, key=lambda k: (values[k] is None, sign * (values[k] or 0.0), k))

    def _order(self, rows: dict[str, RowEntry]) -> list[str]:
        """The rows in order. Grouped, each group's line comes first and its rows follow in the sort's order;
        the groups go by name while the sort is by text, and by their first row while it is by a number (by
        KV: the group holding the fullest cache first, so the top engine row is the pool's top). With the
        rows that need attention first, the groups go by their worst row and each group's rows by need,
        each kept in the sort's order otherwise."""
        first = self.attention_first() and self.summary is not None and bool(self.summary.rank())

        def need(key: str) -> int:  # critical, warning, then the rest
            return self._rank.get(key, 2) if first else 2

        order = self._sorted(rows)
        if not self.grouped():
            if first:
                order.sort(key=need)
            return order
        groups: dict[str, list[str]] = {}
        for key in order:  # the groups in the order of their first row (hosts without engines: their line)
            group = self.group_of.get(key, "")
            members = groups.setdefault(group, [])
            if key != group:
                members.append(key)
        names = [g for g in groups if g]
        if self.sort_key in TEXT_SORTS:
            by_own_column = self.sort_key == self.grouped()
            names.sort(reverse=self.reverse and by_own_column)
        names += [""] if "" in groups else []
        if first:  # the groups by their worst row (over every row of the group, shown or not)
            worst = {g: min([need(k) for k in self.members.get(g, [])] + [need(k) for k in groups[g]]) for g in groups}
            names.sort(key=lambda g: worst[g])
            for members in groups.values():
                members.sort(key=need)
        return [key for group in names for key in ([group] if group in rows else []) + groups[group]]

    def shown(self, rows: dict[str, RowEntry]) -> list[str]:
        """The rows on screen, in order: those matching the filter, only the problems (`p`: a group's line
        stays over its problems), the rows of folded groups left out (not while filtering: a search shows
        what it finds)."""
        keys: Iterable[str] = rows
        engines = sum(1 for k in rows if k.startswith("engine:"))
        self.by_filter = self.by_problems = 0
        if self.filter_text:  # the matching rows, under their groups' lines (the lines themselves rarely match)
            needle = self.filter_text.lower()
            matched = {k for k in rows if needle in rows[k].search()}
            hit = {self.group_of.get(k) for k in matched}
            keys = [k for k in rows if k in matched or (k in self.spans and k in hit)]
            self.by_filter = engines - sum(1 for k in keys if k.startswith("engine:"))
        if self.problems_only:
            keys = list(keys)  # the groups with a problem among what the filter left (a line alone read as empty)
            bad_groups = {self.group_of.get(k) for k in keys if self._rank.get(k, 2) < 2}
            left = sum(1 for k in keys if k.startswith("engine:"))
            keys = [k for k in keys if self._rank.get(k, 2) < 2 or (k in self.spans and k in bad_groups)]
            self.by_problems = left - sum(1 for k in keys if k.startswith("engine:"))
        order = self._order({k: rows[k] for k in keys})
        if self.collapsed and not self.filter_text:
            order = [k for k in order if self.group_of.get(k) not in self.collapsed or k == self.group_of.get(k)]
        return order

    def refresh_view(self) -> None:
        self.refresh_rows()

    def refresh_rows(self) -> None:
        """Apply the latest model to the table: the rows in view are built where their data changed and only
        their cells that differ are updated; the changed rows out of view are marked stale, built when they
        are drawn; rows are added and dropped as needed (keyed diffs). The others stay as drawn."""
        table = self.query_one(PoolGrid)
        table.mark_sorted(self.sort_key, (self.sort_key in TEXT_SORTS) != self.reverse)  # text A-Z, numbers high first
        self.summary = summarise(self.state, self._alerts())
        before = self._cache
        rows = self.rows()
        order = self.shown(rows)
        self.engines_shown = sum(1 for k in order if k.startswith("engine:"))  # the count is of engines: not
        self.hidden = sum(1 for k in rows if k.startswith("engine:")) - self.engines_shown  # group lines, hosts
        keys = table.column_keys
        top = int(table.scroll_y)
        in_view = set(order[top : top + max(1, table.size.height - 1)])
        with self.app.batch_update():
            self._draw_summary()
            self._draw_events()
            spans = self.spans

            def columns(key: str) -> list[str]:
                return [SPAN] if key in spans else keys

            new: dict[str, list[Text]] = {}
            stale: set[str] = set()
            changes = []
            rendered: dict[str, dict[str, str]] = {}
            for key in order:
                old = self.rendered.get(key)
                fresh = old is None or table.rows.get(key) is None or table.is_span(key) != (key in spans)
                changed = before.get(key) is not rows[key]  # its entry made again this refresh
                if key not in in_view:
                    if fresh or changed or old is None:
                        stale.add(key)  # built when drawn; what it shows is unknown until then
                    else:
                        rendered[key] = old
                    continue
                cells_now = self.cells_of(key)
                if fresh or old is None:
                    new[key] = [_text(cells_now[c]) for c in columns(key)]
                    old = {c: _signature(cells_now[c]) for c in columns(key)}
                elif changed:  # its cells compared
                    for column in columns(key):
                        value = cells_now[column]
                        signature = _signature(value)
                        if old.get(column) != signature:
                            changes.append((key, column, _text(value)))
                            old[column] = signature
                rendered[key] = old
            self.rendered = rendered
            if new or stale or order != table.order:
                table.reorder(order, new, spans, stale)
            table.update_cells(changes)
        self._status_line()

    def selected(self) -> str | None:
        return self.query_one(PoolGrid).cursor_key

    def _summary_width(self) -> int:
        box = self.query_one("#summary", Static)
        return max(20, box.content_size.width or self.app.size.width - 2)

    def _room(self) -> tuple[bool, bool]:
        """(whether the events pane fits, whether the whole summary does) on this terminal: each only while
        the table keeps ROWS_KEPT lines of rows with it; the events pane gives way first. The pane as `e`
        left it, when it was pressed."""
        height = self.app.size.height
        width = self._summary_width()
        chrome = CHROME
        hint = self.query("#hint")
        if hint:
            words = self.hint or ""
            chrome += len(Text(words).wrap(self.app.console, width))
        box = self.query_one("#filter", Input)
        if box.display:
            chrome += 3  # its tall border
        summary = summary_lines(self.summary, width) if self.summary is not None else 1
        pane = events_lines(height) if self.events is not None else 0
        left = height - chrome - summary
        events = left - pane >= ROWS_KEPT if self.show_events is None else self.show_events
        whole = left - (pane if events else 0) >= ROWS_KEPT
        return events, whole

    def _draw_summary(self) -> None:
        box = self.query_one("#summary", Static)
        if self.summary is None:
            return
        width = self._summary_width()
        self.folded = not self._room()[1]
        drawn = (self.summary.verdict + "\n".join(self.summary.lines), width, self.folded)
        if drawn == self._summary_drawn:
            return
        self._summary_drawn = drawn
        c = cells.Colors.from_theme(self.app.theme_variables)
        text = summary_text(self.summary, width, c, self.folded)
        box.update(text, layout=self._height_changed(box, text))

    def _draw_events(self) -> None:
        """The newest events under the table, as many as the pane's lines hold; redrawn only when the
        log, the width or the theme changed."""
        pane = self.query_one("#events", Static)
        log = self.events
        visible = log is not None and self._room()[0]
        if pane.display != visible:
            pane.display = visible
        if log is None or not visible:
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
        pane.update(text, layout=self._height_changed(pane, text))

    def _height_changed(self, box: Static, text: Text) -> bool:
        """Whether a box of `height: auto` takes another number of lines with `text`: only then is the
        screen laid out again (a Static's update lays out the whole screen by default, each second)."""
        lines = text.plain.count("\n") + 1
        changed = self._box_lines.get(box.id or "") != lines
        self._box_lines[box.id or ""] = lines
        return changed

    def toggle_events(self) -> None:
        """Show or hide the events pane (the table takes its lines); shown on a short terminal too when asked
        for (the summary folds for it)."""
        self.show_events = not self._room()[0]
        self._events_drawn = None
        self._draw_summary()
        self._draw_events()

    def on_resize(self) -> None:
        self._summary_drawn = None  # packed again to the new width
        self._events_drawn = None
        if getattr(self, "ready", False):
            self.call_after_refresh(self._draw_summary)
            self.call_after_refresh(self._draw_events)  # hidden or shown again for the new height
            self.call_after_refresh(self._status_line)  # cut again to the new width

    def on_pool_grid_columns_changed(self, event: PoolGrid.ColumnsChanged) -> None:
        """A new width folded or widened columns: every row's cells again, in the new columns."""
        self.rendered = {}
        if getattr(self, "ready", False):
            self.refresh_rows()

    def _status_line(self) -> None:
        alerts = len(self._alerts().active)
        mode = "  READ-ONLY" if self.read_only else ""
        filt = f"  filter: {self.filter_text!r}" if self.filter_text else ""
        filt += f" ({self.by_filter} hidden)" if self.by_filter else ""
        first = ", problems first" if self.attention_first() else ""
        sort = LABELS.get(self.sort_key, self.sort_key) + (", reversed" if self.reverse else "")
        grouping = self.grouped()
        sort += f", grouped by {grouping}" if grouping else ""
        hidden = f"  problems only: {self.by_problems} hidden" if self.problems_only else ""
        folded = self.hidden - self.by_filter - self.by_problems
        if self.problems_only and not self.engines_shown:
            problems = sum(1 for k, need in self._rank.items() if need < 2 and k.startswith("engine:"))
            hidden = f"  problems only: nothing needs attention ({self.by_problems} hidden, p shows them)"
            if problems and self.filter_text:  # the filter hides them: "nothing needs attention" would be false
                hidden = f"  problems only: none of the {problems} match the filter"
            elif problems:  # folded away, not absent
                hidden = f"  problems only: {problems} in folded groups (c / C opens them)"
                folded = 0
        hidden += f"  {folded} hidden in folded groups (c / C opens them)" if folded > 0 else ""
        total = self.engines_shown + self.hidden
        shown_of = f"{self.engines_shown} of " if self.hidden else ""  # "0 engines" read as an empty pool
        rows = f"{shown_of}{total} engine" + ("" if total == 1 else "s")
        # what matters most first: the line ends in "…" where the width runs out (READ-ONLY and the alerts
        # were last, and cut away at 120 columns with the problems-only words)
        line = f"{rows}{mode}  active alerts: {alerts}{filt}{hidden}  sorted by {sort}{first}"
        width = self.query_one("#status-line", Static).content_size.width
        if 0 < width < len(line):
            line = line[: width - 1] + "…"
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
        self._draw_summary()  # its lines: the events pane and the summary's totals may give way
        self._draw_events()

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
        """A click selects its row (the grid moved the cursor there); on a group line it folds or unfolds it."""
        if event.key in self.spans:
            self.toggle_group(event.key)

    def on_pool_grid_row_activated(self, event: PoolGrid.RowActivated) -> None:
        """A double click opens the row, as Enter does; on a host's line its detail (the first click of the
        two folded the group: the second unfolds it again)."""
        if event.key in self.spans:
            self.toggle_group(event.key)
        if self.opener is not None:
            self.opener(event.key)

    # -- its actions (model.actions, target "overview": the app routes their keys and palette entries here) --
    def action_open_detail(self) -> None:
        """Enter: the selected row's detail; on a group line with rows under it, fold or unfold them."""
        key = self.selected()
        if key is not None and not self.toggle_group(key) and self.opener is not None:
            self.opener(key)

    def action_filter(self) -> None:
        self.open_filter()

    def action_sort(self) -> None:
        self.next_sort()

    def action_group(self) -> None:
        self.next_grouping()

    def action_collapse(self) -> None:
        self.toggle_group(self.selected(), from_member=True)

    def action_collapse_all(self) -> None:
        self.toggle_all()

    def action_problems(self) -> None:
        self.toggle_problems()

    def action_attention(self) -> None:
        self.toggle_attention()

    def action_toggle_events(self) -> None:
        self.toggle_events()

    def toggle_group(self, key: str | None, from_member: bool = False) -> bool:
        """Fold or unfold the group whose line is `key` (with `from_member`, the group of the row `key`);
        False when there is no such group with rows under it. The cursor goes to the group's line."""
        group = self.group_of.get(key or "") if from_member else key
        if not group or group not in self.spans or not [m for m in self.members.get(group, []) if m != group]:
            return False
        self.collapsed ^= {group}
        self.refresh_rows()
        table = self.query_one(PoolGrid)
        if group in table.position:
            table.move_cursor(table.position[group])
        return True

    def toggle_all(self) -> None:
        """`C`: fold every group, or, with all of them folded, unfold them all (the cursor stays in its group)."""
        table = self.query_one(PoolGrid)
        current = self.selected()
        foldable = {g for g in self.spans if [m for m in self.members.get(g, []) if m != g]}
        self.collapsed = set() if foldable <= self.collapsed else foldable
        self.refresh_rows()
        group = self.group_of.get(current or "")
        if current not in table.position and group in table.position:
            table.move_cursor(table.position[group])

    def next_grouping(self) -> None:
        """`G`: grouped by host, by model, then one flat list, and round again; the sort stays as chosen."""
        current = self.grouping or "engine"
        chosen = GROUPINGS[(GROUPINGS.index(current) + 1) % len(GROUPINGS)]
        self.grouping = None if chosen == "engine" else chosen
        self.refresh_rows()

    def toggle_problems(self) -> None:
        """`p`: only the rows that need attention, or every row again."""
        self.problems_only = not self.problems_only
        self.refresh_rows()
