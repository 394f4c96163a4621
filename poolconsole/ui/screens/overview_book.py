"""The overview's rows as the model has them, before any order: one entry per engine, host and group line,
made again only when what it shows changed, its cells built only when it is drawn; and the groups the rows
fall in (which line each row is under, the rows under each line, how much each needs attention)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from rich.text import Text

from poolconsole.config.models import EngineKind
from poolconsole.model.pool_state import EngineTrack, PoolState
from poolconsole.ui import cells, overview_rows
from poolconsole.ui.grid import SPAN, PoolGrid

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


@dataclass
class RowEntry:
    """A row as the model has it now: what its cells are made from (`stamp`), how to build them, and its text
    columns in plain words. The cells are built only when the row is drawn (in view, or scrolled into view)
    or read, once per stamp: at 1,000 engines building every changed row each refresh was most of its cost.
    The words are what the text sorts and the filter read, so neither needs a row built."""

    stamp: tuple[Any, ...]
    """What the row shows, compared with `==` (tuples compare in C): the model's views and snapshots in it by
    their `id()`, since each poll makes a new one and comparing two field by field, sixteen GPUs each, cost
    more than building the row (and a nested comparison in Python was half of the book's time at 1,000
    engines)."""
    build: Callable[[], dict[str, Any]]
    words: Callable[[], dict[str, str]]
    held: tuple[object, ...] = ()
    """The objects the stamp names by `id()`, held while the entry lives so that no new one can take an id."""
    cells: dict[str, Any] | None = None
    _search: str | None = None

    def search(self) -> str:
        """The row's words in lower case, as the filter matches them."""
        if self._search is None:
            self._search = "\0".join(self.words().values()).lower()
        return self._search


@dataclass(frozen=True)
class Inputs:
    """What every row's entry is made from besides its own target: a change to any of these makes the
    book stamp every row again (`build`)."""

    c: cells.Colors
    widths: dict[str, int]
    span_width: int
    grouping: str | None
    collapsed: frozenset[str]
    shape: tuple[Any, ...]


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
    stamped: int = 0
    """How many rows the last `build` and `restamp` stamped (issue 39's test: a tick in which one of 1,000
    engines changed stamps the rows in view, not the pool)."""
    dirty: set[str] = field(default_factory=set)
    """The rows whose entry may no longer be what the model has (their target, their host, their "why" or
    need changed since it was made): made again when they are drawn or their words read (`current`)."""
    remade: set[str] = field(default_factory=set)
    """The rows whose entry was made again since the last `diff`."""
    inputs: Inputs | None = None
    revision: int = -1
    """The pool state's revision the book last took in (its change log says what changed since)."""
    why: dict[str, str] = field(default_factory=dict)
    needs: dict[str, int] = field(default_factory=dict)
    """The summary's `why` and `rank` the book last took in (a target whose entry in them changed is stamped)."""
    engines_on: dict[str, list[str]] = field(default_factory=dict)
    """Host -> the engines configured on it (a host's change is its engines' rows' too)."""

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
        are built when it is drawn (cells_of). Also sets the rows' groups (`members`, `group_of`).

        Only the targets the pool state's change log names since the last build, and those whose "why" or
        need changed, are looked at: their rows are marked `dirty` and their entries made again when they are
        drawn, or read (`current`), or stamped as rows in view (`restamp`). Grouped by model, whose groups
        move with the engines' models, and after a change of the widths, theme, grouping or folds, every row
        is stamped again. A row's age moves with the clock alone: a row scrolled into view shows its age
        as of the next refresh."""
        shape = (tuple(widths.items()), c)
        if shape == self.shape:  # the same object while the widths and the theme stay: stamps compare fast
            shape = self.shape
        self.shape = shape
        state = self.state
        inputs = Inputs(c, widths, span_width, grouping, frozenset(collapsed), shape)
        whole = grouping == "model" or self.inputs is None or inputs != self.inputs
        changed = [] if whole else state.changed_since(self.revision)
        moved = {k for k in why.keys() | self.why.keys() if why.get(k) != self.why.get(k)}
        moved |= {k for k in rank.keys() | self.needs.keys() if rank.get(k, 2) != self.needs.get(k, 2)}
        self.inputs, self.revision, self.why, self.needs = inputs, state.revision, why, rank
        self.stamped = 0
        if whole:
            return self._whole()
        engines: set[str] = set()
        hosts: set[str] = set()
        for kind, name in changed:
            (engines if kind == "engine" else hosts).add(name)
        for name in moved:
            if name in state.engines:
                engines.add(name)
            if name in state.hosts:
                hosts.add(name)
        for host in list(hosts):
            engines.update(self.engines_on.get(host, ()))
        for name in engines:
            host = state.engines[name].config.host or ""
            self.rank[f"engine:{name}"] = min(rank.get(name, 2), rank.get(host, 2))
            self.dirty.add(f"engine:{name}")
            hosts.add(host)  # a folded line counts its engines' states
        for name in hosts:
            if (key := f"host:{name}") in self.cache:
                self.rank[key] = rank.get(name, 2)
                self.dirty.add(key)
        return self.cache

    def _whole(self) -> dict[str, RowEntry]:
        """Every row stamped again, and the groups made again."""
        state, inputs = self.state, self.inputs
        assert inputs is not None
        old, self.cache = self.cache, {}  # targets gone from the pool leave with the old entries
        self.group_of, self.members, self.rank, self.spans = {}, {}, {}, set()
        self.dirty = set()
        self.engines_on = {}
        for track in state.engines.values():
            name, host = track.config.name, track.config.host or ""
            self.engines_on.setdefault(host, []).append(name)
            self._engine(name, old)
            if inputs.grouping == "host":
                self.join(f"host:{host}", f"engine:{name}")
            elif inputs.grouping == "model":
                self.join(f"model:{model_of(track)}", f"engine:{name}")
        for host_track in state.hosts.values():
            name = host_track.config.name
            if inputs.grouping == "host":
                self.spans.add(f"host:{name}")
                self.join(f"host:{name}", f"host:{name}")
            elif name not in self.engines_on:
                self.join("", f"host:{name}")
            self._host(name, old)
        if inputs.grouping == "model":
            for group in [g for g in self.members if g.startswith("model:")]:
                self._model_line(group, old)
                self.rank[group] = min((self.rank[k] for k in self.members[group]), default=2)
                self.members[group].insert(0, group)
                self.group_of[group] = group
                self.spans.add(group)
        return self.cache

    def restamp(self, keys: Iterable[str]) -> None:
        """The rows of `keys` (those in view) stamped again: what moves with the clock alone (a row's age, its
        trend's points read back) shows."""
        old = self.cache
        for key in keys:
            if key.startswith("engine:"):
                self._engine(key[7:], old)
            elif key.startswith("host:") and key[5:] in self.state.hosts:
                self._host(key[5:], old)
            self.dirty.discard(key)

    def current(self) -> None:
        """Every row's entry what the model has (the words a text sort or the filter reads)."""
        if self.dirty:
            self.restamp(list(self.dirty))

    def _kept(self, key: str, stamp: tuple[Any, ...], old: dict[str, RowEntry]) -> bool:
        """Keeps the row's entry (and its cells, if built) while its stamp is the same."""
        self.stamped += 1
        hit = old.get(key)
        if hit is not None and hit.stamp == stamp:
            self.cache[key] = hit
            return True
        self.remade.add(key)
        return False

    def _engine(self, name: str, old: dict[str, RowEntry]) -> None:
        state, inputs, why, rank = self.state, self.inputs, self.why, self.needs
        assert inputs is not None
        track = state.engines[name]
        host, key = track.config.host or "", f"engine:{name}"
        self.rank[key] = min(rank.get(name, 2), rank.get(host, 2))
        reason = why.get(name) or why.get(host)  # the host's own trouble (swap in use) is the engine's too
        host_track = state.hosts.get(host)
        snap = host_track.snapshot if host_track else None
        view = track.view
        age = cells.age(state.age_s(track.last_ok_at))
        stamp = (id(view), id(snap), reason, age, len(track.history.times), inputs.shape)
        if not self._kept(key, stamp, old):
            c, widths = inputs.c, inputs.widths
            build = partial(overview_rows.engine_row, state, track, c, widths, reason, view, snap)
            words = partial(overview_rows.engine_words, track, reason, view)
            self.cache[key] = RowEntry(stamp, build, words, (view, snap))

    def _host(self, name: str, old: dict[str, RowEntry]) -> None:
        state, inputs = self.state, self.inputs
        assert inputs is not None
        host_track = state.hosts[name]
        key, reason, c = f"host:{name}", self.why.get(name), inputs.c
        self.rank[key] = self.needs.get(name, 2)
        snap = host_track.snapshot
        if inputs.grouping == "host":  # a line over its engines: the host's GPUs, a bar per card
            tag = self.tag(key, snap.state if snap else None, c, inputs.collapsed)
            stamp: tuple[Any, ...] = (
                id(snap),
                reason,
                inputs.span_width,
                tag and (tag.plain, str(tag.style)),
                inputs.shape,
            )
            if not self._kept(key, stamp, old):
                line = partial(cells.host_line, state, host_track, c, inputs.span_width, reason, tag, snap)
                words = partial(overview_rows.host_words, host_track, reason, snap)
                self.cache[key] = RowEntry(stamp, partial(_spanning, line), words, (snap,))
        elif name not in self.engines_on:
            age = cells.age(state.age_s(host_track.last_ok_at))
            if not self._kept(key, stamp := (id(snap), reason, age, inputs.shape), old):
                build = partial(overview_rows.host_row, state, host_track, c, inputs.widths, reason, snap)
                words = partial(overview_rows.host_words, host_track, reason, snap)
                self.cache[key] = RowEntry(stamp, build, words, (snap,))

    def _model_line(self, group: str, old: dict[str, RowEntry]) -> None:
        inputs = self.inputs
        assert inputs is not None
        tracks = [self.state.engines[k[7:]] for k in self.members[group]]
        tag = self.tag(group, None, inputs.c, inputs.collapsed)
        views = tuple(t.view for t in tracks)
        stamp = (tuple(map(id, views)), inputs.span_width, tag and (tag.plain, str(tag.style)), inputs.shape)
        if not self._kept(group, stamp, old):
            line = partial(cells.model_line, group[6:], tracks, inputs.c, inputs.span_width, tag)
            self.cache[group] = RowEntry(stamp, partial(_spanning, line), partial(dict, model=group[6:]), views)

    def cells_of(self, key: str) -> dict[str, Any]:
        """A row's cells, built now if they were not yet for what the row shows."""
        if key in self.dirty:
            self.restamp((key,))
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
        self.remade.discard(key)  # drawn as its entry is now
        return [as_text(now[column]) for column in columns]

    def join(self, group: str, key: str) -> None:
        self.group_of[key] = group
        if key != group:
            self.members.setdefault(group, []).append(key)
        else:
            self.members.setdefault(group, [])

    def tag(self, group: str, own: Any, c: cells.Colors, collapsed: AbstractSet[str]) -> Text | None:
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
    order: list[str],
    in_view: set[str],
    drawn: dict[str, dict[str, str]],
    grid: PoolGrid,
) -> Diff:
    """The keyed diff of `order` against what `grid` shows (`drawn`, the signatures of its cells): the rows
    in view are built where their entry was made again since the last diff and only their cells that differ
    change; a changed row out of view (made again, or dirty) is marked stale, built when it is drawn."""
    spans, keys = book.spans, grid.column_keys
    remade, dirty = book.remade, book.dirty

    def columns(key: str) -> list[str]:
        return [SPAN] if key in spans else keys

    out = Diff({}, set(), [], {})
    for key in order:
        old = drawn.get(key)
        fresh = old is None or grid.rows.get(key) is None or grid.is_span(key) != (key in spans)
        changed = key in remade
        if key not in in_view:
            if fresh or changed or key in dirty or old is None:
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
    book.remade = set()
    return out
