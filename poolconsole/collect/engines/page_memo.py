"""The page memo: an engine's last /metrics layout remembered, so that a page laid out the same way is
read with a few C-level string operations and a precomputed plan. Owned complexity kept for a measured
win (benchmarks/collect_bench.py: the memo against the careful parse, side by side)."""

from __future__ import annotations

import math

from poolconsole.collect.engines.mapping import MetricSpec, Plan, build_plan
from poolconsole.collect.prom import Exposition, Head, Sample, sample_heads
from poolconsole.collect.prom_select import exposed
from poolconsole.model.snapshots import EngineMetrics

TYPE = "\n# TYPE "
REVIEW_EVERY = 30
"""A page is read the careful way (every line checked) at least this often, and on any layout change."""


class PageMemo:
    """What one engine's last page looked like, so that the next page with the same layout is read
    with a few C-level string operations and a precomputed plan instead of line by line.

    On every poll the `# TYPE` lines are counted and the wanted families' blocks found in the remembered
    order (no copy of the page); their sample heads must be the remembered ones (a change elsewhere
    that keeps the count is seen by the next review).
    A page is read the careful way (parse_exposition: every line validated and counted) on the first
    poll, whenever that layout changes, whenever a selected line does not fit the plan, and every
    REVIEW_EVERY polls, so a garbage line anywhere on the page is still reported, at the latest one
    review later. Measured on the simulated vLLM page (58 KB, 637 lines): see collect_bench.py."""

    def __init__(self) -> None:
        self.families: int | None = None
        """How many `# TYPE` lines the page has (None: nothing learned, read carefully)."""
        self.wanted: tuple[str, ...] = ()
        """The wanted families' `# TYPE name ` lines, in page order."""
        self.kept: list[int] | None = None
        """Positions of the selected lines that are samples the plan reads (None: all of them)."""
        self.careful_heads: list[Head] = []
        """The samples the last careful read selected: the fast path must find exactly these."""
        self.counts: tuple[int | None, int | None] = (None, None)
        self.age = 0
        self.heads: list[str] | None = None
        self.plan: Plan | None = None
        self.spec: MetricSpec | None = None

    def read(self, text: str, spec: MetricSpec) -> tuple[EngineMetrics, dict[str, str], Exposition] | None:
        """The metrics of a page whose layout is the remembered one; None when it must be read carefully."""
        if self.families != text.count(TYPE) or self.spec is not spec or self.age >= REVIEW_EVERY:
            self._learn_layout(text.split(TYPE), spec)
            return None
        lines: list[str] = []
        at = 0
        for name in self.wanted:  # each wanted family's block, found in the remembered order
            at = text.find(name, at)
            if at < 0:
                self._learn_layout(text.split(TYPE), spec)
                return None
            start = text.find("\n", at + 1) + 1
            if not start:
                continue
            end = text.find("\n#", start)
            block = (text[start:] if end < 0 else text[start:end]).rstrip("\n")
            if block:
                lines.extend(block.split("\n"))
            at = start
        self.age += 1
        split = [line.rpartition(" ") for line in lines]
        heads = [head for head, _, _ in split]
        try:
            values = [float(value) for _, _, value in split]
        except ValueError:
            return None
        if heads != self.heads:
            if self.plan is not None:  # other series than last time (a new model, rank, label): review
                self.plan = self.heads = None  # (a page back in the old layout must not find old heads and no plan)
                return None
            plan = self._plan(heads, spec)  # first fast read after a review: its counts are current
            if plan is None:
                return None
            self.heads, self.plan = heads, plan
        assert self.plan is not None
        kept = self.kept
        if kept is not None:
            values = [values[i] for i in kept]
        if not all(map(math.isfinite, values)):
            return None  # NaN / Inf samples are left out of the sums: the careful path knows how
        metrics, missing = self.plan.apply(values)
        return metrics, missing, Exposition([], 0, None, self.counts[0], self.counts[1])

    def _learn_layout(self, pieces: list[str], spec: MetricSpec) -> None:
        names = exposed(spec.wanted)
        self.families, self.spec, self.age = len(pieces) - 1, spec, 0
        typed = (piece[: piece.find(" ")] for piece in pieces[1:])  # piece 0: the page head
        self.wanted = tuple(f"{TYPE}{name} " for name in typed if name in names)
        self.heads, self.plan, self.kept = None, None, None

    def reviewed(self, exposition: Exposition) -> None:
        """After a careful read: the fast path may serve the next polls only if this page was clean."""
        self.counts = (exposition.total_lines, exposition.prefixed_lines)
        self.careful_heads = sorted((s.name, s.labels) for s in exposition.samples)
        if exposition.bad_lines or not self.wanted:
            self.families = None

    def _plan(self, heads: list[str], spec: MetricSpec) -> Plan | None:
        parsed = sample_heads(heads)
        if parsed is None:
            return None
        kept = [
            i
            for i, (name, labels) in enumerate(parsed)
            if name and not (spec.skip and spec.skip(Sample(name, labels, 0.0)))
        ]
        if sorted(parsed[i] for i, (name, _) in enumerate(parsed) if name) != self.careful_heads:
            # The careful read found samples outside the wanted families' blocks (a page without TYPE
            # lines for some of them): this layout is always read carefully.
            self.families = None
            return None
        self.kept = None if len(kept) == len(parsed) else kept
        return build_plan([parsed[i] for i in kept], spec, self.counts[1])
