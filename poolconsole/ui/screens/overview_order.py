"""The overview's rows in order, as plain functions of the rows, their groups and the operator's choices: the
sort (`s`, a click on a header), the grouping (`G`), the rows that need attention first (`!`), the filter
(`/`), only the problems (`p`) and the folded groups (`c`, `C`)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from poolconsole.model.pool_state import PoolState, host_vram_fraction
from poolconsole.ui import overview_rows
from poolconsole.ui.screens.overview_book import RowBook, RowEntry

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

GROUPINGS = ("host", "model", "engine")
"""`G` cycles: grouped by host, grouped by model, one flat list ("engine": a row per engine)."""


@dataclass(frozen=True)
class Choices:
    """What the operator chose to see, as the order reads it."""

    sort_key: str
    reverse: bool
    grouping: str | None
    """"host", "model" or None (one flat list)."""
    first: bool
    """The rows that need attention first (critical, warning, then the rest)."""
    filter_text: str = ""
    problems_only: bool = False
    collapsed: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Shown:
    """The rows on screen in order, and how many engines the filter and `p` left out."""

    order: list[str]
    by_filter: int
    by_problems: int
    engines: int
    """The engines among the rows, before the filter, `p` and folding."""
    engines_shown: int
    """The engines among the rows on screen."""

    def copy(self) -> Shown:
        """The same, with an order of its own (the caller's to keep: the memo keeps its own)."""
        return replace(self, order=list(self.order))


def view_number(state: PoolState, key: str, column: str) -> float | None:
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


def reads_words(choices: Choices) -> bool:
    """Whether the order reads the rows' words: the filter does, and a sort by a text column other than the
    grouping's (by the grouping's own column the rows go by key)."""
    return bool(choices.filter_text) or (choices.sort_key in TEXT_SORTS and choices.sort_key != choices.grouping)


def sorted_keys(rows: dict[str, RowEntry], state: PoolState, choices: Choices) -> list[str]:
    """Every row in the sort's order, groups aside: a text column A to Z (empty last either way), a
    number highest first (unknown last either way, never read as 0, never parsed from text)."""
    column, reverse = choices.sort_key, choices.reverse
    if column == choices.grouping:  # by the grouping's own column: by name in each group (no words read)
        return sorted(rows, reverse=reverse)
    if column in TEXT_SORTS:
        words = {k: rows[k].words() for k in rows}
        texts = {k: words[k].get(column, "") for k in rows}
        order = sorted(rows, key=lambda k: (texts[k], words[k].get("engine", ""), k), reverse=reverse)
        order.sort(key=lambda k: texts[k] == "")
        return order
    values = {k: view_number(state, k, column) for k in rows}
    sign = 1.0 if reverse else -1.0
    return sorted(rows, key=lambda k: (values[k] is None, sign * (values[k] or 0.0), k))


def ordered(rows: dict[str, RowEntry], book: RowBook, choices: Choices) -> list[str]:
    """The rows in order. Grouped, each group's line comes first and its rows follow in the sort's order;
    the groups go by name while the sort is by text, and by their first row while it is by a number (by
    KV: the group holding the fullest cache first, so the top engine row is the pool's top). With the
    rows that need attention first, the groups go by their worst row and each group's rows by need,
    each kept in the sort's order otherwise."""
    first = choices.first

    def need(key: str) -> int:  # critical, warning, then the rest
        return book.rank.get(key, 2) if first else 2

    order = sorted_keys(rows, book.state, choices)
    if not choices.grouping:
        if first:
            order.sort(key=need)
        return order
    groups: dict[str, list[str]] = {}
    for key in order:  # the groups in the order of their first row (hosts without engines: their line)
        group = book.group_of.get(key, "")
        members = groups.setdefault(group, [])
        if key != group:
            members.append(key)
    names = [g for g in groups if g]
    if choices.sort_key in TEXT_SORTS:
        by_own_column = choices.sort_key == choices.grouping
        names.sort(reverse=choices.reverse and by_own_column)
    names += [""] if "" in groups else []
    if first:  # the groups by their worst row (over every row of the group, shown or not)
        worst = {g: min([need(k) for k in book.members.get(g, [])] + [need(k) for k in groups[g]]) for g in groups}
        names.sort(key=lambda g: worst[g])
        for members in groups.values():
            members.sort(key=need)
    return [key for group in names for key in ([group] if group in rows else []) + groups[group]]


def shown(rows: dict[str, RowEntry], book: RowBook, choices: Choices) -> Shown:
    """The rows on screen, in order: those matching the filter, only the problems (`p`: a group's line
    stays over its problems), the rows of folded groups left out (not while filtering: a search shows
    what it finds)."""
    keys: Iterable[str] = rows
    engines = sum(1 for k in rows if k.startswith("engine:"))
    by_filter = by_problems = 0
    if choices.filter_text:  # the matching rows, under their groups' lines (the lines themselves rarely match)
        needle = choices.filter_text.lower()
        matched = {k for k in rows if needle in rows[k].search()}
        hit = {book.group_of.get(k) for k in matched}
        keys = [k for k in rows if k in matched or (k in book.spans and k in hit)]
        by_filter = engines - sum(1 for k in keys if k.startswith("engine:"))
    if choices.problems_only:
        keys = list(keys)  # the groups with a problem among what the filter left (a line alone read as empty)
        bad_groups = {book.group_of.get(k) for k in keys if book.rank.get(k, 2) < 2}
        left = sum(1 for k in keys if k.startswith("engine:"))
        keys = [k for k in keys if book.rank.get(k, 2) < 2 or (k in book.spans and k in bad_groups)]
        by_problems = left - sum(1 for k in keys if k.startswith("engine:"))
    order = ordered({k: rows[k] for k in keys}, book, choices)
    if choices.collapsed and not choices.filter_text:
        group_of = book.group_of
        order = [k for k in order if group_of.get(k) not in choices.collapsed or k == group_of.get(k)]
    return Shown(order, by_filter, by_problems, engines, sum(1 for k in order if k.startswith("engine:")))


def steady(choices: Choices) -> bool:
    """Whether the order reads only the rows' keys, their groups and (the problems first) their needs: sorted
    by the grouping's own column (the names), with no filter and no `p`. The default view is."""
    return choices.sort_key == choices.grouping and not choices.filter_text and not choices.problems_only


@dataclass
class OrderMemo:
    """The last order `shown` made, given again while what it read is the same: the choices, the rows' keys
    and groups, and their needs while the problems go first. The order of a steady view (`steady`) moves
    only when one of them does; made again every refresh, it was a sixth of the overview's refresh at 1,000
    engines (issue 39)."""

    made: Shown | None = None
    choices: Choices | None = None
    keys: frozenset[str] = frozenset()
    group_of: dict[str, str] = field(default_factory=dict)
    rank: dict[str, int] | None = None
    members: dict[str, list[str]] | None = None
    remade: int = 0
    """How many orders were made (not given again): tests count them."""

    def shown(self, rows: dict[str, RowEntry], book: RowBook, choices: Choices) -> Shown:
        """`shown(rows, book, choices)`, or the one made last where nothing it read has moved since."""
        first = choices.first
        if (
            self.made is not None
            and steady(choices)
            and choices == self.choices
            and rows.keys() == self.keys
            and book.group_of == self.group_of
            and (not first or (book.rank == self.rank and book.members == self.members))
        ):
            return self.made.copy()
        made = shown(rows, book, choices)
        self.remade += 1
        if not steady(choices):
            self.made = None
            return made
        self.made, self.choices, self.keys, self.group_of = made, choices, frozenset(rows), dict(book.group_of)
        self.rank = dict(book.rank) if first else None
        self.members = {g: list(m) for g, m in book.members.items()} if first else None
        return made.copy()
