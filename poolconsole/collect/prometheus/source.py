"""Engines read from a Prometheus-compatible query API (Prometheus, Thanos Query, VictoriaMetrics, Mimir)
instead of their own endpoints: the same EngineSnapshot the direct poller builds, from instant queries.

What one engine needs is two instant vectors:

- the raw series of the metric families the direct collector reads (the engine spec's names) and the
  target's `up`, selected by the engine's `instance` label (HOST:PORT of its url) or its `selector`;
- the `timestamp()` of the target's `up` (or its running-requests gauge): when Prometheus scraped it,
  the sample's time.

Every engine on one query API is read in one batch (EngineReads): each engine's poller asks it, and the first
ask of a tick sends one instant query per group (the engines matched by instance, up to BATCH_INSTANCES of
them in one `instance=~"a|b|..."`; each distinct selector on its own) holding both vectors (`raw or
label_replace(timestamp(up{...}), ...)`: prometheus.queries); each engine gets its slice. Once read, a group
matched by instance asks the scrape times alone first, and the series only of the engines scraped since the
reading their poller holds: a poll between two scrapes (most of them, at a 15-60 s scrape and a 2 s poll)
costs its engine a scrape time, not its series decoded again. One loop polls the batch's pollers a tick
(runtime.live); a poller that asks while a batch is in flight, or soon after one (prometheus.batch says how
soon), gets that batch's reading. 1,000 engines are at most 10 queries a tick (5 groups: their scrape times,
then the reads) instead of 2,000 (benchmarks/scale_bench.py measures both).

The series go through the same mapping as a /metrics page (aliases per version, ranks, histograms), so
every field reads as it does when polled directly. Counters are read as counters, not through `rate()`:
the model's reset-safe deltas between two scrapes then give tok/s, TTFT and ITL (histogram deltas),
hit and acceptance rates, and they also see each restart (a counter that went down, a new process start
time), which `rate()` would mend silently: the restart count, the restart-loop alert and the restart
marks on the charts keep working, and the running totals stay monotonic. Prometheus' own reset rule is
the model's (a decrease is a reset and the new value is the increase since it), and no `rate()` window
has to be guessed against a scrape interval the console does not know.

A poll between two scrapes sees the same sample again: it keeps the sample's time (fetched_at is the
scrape's time, so the age of the sample shows as for a direct poll) and its monotonic stamp, so the pool
state knows it has applied it already.

Unknown keeps its reason: no series for the selection, a stale target (`up == 0`, with the scrape
error Prometheus reports for it), a query error, an unreachable or refusing query API.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from types import MappingProxyType
from typing import Any, TypeVar

from poolconsole.collect.engines.kinds import Capability, adapter
from poolconsole.collect.engines.poll import SPEC
from poolconsole.collect.prometheus.api import Answer, Series
from poolconsole.collect.prometheus.api import PrometheusAPI as PrometheusAPI  # re-exported: its clients import it here
from poolconsole.collect.prometheus.batch import REUSE_S as REUSE_S
from poolconsole.collect.prometheus.batch import Batch as SharedBatch
from poolconsole.collect.prometheus.batch import Coalescer
from poolconsole.collect.prometheus.batch import scrape_error_in as scrape_error_in
from poolconsole.collect.prometheus.layout import Layout, layout_key, layout_of
from poolconsole.collect.prometheus.queries import (
    SCRAPE_OF,
    Group,
    batch_expression,
    batch_groups,
    instances_matcher,
    matchers,
    running_families,
    scrape_time,
    selection,
)
from poolconsole.config.models import Engine, EngineKind
from poolconsole.model.snapshots import COUNTERS, GAUGES, HISTOGRAMS, EngineSnapshot, EngineState

K = TypeVar("K")
ALL_METRICS = (*GAUGES, *COUNTERS, *HISTOGRAMS)
LLAMACPP_KV = (
    'llama.cpp has no KV metric: its estimate comes from /slots, which only a direct poll reads (read = "direct")'
)


SAME_SCRAPE = Answer(same_scrape=True)
"""An engine's vector when its scrape time is the one its poller's reading holds (EngineReads.run)."""


Batch = SharedBatch[Engine, tuple[Answer, Answer]]
"""One tick's reading of every engine on the API: each engine's two vectors, by its poller's key (a group's
engines go on as soon as its answer is in; /api/v1/targets read once per batch for every stale engine)."""


def by_instance(series: Iterable[Series]) -> dict[str, list[Series]]:
    """An answer's series by their instance label."""
    out: dict[str, list[Series]] = {}
    for s in series:
        out.setdefault(s.labels.get("instance", ""), []).append(s)
    return out


def fresh_keys(
    members: Mapping[K, Engine], keys: Iterable[K], stamps: Sequence[Series], held: Mapping[K, object]
) -> tuple[list[K], dict[K, Answer]]:
    """Of a group's engines, by the scrape times' answer: those to read (scraped since the reading `held`
    has for them, or with no scrape time), and the others' scrape time (their readings hold that scrape)."""
    times = by_instance(stamps)
    fresh: list[K] = []
    same: dict[K, Answer] = {}
    for key in keys:
        engine = members[key]
        _, stamp = engine_slice(engine, times.get(engine.instance, ()), None)
        if stamp.series and held.get(key) == stamp.series[0].value:
            same[key] = stamp
        else:
            fresh.append(key)
    return fresh, same


@cache
def _names_of(kind: EngineKind) -> tuple[frozenset[str], frozenset[str]]:
    """A kind's families with `up`, and its scrape-time families (engine_slice, per engine and tick)."""
    return frozenset({"up", *SPEC[kind].wanted}), frozenset(running_families(kind))


def engine_slice(engine: Engine, series: Sequence[Series], elapsed_s: float | None) -> tuple[Answer, Answer]:
    """An engine's two vectors out of its group's answer: its families' raw series (and `up`), as the
    per-engine selection gives them, and the latest timestamp() of its scrape-time families."""
    wanted, stamp_of = _names_of(engine.kind)
    values: list[Series] = []
    stamps: list[Series] = []
    for s in series:
        name = s.labels.get("__name__")
        if name is None:
            if s.labels.get(SCRAPE_OF) in stamp_of:
                stamps.append(s)
        elif name in wanted:
            values.append(s)
    return _answers(values, stamps, elapsed_s)


def _answers(values: Sequence[Series], stamps: Sequence[Series], elapsed_s: float | None) -> tuple[Answer, Answer]:
    latest = max(stamps, key=lambda s: s.value, default=None)
    stamp = (Series.of({}, latest.value, latest.at),) if latest is not None else ()
    return Answer(tuple(values), elapsed_s=elapsed_s), Answer(stamp, elapsed_s=elapsed_s)


def instance_slices(series: Iterable[Series]) -> dict[str, tuple[list[Series], list[Series]]]:
    """An answer matched by instance, split in one pass by the instance label into its named series and its
    scrape times (the series timestamp() left without a name)."""
    out: dict[str, tuple[list[Series], list[Series]]] = {}
    for s in series:
        labels = s.labels
        instance = labels.get("instance", "")
        got = out.get(instance)
        if got is None:
            got = out[instance] = ([], [])
        got[0 if "__name__" in labels else 1].append(s)
    return out


def sliced(
    members: Mapping[K, Engine], keys: Iterable[K], series: Iterable[Series], elapsed_s: float | None
) -> dict[K, tuple[Answer, Answer]]:
    """The engines' slices of an answer matched by instance (engine_slice each). Where they are all of one
    kind, the answer holds only that kind's families (batch_expression asked for no other), so an instance's
    series are its engine's slice as they are: no second walk over them (at 1,000 engines the two walks,
    by instance and then by name, were 7 % of the console's samples)."""
    read = instance_slices(series)
    keys = list(keys)
    one_kind = len({members[k].kind for k in keys}) == 1
    out: dict[K, tuple[Answer, Answer]] = {}
    for k in keys:
        engine = members[k]
        named, stamps = read.get(engine.instance, ((), ()))
        if one_kind:
            out[k] = _answers(named, stamps, elapsed_s)
        else:
            out[k] = engine_slice(engine, [*named, *stamps], elapsed_s)
    return out


class EngineReads(Coalescer[Engine, Group, tuple[Answer, Answer]]):
    """Every engine read from one query API, coalesced into one batch per tick (module docstring; the
    coalescing is prometheus.batch's Coalescer, which the hosts' batch shares)."""

    api: PrometheusAPI

    def groups(self, members: dict[int, Engine]) -> list[Group]:
        return batch_groups(members)

    async def read(self, key: int) -> tuple[Answer, Answer, Batch]:
        """This engine's two vectors (from the batch in flight, one of a moment ago, or a new
        batch of every member) and that batch."""
        (values, stamps), batch = await self.fetch(key)
        return values, stamps, batch

    async def run(self, batch: Batch, group: Group) -> dict[int, tuple[Answer, Answer]]:
        """A selector's group, or the first read of a group: its one query. Else the scrape times first,
        then the series of the engines scraped since their poller's last reading only; the others get
        SAME_SCRAPE (module docstring: at a 5 s scrape and a 2 s poll, 60 % of the engines a tick, which
        were decoded, sliced and compared to the last reading for nothing)."""
        if not group.by_instance or not any(k in self.held for k in group.keys):  # the first read: every one
            answer = await self.api.query(group.expr)
            if not answer.ok:
                return {k: (answer, answer) for k in group.keys}
            if not group.by_instance:
                return {k: engine_slice(batch.members[k], answer.series, answer.elapsed_s) for k in group.keys}
            return self._sliced(batch, group.keys, answer)
        times = await self.api.query(group.stamps)
        if not times.ok:
            return {k: (times, times) for k in group.keys}
        fresh, same = fresh_keys(batch.members, group.keys, times.series, self.held)
        out = {k: (SAME_SCRAPE, replace(stamp, elapsed_s=times.elapsed_s)) for k, stamp in same.items()}
        if not fresh:
            return out
        kinds = {batch.members[k].kind for k in fresh}
        answer = await self.api.query(
            batch_expression(kinds, instances_matcher(batch.members[k].instance for k in fresh))
        )
        if not answer.ok:
            return out | {k: (answer, answer) for k in fresh}
        return out | self._sliced(batch, fresh, answer)

    def handed(self, reading: tuple[Answer, Answer]) -> tuple[Answer, Answer]:
        """A reading of series, once handed, stays as SAME_SCRAPE with its scrape time: the poller holds that
        scrape (`_scraped` keeps every reading it builds). The series would stay until the next batch: at
        1,000 engines 15 MiB of decoded labels held between two ticks, most of the console's peak."""
        values, stamps = reading
        return (SAME_SCRAPE, stamps) if values.ok and values.series else reading

    @staticmethod
    def _sliced(batch: Batch, keys: Iterable[int], answer: Answer) -> dict[int, tuple[Answer, Answer]]:
        """The engines' slices of an answer matched by instance."""
        return sliced(batch.members, keys, answer.series, answer.elapsed_s)


@dataclass
class _Seen:
    """The last scrape a poller read: a poll before the next scrape sees the same sample again."""

    at: float | None = None
    monotonic: float = 0.0
    answered: tuple[Any, ...] | None = None
    """What the last snapshot read as ok was built from: the scrape's time, its series' labels (the layout's
    key) and values."""
    snapshot: EngineSnapshot | None = None
    held: tuple[float, EngineSnapshot] | None = None
    """The last snapshot built from a scrape's series (any state), with that scrape's time."""
    layout: Layout | None = None
    """What the last scrape's labels decided (prometheus.layout), kept while they stay the same."""


@dataclass
class PrometheusEnginePoller:
    """Reads one engine from the query API; the same interface as EnginePoller (`poll`, `aclose`)."""

    engine: Engine
    api: PrometheusAPI
    clock: Callable[[], float] = time.time
    seen: _Seen = field(default_factory=_Seen)

    def __post_init__(self) -> None:
        self.api.acquire()
        self.where = f"{{{matchers(self.engine)}}}"
        self.api.engine_reads.join(id(self), self.engine)

    @property
    def shared(self) -> EngineReads:
        """The API's batch of engines: the runtime polls its members in one pass a tick."""
        return self.api.engine_reads

    async def aclose(self) -> None:
        self.api.engine_reads.leave(id(self))  # and what it held
        await self.api.release()

    async def poll(self) -> EngineSnapshot:
        wall, mono = time.time(), time.monotonic()
        try:
            values, stamps, batch = await self.api.engine_reads.read(id(self))
            return await self._snapshot(values, stamps, batch)
        except Exception as exc:  # a collector must never take the console down
            return self._unknown(
                EngineState.DEGRADED, f"internal error while reading this engine from Prometheus: {exc!r}", wall, mono
            )

    def _stamp(self, at: float) -> tuple[float, float]:
        """(fetched_at on the poller's clock, monotonic) of a sample Prometheus took at `at` (epoch s)."""
        if self.seen.at != at:
            self.seen.at = at
            self.seen.monotonic = time.monotonic() - (time.time() - at)
        return self.clock() - (time.time() - at), self.seen.monotonic

    def _unknown(
        self,
        state: EngineState,
        error: str,
        at: float,
        monotonic: float,
        reason: str | None = None,
        latency_s: float | None = None,
        extra: dict[str, Any] | None = None,
    ) -> EngineSnapshot:
        why = reason or error
        return EngineSnapshot(
            name=self.engine.name,
            kind=self.engine.kind,
            url=self.engine.url,
            host=self.engine.host,
            fetched_at=self.clock() - (time.time() - at),
            monotonic=monotonic,
            state=state,
            error=error,
            source=f"prometheus {self.api.where}",
            latency_s=latency_s,
            missing=MappingProxyType(dict.fromkeys(ALL_METRICS, why)),
            extra=MappingProxyType(self._extra(extra)),
        )

    def _extra(self, more: dict[str, Any] | None = None) -> dict[str, Any]:
        return {"read_from": "prometheus", "prometheus": self.api.source.url, "selector": self.where, **(more or {})}

    async def _snapshot(self, values: Answer, stamps: Answer, batch: Batch) -> EngineSnapshot:
        latency = max((a.elapsed_s for a in (values, stamps) if a.elapsed_s is not None), default=None)
        now_wall, now_mono = time.time(), time.monotonic()
        for answer in (values, stamps):
            if not answer.ok:
                assert answer.state is not None and answer.error is not None
                return self._unknown(answer.state, answer.error, now_wall, now_mono, latency_s=latency)
        at = stamps.series[0].value if stamps.series and math.isfinite(stamps.series[0].value) else None
        if at is None:
            reason = f"no series in Prometheus for {self.where}"
            error = (
                f"{reason}: Prometheus does not scrape it, or under other labels (give a selector; "
                "`poolconsole prometheus-config` writes scrape configs)"
            )
            return self._unknown(EngineState.DOWN, error, now_wall, now_mono, reason, latency)
        fetched_at, monotonic = self._stamp(at)
        age = max(0.0, time.time() - at)
        if values.same_scrape:
            if self.seen.held is not None and self.seen.held[0] == at:
                return self._again(self.seen.held[1], at, fetched_at, latency, age)
            values, stamps = await self._alone()  # the batch thought it held one: read it on its own
            return await self._snapshot(values, stamps, batch)
        snapshot = await self._scraped(values, at, fetched_at, monotonic, latency, age, batch)
        self.seen.held = (at, snapshot)
        self.api.engine_reads.held[id(self)] = at
        return snapshot

    def _again(
        self, snapshot: EngineSnapshot, at: float, fetched_at: float, latency: float | None, age: float
    ) -> EngineSnapshot:
        """A reading of the same scrape again, with the new poll's stamps."""
        return replace(
            snapshot,
            fetched_at=fetched_at,
            latency_s=latency,
            extra=MappingProxyType(self._extra({"scraped_at": at, "sample_age_s": round(age, 3)})),
        )

    async def _alone(self) -> tuple[Answer, Answer]:
        """This engine's two vectors by its own queries (the per-engine selection and scrape time)."""
        values = await self.api.query(selection(self.engine))
        stamps = await self.api.query(scrape_time(self.engine))
        return values, stamps

    async def _scraped(
        self,
        values: Answer,
        at: float,
        fetched_at: float,
        monotonic: float,
        latency: float | None,
        age: float,
        batch: Batch,
    ) -> EngineSnapshot:
        """The snapshot of a scrape's series."""
        kind = self.engine.kind
        series = values.series
        key = layout_key(series)
        layout = self.seen.layout
        if layout is None or layout.key != key:
            layout = self.seen.layout = layout_of(series, SPEC[kind], key)
        if (many := len(layout.targets)) > 1:
            names = ", ".join(f"{j}/{i}" for j, i in layout.targets)
            error = f"{self.where} matches {many} scrape targets ({names}): give a selector that picks one"
            return self._unknown(EngineState.DEGRADED, error, at, monotonic, latency_s=latency)
        down = [series[i] for i in layout.ups if series[i].value == 0]
        if down:
            said = await batch.scrape_error(down[0].labels)
            reason = "stale in Prometheus: its last scrape failed (up == 0)"
            error = reason + (f": {said}" if said else "")
            return self._unknown(
                EngineState.DOWN, error, at, monotonic, reason, latency, {"scraped_at": at, "sample_age_s": age}
            )
        # A poll between two scrapes reads the same samples again: the same metrics, so only the stamps are
        # new. A batch matched by instance tells such a poll by its scrape time (SAME_SCRAPE, above); this
        # check serves a selector's group and an engine read on its own queries.
        # The values compared are the plan's inputs: the rest are `up` (1 here) and what the spec skips, which
        # the snapshot does not read (every series' value was 1.8 % of the console at 1,000 engines).
        inputs = layout.values(series)
        answered = (at, layout.key, tuple(inputs))  # the layout's bytes: one copy held
        if self.seen.snapshot is not None and self.seen.answered == answered:
            return self._again(self.seen.snapshot, at, fetched_at, latency, age)
        if layout.plan is None:
            spec = SPEC[kind]
            hint = adapter(kind).no_series_hint
            reason = f"no {spec.prefix}* series in Prometheus for {self.where}"
            return self._unknown(EngineState.DEGRADED, f"{reason} ({hint})", at, monotonic, reason, latency)
        metrics, missing = layout.plan.apply(inputs)  # a NaN, infinite or negative sample: unknown
        metrics, missing = adapter(kind).adjust_metrics(metrics, missing)
        # a kind whose KV fill comes from /slots, which no scrape holds
        if Capability.SLOTS in adapter(kind).capabilities and metrics.get("kv_cache_usage") is None:
            missing["kv_cache_usage"] = LLAMACPP_KV
        start = metrics.get("process_start_time")
        snapshot = EngineSnapshot(
            name=self.engine.name,
            kind=kind,
            url=self.engine.url,
            host=self.engine.host,
            fetched_at=fetched_at,
            monotonic=monotonic,
            state=EngineState.OK,
            error=None,
            source=f"prometheus {self.api.where}",
            latency_s=latency,
            models=metrics.model_names,
            metrics=metrics,
            restart_marker=f"{start:.3f}" if start is not None else None,
            missing=MappingProxyType(missing),
            extra=MappingProxyType(self._extra({"scraped_at": at, "sample_age_s": round(age, 3)})),
        )
        self.seen.answered, self.seen.snapshot = answered, snapshot
        return snapshot
