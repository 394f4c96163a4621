"""The overview's rows as the model has them, before any order: one entry per engine, host and group line,
made again only when what it shows changed, its cells built only when it is drawn; and the groups the rows
fall in (which line each row is under, the rows under each line, how much each needs attention)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from rich.text import Text

from poolconsole.config.models import EngineKind
from poolconsole.model.hosts import HostSnapshot
from poolconsole.model.pool_state import EngineTrack, PoolState
from poolconsole.model.view import EngineView
from poolconsole.ui import cells, overview_rows
from poolconsole.ui.grid import SPAN, PoolGrid

BY_IDENTITY = (EngineView, HostSnapshot)

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


def signature(value: Text | str) -> str:
    """What a cell shows, to compare with the last frame (a Text is made only for cells that changed)."""
    return value if isinstance(value, str) else value.plain + str(value.style) + str(value.spans)


def as_text(value: Text | str) -> Text:
    return value if isinstance(value, Text) else Text(value)  # a str cell would be parsed as markup on every render


def _spanning(build: Callable[[], Text]) -> dict[str, Text | str]:
    """A line across the columns as a row's cells: its one cell."""
    return {SPAN: build()}


def same(a: Any, b: Any) -> bool:
    """Whether two row stamps are the same: the model's views and snapshots by identity (each poll makes a
    new one; comparing two field by field, sixteen GPUs each, cost more than building the row), tuples item
    by item, the rest by value."""
    if a is b:
        return True
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
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


@dataclass
class RowBook:
    """Every row's entry (its cells once built) and the groups, as of the last `build`."""

    state: PoolState
    cache: dict[str, RowEntry] = field(default_factory=dict)
    """Row key -> the row as the model has it (its cells once built)."""
    shape: tuple[Any, ...] = ()
    group_of: dict[str, str] = field(default_factory=dict)
    """Row key -> its group's line key ("host:NAME", "model:NAME"; "" for rows outside every group)."""
    members: dict[str, list[str]] = field(default_factory=dict)
    """A group's line key -> the keys of its rows."""
    rank: dict[str, int] = field(default_factory=dict)
    """Row key -> how much it needs attention: 0 critical, 1 warning, 2 nothing."""
    spans: set[str] = field(default_factory=set)
    """The rows drawn as one line across the columns: the group lines (hosts' or models')."""
    built: int = 0
    """How many rows' cells were built (tests count them: an unchanged target builds none, a row out of
    view none until it is drawn)."""

    def build(
        self,
        why: dict[str, str],
        rank: dict[str, int],
        c: cells.Colors,
        widths: dict[str, int],
        span_width: int,
        grouping: str | None,
        collapsed: set[str],
    ) -> dict[str, RowEntry]:
        """Every row (before the filter, the problems-only view and folding), keyed by row, its cells not
        built: a row's entry is made again only when what it shows changed (its target's latest view or
        snapshot, its host's snapshot, its "why", its age, the column widths or the theme), and its cells
        are built when it is drawn (cells_of). Also sets the rows' groups (`members`, `group_of`)."""
        shape = (tuple(widths.items()), c)
        if shape == self.shape:  # the same object while the widths and the theme stay: stamps compare fast
            shape = self.shape
        self.shape = shape
        state = self.state
        out: dict[str, RowEntry] = {}
        self.group_of, self.members = {}, {}
        self.rank = {}
        cache = self.cache

        def kept(key: str, stamp: tuple[Any, ...]) -> bool:
            """Keeps the row's entry (and its cells, if built) while its stamp is the same."""
            hit = cache.get(key)
            if hit is not None and same(hit.stamp, stamp):
                out[key] = hit
                return True
            return False

        with_engines: set[str] = set()
        for track in state.engines.values():
            name, host = track.config.name, track.config.host or ""
            key = f"engine:{name}"
            need = min(rank.get(name, 2), rank.get(host, 2))
            self.rank[key] = need
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
                self.join(f"host:{host}", key)
            elif grouping == "model":
                self.join(f"model:{model_of(track)}", key)
        self.spans = set()
        for host_track in state.hosts.values():
            host = host_track.config.name
            key, reason = f"host:{host}", why.get(host)
            self.rank[key] = rank.get(host, 2)
            snap = host_track.snapshot
            if grouping == "host":  # a line over its engines: the host's GPUs, a bar per card
                tag = self.tag(key, snap.state if snap else None, c, collapsed)
                stamp = (snap, reason, span_width, tag and (tag.plain, str(tag.style)), shape)
                if not kept(key, stamp):
                    line = partial(cells.host_line, state, host_track, c, span_width, reason, tag, snap)
                    words = partial(overview_rows.host_words, host_track, reason, snap)
                    out[key] = RowEntry(stamp, partial(_spanning, line), words)
                self.spans.add(key)
                self.join(key, key)
            elif host not in with_engines:
                age = cells.age(state.age_s(host_track.last_ok_at))
                if not kept(key, stamp := (snap, reason, age, shape)):
                    build = partial(overview_rows.host_row, state, host_track, c, widths, reason, snap)
                    out[key] = RowEntry(stamp, build, partial(overview_rows.host_words, host_track, reason, snap))
                self.join("", key)
        if grouping == "model":
            for group in [g for g in self.members if g.startswith("model:")]:
                tracks = [state.engines[k[7:]] for k in self.members[group]]
                tag = self.tag(group, None, c, collapsed)
                stamp = (tuple(t.view for t in tracks), span_width, tag and (tag.plain, str(tag.style)), shape)
                if not kept(group, stamp):
                    line = partial(cells.model_line, group[6:], tracks, c, span_width, tag)
                    out[group] = RowEntry(stamp, partial(_spanning, line), partial(dict, model=group[6:]))
                self.rank[group] = min((self.rank[k] for k in self.members[group]), default=2)
                self.members[group].insert(0, group)
                self.group_of[group] = group
                self.spans.add(group)
        self.cache = out  # targets gone from the pool leave with it
        return out

    def cells_of(self, key: str) -> dict[str, Any]:
        """A row's cells, built now if they were not yet for what the row shows."""
        row = self.cache[key]
        if row.cells is None:
            row.cells = row.build()
            self.built += 1
        return row.cells

    def provide(self, key: str, keys: list[str], rendered: dict[str, dict[str, str]]) -> list[Text]:
        """A row's cells in the grid's columns (`keys`; a group line's one), built now, noted in `rendered` by
        their signatures; blank for a row gone from the pool since (until the grid's next order)."""
        columns = [SPAN] if key in self.spans else keys
        if key not in self.cache:
            return [Text() for _ in columns]
        now = self.cells_of(key)
        rendered[key] = {column: signature(now[column]) for column in columns}
        return [as_text(now[column]) for column in columns]

    def join(self, group: str, key: str) -> None:
        self.group_of[key] = group
        if key != group:
            self.members.setdefault(group, []).append(key)
        else:
            self.members.setdefault(group, [])

    def tag(self, group: str, own: Any, c: cells.Colors, collapsed: set[str]) -> Text | None:
        """A folded group line's count and worst state (None while it is open): over every row of the group,
        whatever the filter hides, so a problem is never folded out of sight."""
        if group not in collapsed:
            return None
        keys = [k for k in self.members.get(group, []) if k.startswith("engine:")]
        words = [cells.state_word(v.state if (v := self.state.engines[k[7:]].view) else None) for k in keys]
        if own is not None:
            words.append(cells.state_word(own))
        needs = [self.rank.get(k, 2) for k in keys] + [self.rank.get(group, 2)]
        problems = sum(1 for n in needs[:-1] if n < 2)
        worst = min(needs)
        return cells.group_tag(words, len(keys), problems, worst if worst < 2 else None, c)


@dataclass
class Diff:
    """What one refresh changes in the grid: rows to add or redraw whole (`new`), rows out of view whose
    cells are unknown until drawn (`stale`), single cells (`changes`), and every shown row's cells as now
    drawn (`rendered`, by their signatures)."""

    new: dict[str, list[Text]]
    stale: set[str]
    changes: list[tuple[str, str, Text]]
    rendered: dict[str, dict[str, str]]


def diff(
    book: RowBook,
    rows: dict[str, RowEntry],
    before: dict[str, RowEntry],
    order: list[str],
    in_view: set[str],
    drawn: dict[str, dict[str, str]],
    grid: PoolGrid,
) -> Diff:
    """The keyed diff of `order` against what `grid` shows (`drawn`, the signatures of its cells): the rows
    in view are built where their entry was made again (unlike `before`) and only their cells that differ
    change; a changed row out of view is marked stale, built when it is drawn."""
    spans, keys = book.spans, grid.column_keys

    def columns(key: str) -> list[str]:
        return [SPAN] if key in spans else keys

    out = Diff({}, set(), [], {})
    for key in order:
        old = drawn.get(key)
        fresh = old is None or grid.rows.get(key) is None or grid.is_span(key) != (key in spans)
        changed = before.get(key) is not rows[key]  # its entry made again this refresh
        if key not in in_view:
            if fresh or changed or old is None:
                out.stale.add(key)  # built when drawn; what it shows is unknown until then
            else:
                out.rendered[key] = old
            continue
        cells_now = book.cells_of(key)
        if fresh or old is None:
            out.new[key] = [as_text(cells_now[c]) for c in columns(key)]
            old = {c: signature(cells_now[c]) for c in columns(key)}
        elif changed:  # its cells compared
            for column in columns(key):
                value = cells_now[column]
                said = signature(value)
                if old.get(column) != said:
                    out.changes.append((key, column, as_text(value)))
                    old[column] = said
        out.rendered[key] = old
    return out
