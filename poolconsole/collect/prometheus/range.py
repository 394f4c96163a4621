"""The charts' history of engines read from `[prometheus]`: range queries (`/api/v1/query_range`) of the
raw series the charts need, turned into one EngineSnapshot per scrape, as a live poll would have read it.

One range query per group of engines (RANGE_INSTANCES of them matched by instance, each selector on its
own), step = the poll interval, asks for the raw series of the families the engine view charts
(generation tokens counter, KV usage, running, waiting, a throughput gauge where the engine has one, the
process start time) and each target's `up`, `or` the `timestamp()` of `up` and of the running-requests
gauge, tagged as the instant batch tags them (prometheus.queries.SCRAPE_OF): at each step, when the sample
was scraped. Consecutive steps that read the same scrape are one snapshot (a live poll between two scrapes
changes nothing either), stamped with the scrape's time; the mapping is the direct collector's, so the
runtime's pool state computes tok/s (reset-safe counter deltas) and the restart marks from them exactly
as it does for live polls. Counters stay counters, never `rate()`, for the reasons prometheus.source gives.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from urllib.parse import quote

from poolconsole.collect.engines.mapping import metrics_from_samples
from poolconsole.collect.engines.poll import SPEC
from poolconsole.collect.prom import Sample
from poolconsole.collect.prometheus.api import PrometheusAPI, query_result
from poolconsole.collect.prometheus.queries import SCRAPE_OF, engine_groups, running_families
from poolconsole.config.models import Engine, EngineKind
from poolconsole.model.snapshots import EngineMetrics, EngineSnapshot, EngineState

CHARTED_GAUGES = ("requests_running", "requests_waiting", "kv_cache_usage", "generation_tokens_per_s_gauge")
CHARTED_COUNTERS = ("generation_tokens_total",)
RANGE_INSTANCES = 8
"""Engines matched by instance in one range query: about 8 series of 3,600 steps each is ~0.8 MB of JSON
per engine, so a group's answer stays well under the default max_body_bytes (16 MiB)."""
RANGE_CONCURRENCY = 4
"""Range queries in flight at once: a large pool's fill does not hit the query API all at once."""
RANGE_TIMEOUT_S = 30.0
"""A range query reads an hour of samples: it may take longer than an instant query's http_timeout_s."""


@dataclass(frozen=True)
class RangeSeries:
    """One element of a range vector (a matrix): its labels (with __name__) and (time, value) per step."""

    labels: dict[str, str]
    points: tuple[tuple[float, float], ...]


def parse_matrix(body: bytes) -> tuple[RangeSeries, ...]:
    """An /api/v1/query_range answer (result type matrix) -> its series. Raises ValueError."""
    kind, result = query_result(body)
    if kind != "matrix" or not isinstance(result, list):
        raise ValueError(f"expected a range vector (matrix), got {kind!r}")
    out = []
    for item in result:
        labels = {str(k): str(v) for k, v in item["metric"].items()}
        out.append(RangeSeries(labels, tuple((float(at), float(value)) for at, value in item["values"])))
    return tuple(out)


def charted_families(kind: EngineKind) -> frozenset[str]:
    """The exposed names the charts read for this kind: each charted metric's aliases, its process start."""
    spec = SPEC[kind]
    names = {"process_start_time_seconds"}
    for gauge in CHARTED_GAUGES:
        if gauge in spec.gauges:
            names.update(spec.gauges[gauge][0])
    for counter in CHARTED_COUNTERS:
        names.update(spec.counters.get(counter, ()))
    return frozenset(names)


def range_expression(kinds: Iterable[EngineKind], sel: str) -> str:
    """The range query of every engine under the matchers `sel`: the raw series of the charted families and
    each target's `up`, `or` the tagged timestamp() of each scrape-time family (as batch_expression)."""
    chosen = sorted(set(kinds), key=str)
    names = "|".join(sorted({"up", *(n for k in chosen for n in charted_families(k))}))
    families = sorted({f for k in chosen for f in running_families(k)})
    parts = [f'{{__name__=~"{names}", {sel}}}']
    parts += [
        f'label_replace(timestamp({{__name__="{family}", {sel}}}), "{SCRAPE_OF}", "{family}", "", "")'
        for family in families
    ]
    return " or ".join(parts)


@dataclass(frozen=True)
class RangeGroup:
    """Engines read by one range query, and whether its answer is sliced by their instance."""

    expr: str
    engines: tuple[Engine, ...]
    by_instance: bool


def range_groups(engines: Sequence[Engine]) -> list[RangeGroup]:
    """By instance in chunks of RANGE_INSTANCES, each distinct selector on its own (engine_groups)."""
    by_index = dict(enumerate(engines))
    groups = []
    for matcher, keys, by_instance in engine_groups(by_index, RANGE_INSTANCES):
        members = tuple(by_index[k] for k in keys)
        groups.append(RangeGroup(range_expression({e.kind for e in members}, matcher), members, by_instance))
    return groups


def scrapes(engine: Engine, series: Iterable[RangeSeries], source: str = "prometheus") -> list[EngineSnapshot]:
    """One engine's series out of a range answer -> one snapshot per scrape, oldest first: what a live poll
    of that scrape reads (state ok with the charted metrics; down when the target was stale, `up == 0`;
    degraded when the scrape held none of the engine's series). Steps with no scrape time are skipped."""
    spec = SPEC[engine.kind]
    wanted = {"up", *charted_families(engine.kind)}
    stamp_of = set(running_families(engine.kind))
    stamps: dict[float, float] = {}
    values: dict[float, list[tuple[dict[str, str], float]]] = {}
    for s in series:
        name = s.labels.get("__name__")
        if name is None:
            if s.labels.get(SCRAPE_OF) in stamp_of:
                for step, at in s.points:
                    if math.isfinite(at):
                        stamps[step] = max(at, stamps.get(step, -math.inf))
        elif name in wanted:
            for step, value in s.points:
                values.setdefault(step, []).append((s.labels, value))
    out: list[EngineSnapshot] = []
    last_at: float | None = None
    for step in sorted(stamps):
        at = stamps[step]
        if at == last_at:
            continue  # the same scrape again
        last_at = at
        found = values.get(step, [])
        ups = [v for labels, v in found if labels.get("__name__") == "up"]
        samples = [
            Sample(labels["__name__"], tuple((k, v) for k, v in labels.items() if k != "__name__"), value)
            for labels, value in found
            if labels.get("__name__") != "up"
        ]
        if any(u == 0 for u in ups):
            why = "stale in Prometheus: its last scrape failed (up == 0)"
            out.append(_snapshot(engine, at, source, EngineState.DOWN, why))
            continue
        if not any(s.name.startswith(spec.prefix) for s in samples):
            why = f"no {spec.prefix}* series in Prometheus at this scrape"
            out.append(_snapshot(engine, at, source, EngineState.DEGRADED, why))
            continue
        metrics, missing = metrics_from_samples(samples, spec)
        start = metrics.get("process_start_time")
        marker = f"{start:.3f}" if start is not None else None
        out.append(_snapshot(engine, at, source, EngineState.OK, None, metrics, missing, marker))
    return out


def _snapshot(
    engine: Engine,
    at: float,
    source: str,
    state: EngineState,
    error: str | None,
    metrics: EngineMetrics | None = None,
    missing: dict[str, str] | None = None,
    marker: str | None = None,
) -> EngineSnapshot:
    """A scrape as a poll: stamped with the scrape's time (its monotonic too: only differences count)."""
    why = missing if missing is not None else dict.fromkeys((*CHARTED_GAUGES, *CHARTED_COUNTERS), error or "")
    return EngineSnapshot(
        name=engine.name,
        kind=engine.kind,
        url=engine.url,
        host=engine.host,
        fetched_at=at,
        monotonic=at,
        state=state,
        error=error,
        source=source,
        models=metrics.model_names if metrics is not None else (),
        metrics=metrics,
        restart_marker=marker,
        missing=MappingProxyType(why),
    )


@dataclass(frozen=True)
class RangeReading:
    """What the range queries gave: each engine's snapshots per scrape (by name), and each failed query's
    error in words."""

    snapshots: dict[str, list[EngineSnapshot]]
    errors: tuple[str, ...] = ()


def range_path(expr: str, start: float, end: float, step: float) -> str:
    return f"/api/v1/query_range?query={quote(expr, safe='')}&start={start:.3f}&end={end:.3f}&step={step:g}"


async def read_range(
    api: PrometheusAPI, engines: Sequence[Engine], start: float, end: float, step: float
) -> RangeReading:
    """Every engine's scrapes in [start, end] at `step`, one range query per group, never raising."""
    gate = asyncio.Semaphore(RANGE_CONCURRENCY)
    source = f"prometheus {api.where}"

    async def one(group: RangeGroup) -> tuple[dict[str, list[EngineSnapshot]], str | None]:
        async with gate:
            fetched = await api.get(range_path(group.expr, start, end, step), RANGE_TIMEOUT_S)
        failed = api.failed(fetched, "/api/v1/query_range")
        if failed is not None:
            return {}, failed.error
        try:
            series = parse_matrix(fetched.body)
        except (ValueError, KeyError, TypeError, IndexError) as exc:
            return {}, f"Prometheus at {api.where}: not a range query answer ({exc})"
        if not group.by_instance:
            return {e.name: scrapes(e, series, source) for e in group.engines}, None
        by_instance: dict[str, list[RangeSeries]] = {}
        for s in series:
            by_instance.setdefault(s.labels.get("instance", ""), []).append(s)
        return {e.name: scrapes(e, by_instance.get(e.instance, ()), source) for e in group.engines}, None

    snapshots: dict[str, list[EngineSnapshot]] = {}
    errors: list[str] = []
    for got, error in await asyncio.gather(*(one(g) for g in range_groups(engines))):
        snapshots.update(got)
        if error is not None and error not in errors:
            errors.append(error)
    return RangeReading(snapshots, tuple(errors))
