"""What the engines read from a Prometheus query API are asked (prometheus.source reads the answers): an
engine's own selection and scrape time, and a batch's queries, which read up to BATCH_INSTANCES engines
matched by instance, or the engines of one selector, in one instant query."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from poolconsole.collect.engines.poll import SPEC
from poolconsole.collect.prometheus.api import quoted
from poolconsole.config.models import Engine, EngineKind


def matchers(engine: Engine) -> str:
    """The engine's label matchers without braces: its selector's, else instance="HOST:PORT"."""
    if engine.selector is not None:
        return engine.selector.strip()[1:-1].strip().rstrip(",").strip()
    return f"instance={quoted(engine.instance)}"


def selection(engine: Engine) -> str:
    """Every series this engine's mapping reads, and its target's `up` (the per-engine query a batch
    replaces; benchmarks/scale_bench.py measures it beside the batch)."""
    spec = SPEC[engine.kind]
    names = "|".join(sorted({*spec.wanted, "up"}))
    return f'{{__name__=~"{names}", {matchers(engine)}}}'


def scrape_time(engine: Engine) -> str:
    """When Prometheus last scraped the engine: its target's `up`, else (a selector with labels `up` lacks)
    its running-requests gauge. timestamp() drops the metric name, so one family at a time."""
    sel = matchers(engine)
    running = SPEC[engine.kind].gauges["requests_running"][0]
    parts = [f"timestamp(up{{{sel}}})", *(f'timestamp({{__name__="{name}", {sel}}})' for name in running)]
    return f"max({' or '.join(parts)})"


BATCH_INSTANCES = 200
"""Engines matched by instance in one batched query: 200 keep the query's URL near 6 KB (under the 8 KB
request line a proxy in front of the query API commonly allows) and its answer near 1 MB."""
SCRAPE_OF = "poolconsole_scrape_of"
"""The label a batch puts on each `timestamp()` series: which family it is the scrape time of."""


def running_families(kind: EngineKind) -> tuple[str, ...]:
    """The families whose timestamp() is an engine's scrape time: `up`, then its running-requests gauge."""
    return ("up", *SPEC[kind].gauges["requests_running"][0])


def batch_expression(kinds: Iterable[EngineKind], sel: str) -> str:
    """One instant query reading every engine under the matchers `sel`: the raw series of the kinds'
    families and each target's `up`, `or` the timestamp() of `up` and of the running-requests gauges, one
    family at a time (timestamp() reads the samples' own times only of a plain selector, and drops the
    name), each tagged with SCRAPE_OF so that `or` (which matches label sets without the name) keeps them."""
    chosen = sorted(set(kinds), key=str)
    names = "|".join(sorted({"up", *(n for k in chosen for n in SPEC[k].wanted)}))
    return f'{{__name__=~"{names}", {sel}}} or ' + stamps_expression(chosen, sel)


def stamps_expression(kinds: Iterable[EngineKind], sel: str) -> str:
    """The scrape times alone of every engine under `sel` (batch_expression's timestamp() part): a batch asks
    it first, then the series only of the engines scraped since their last reading."""
    families = sorted({f for k in set(kinds) for f in running_families(k)})
    return " or ".join(
        f'label_replace(timestamp({{__name__="{family}", {sel}}}), "{SCRAPE_OF}", "{family}", "", "")'
        for family in families
    )


def instances_matcher(instances: Iterable[str]) -> str:
    """instance=~"a|b|..." matching exactly these instance labels."""
    return f"instance=~{quoted('|'.join(re.escape(i) for i in sorted(set(instances))))}"


@dataclass(frozen=True)
class Group:
    """Engines read by one query: those matched by instance (sliced by it) or those of one selector."""

    expr: str
    keys: tuple[int, ...]
    by_instance: bool
    stamps: str = ""
    """By instance: the scrape times' query sent first (stamps_expression)."""


K = TypeVar("K")


def engine_groups(members: Mapping[K, Engine], per_query: int) -> list[tuple[str, tuple[K, ...], bool]]:
    """The engines one query can read together: those matched by instance in chunks of `per_query`
    instances, and each distinct selector on its own (a selector's matchers cannot be merged into another's).
    Each group: its label matchers, its members' keys, whether it was matched by instance."""
    by_instance: dict[str, list[K]] = {}
    by_selector: dict[str, list[K]] = {}
    for key, engine in members.items():
        if engine.selector is None:
            by_instance.setdefault(engine.instance, []).append(key)
        else:
            by_selector.setdefault(matchers(engine), []).append(key)
    groups: list[tuple[str, tuple[K, ...], bool]] = []
    instances = sorted(by_instance)
    for at in range(0, len(instances), per_query):
        chunk = instances[at : at + per_query]
        groups.append((instances_matcher(chunk), tuple(k for i in chunk for k in by_instance[i]), True))
    groups += [(sel, tuple(same), False) for sel, same in by_selector.items()]
    return groups


def batch_groups(members: dict[int, Engine]) -> list[Group]:
    """The queries of one batch (engine_groups, BATCH_INSTANCES instances a query)."""
    groups = []
    for matcher, keys, by_instance in engine_groups(members, BATCH_INSTANCES):
        kinds = {members[k].kind for k in keys}
        stamps = stamps_expression(kinds, matcher) if by_instance else ""
        groups.append(Group(batch_expression(kinds, matcher), keys, by_instance, stamps))
    return groups
