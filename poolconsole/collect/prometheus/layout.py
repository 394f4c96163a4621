"""What an engine's series' labels decide, worked out once per layout (issue 39).

Prometheus gives an engine the same series scrape after scrape, with new values. Everything that depends on
their labels alone (which are `up`, how many scrape targets they name, which series the mapping reads, and
the mapping's plan) is then the same too, so a poller keeps it with the layout it came from and, while the
layout holds, a new scrape is only its values put through the plan.

The layout is kept as the labels' JSON (orjson, in C: a few KiB an engine), not as the decoded label
strings: at 1,000 engines those held 17 MiB (the strings of every engine's first answer, and a tuple per
label), and building the sample heads to compare them was 5 % of the console's CPU.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import orjson

from poolconsole.collect.engines.mapping import MetricSpec, Plan, build_plan
from poolconsole.collect.prom import Sample
from poolconsole.collect.prometheus.api import Series


@dataclass(frozen=True, slots=True)
class Layout:
    key: bytes
    """The series' labels as JSON, in the answer's order: two scrapes with equal keys have equal labels."""
    ups: tuple[int, ...]
    """Positions of the target's `up` series."""
    targets: tuple[tuple[str, str], ...]
    """The (job, instance) of each scrape target the `up` series name, sorted."""
    kept: tuple[int, ...]
    """Positions of the samples the plan reads, in its order (not `up`, nor those the spec skips)."""
    plan: Plan | None
    """None: none of the series is the engine's own (no `spec.prefix`)."""

    def values(self, series: Sequence[Series]) -> list[float]:
        """The plan's inputs out of a scrape with this layout."""
        return [series[i].value for i in self.kept]


def layout_key(series: Sequence[Series]) -> bytes:
    return orjson.dumps([s.labels for s in series])


def layout_of(series: Sequence[Series], spec: MetricSpec, key: bytes) -> Layout:
    """The layout of these series (their labels: the values are not read), `key` being their layout_key.
    `spec.skip` reads a sample's labels only, so its choice is kept with the layout too."""
    # kept as a copy of its own length: the bytes orjson returns keep the buffer it grew them in (a 2.9 KB
    # key held 33 KB; at 1,000 engines 7.8 MiB of keys where 3 MiB is theirs)
    key = memoryview(key).tobytes()
    ups = tuple(i for i, s in enumerate(series) if s.labels.get("__name__") == "up")
    targets = sorted({(series[i].labels.get("job", ""), series[i].labels.get("instance", "")) for i in ups})
    heads = [
        (i, Sample(s.labels["__name__"], tuple((k, v) for k, v in s.labels.items() if k != "__name__"), 0.0))
        for i, s in enumerate(series)
        if s.labels.get("__name__") != "up"
    ]
    if not any(sample.name.startswith(spec.prefix) for _, sample in heads):
        return Layout(key, ups, tuple(targets), (), None)
    if spec.skip is not None:
        heads = [(i, sample) for i, sample in heads if not spec.skip(sample)]
    own = sum(1 for _, s in heads if s.name.startswith(spec.prefix)) if spec.prefix else len(heads)
    plan = build_plan([(s.name, s.labels) for _, s in heads], spec, own)
    return Layout(key, ups, tuple(targets), tuple(i for i, _ in heads), plan)
