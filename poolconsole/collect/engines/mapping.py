"""Mapping an engine's Prometheus samples onto the normalized vocabulary, with aliases per version."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from types import MappingProxyType
from typing import TYPE_CHECKING, Literal

from poolconsole.collect.prom import (
    Exposition,
    Head,
    Sample,
    decode,
    label_value,
    parse_exposition,
)
from poolconsole.config.models import EngineKind
from poolconsole.model.snapshots import EngineMetrics, Histogram, RankMetrics

if TYPE_CHECKING:
    from poolconsole.collect.engines.page_memo import PageMemo

Agg = Literal["sum", "max", "mean"]


@dataclass(frozen=True, eq=False)
class MetricSpec:
    """How one engine names things. Aliases are listed newest first; the first one present wins."""

    kind: EngineKind
    gauges: Mapping[str, tuple[tuple[str, ...], Agg]]
    counters: Mapping[str, tuple[str, ...]]
    histograms: Mapping[str, tuple[str, ...]]
    rank_label: str | None = None
    model_labels: tuple[str, ...] = ("model_name",)
    not_exposed: Mapping[str, str] = field(default_factory=dict)
    skip: Callable[[Sample], bool] | None = None
    prefix: str = ""

    @cached_property
    def wanted(self) -> frozenset[str]:
        """Every exposed name this spec reads: samples, and the family names in HELP/TYPE lines."""
        names = {"process_start_time_seconds"}
        for aliases, _ in self.gauges.values():
            names.update(aliases)
        for aliases in self.counters.values():
            names.update(aliases)
            names.update(a.removesuffix("_total") for a in aliases)
        for aliases in self.histograms.values():
            for base in aliases:
                names.update((base, base + "_bucket", base + "_sum", base + "_count"))
        return frozenset(names)


def _shown(value: float) -> str:
    """A sample value as a page spells it (NaN, +Inf, -Inf, -5)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return f"{value:g}"


def _total(values: list[float]) -> float | str:
    """The sum of one metric's samples, or why it has none: every metric read here (requests, KV usage,
    token counts and rates, latency histograms) is a finite number that cannot be negative, so a sample that
    is NaN, infinite or negative makes the metric unknown (a sum over the other samples would read as a
    smaller number, complete), and so does a sum past the largest float."""
    try:
        total = math.fsum(values)
    except OverflowError:
        return f"its {len(values)} series add up past the largest number (values out of range)"
    except ValueError:  # +Inf and -Inf among them
        total = math.nan
    if not math.isfinite(total):
        bad = next(v for v in values if not math.isfinite(v))
        return f"the engine reported {_shown(bad)}, not a finite value"
    if values and (lowest := min(values)) < 0:
        return f"the engine reported {_shown(lowest)}: this metric is never negative"
    return total


def _aggregate(values: list[float], how: Agg) -> float | str:
    """The metric over its samples (sum, max or mean), or why it is unknown (see _total)."""
    total = _total(values)
    if isinstance(total, str) or how == "sum":
        return total
    if how == "max":
        return max(values)
    return total / len(values)


def _known(values: list[float], how: Agg) -> float | None:
    got = _aggregate(values, how) if values else None
    return None if isinstance(got, str) else got


@dataclass(frozen=True, eq=False)
class Plan:
    """Which samples feed which normalized metric, for one page layout (the list of sample heads).

    An engine serves the same series poll after poll with new values, so the plan is worked out once
    per layout and each poll is then a handful of sums over value positions."""

    gauges: tuple[tuple[str, tuple[int, ...], Agg], ...]
    counters: tuple[tuple[str, tuple[int, ...]], ...]
    histograms: tuple[tuple[str, tuple[tuple[float, tuple[int, ...]], ...], tuple[int, ...], tuple[int, ...]], ...]
    """name, (bound, samples) per bucket sorted by bound, _sum samples, _count samples."""
    process_start: tuple[int, ...]
    ranks: tuple[tuple[str, tuple[int, ...], tuple[int, ...], tuple[int, ...]], ...]
    """rank, its running / waiting / KV samples."""
    models: tuple[str, ...]
    series: int
    missing: Mapping[str, str]

    def apply(self, values: list[float]) -> tuple[EngineMetrics, dict[str, str]]:
        fsum = math.fsum
        out: dict[str, float] = {}
        missing = dict(self.missing)
        for name, idx, how in self.gauges:
            got = _aggregate([values[i] for i in idx], how)
            if isinstance(got, str):
                missing[name] = got
            else:
                out[name] = got
        for name, idx in self.counters:
            got = _total([values[i] for i in idx])
            if isinstance(got, str):
                missing[name] = got
            else:
                out[name] = got
        histograms: dict[str, Histogram] = {}
        for name, buckets, sums, counts in self.histograms:
            every = [values[i] for _, idx in buckets for i in idx]
            every += [values[i] for i in sums]
            every += [values[i] for i in counts]
            checked = _total(every)
            if isinstance(checked, str):
                missing[name] = checked
                continue
            count = fsum([values[i] for i in counts])
            pairs = [
                (bound, values[idx[0]] if len(idx) == 1 else fsum([values[i] for i in idx]) if idx else count)
                for bound, idx in buckets
            ]
            histograms[name] = Histogram(tuple(pairs), fsum([values[i] for i in sums]), count)
        starts = [values[i] for i in self.process_start if math.isfinite(values[i])]
        if starts:
            out["process_start_time"] = max(starts)
        ranks = tuple(
            RankMetrics(
                rank,
                _known([values[i] for i in run], "sum"),
                _known([values[i] for i in wait], "sum"),
                _known([values[i] for i in kv], "max"),
            )
            for rank, run, wait, kv in self.ranks
        )
        metrics = EngineMetrics(MappingProxyType(out), MappingProxyType(histograms), ranks, self.models, self.series)
        return metrics, missing


def _first_present(index: Mapping[str, list[int]], aliases: tuple[str, ...]) -> list[int] | None:
    for alias in aliases:
        found = index.get(alias)
        if found:
            return found
    return None


def build_plan(heads: list[Head], spec: MetricSpec, series: int | None = None) -> Plan:
    """The plan for samples with these heads (skipped ones already removed; their values are checked when
    the plan is applied).
    `series` is the number of the engine's own series on the page, when counted elsewhere."""
    index: dict[str, list[int]] = {}
    for i, (name, _) in enumerate(heads):
        index.setdefault(name, []).append(i)
    missing: dict[str, str] = dict(spec.not_exposed)
    absent_reason = f"not in this {spec.kind} /metrics page (older or newer version, or metrics disabled)"
    found_names: set[str] = set()

    gauges: list[tuple[str, tuple[int, ...], Agg]] = []
    per_rank: dict[str, dict[str, list[int]]] = {}
    for name, (aliases, how) in spec.gauges.items():
        found = _first_present(index, aliases)
        if found is None:
            missing.setdefault(name, absent_reason)
            continue
        gauges.append((name, tuple(found), how))
        found_names.add(name)
        if spec.rank_label and name in ("requests_running", "requests_waiting", "kv_cache_usage"):
            for i in found:
                rank = label_value(heads[i][1], spec.rank_label) or "0"
                per_rank.setdefault(rank, {}).setdefault(name, []).append(i)
    counters: list[tuple[str, tuple[int, ...]]] = []
    for name, aliases in spec.counters.items():
        found = _first_present(index, aliases)
        if found is None:
            missing.setdefault(name, absent_reason)
            continue
        counters.append((name, tuple(found)))
        found_names.add(name)
    histograms = []
    for name, aliases in spec.histograms.items():
        for base in aliases:
            by_le: dict[float, list[int]] = {}
            for i in index.get(base + "_bucket", []):
                le = label_value(heads[i][1], "le")
                if le is None:
                    continue
                try:
                    by_le.setdefault(float(le), []).append(i)
                except ValueError:
                    continue
            if not by_le:
                continue
            wrong = next((bound for bound in by_le if not bound >= 0), None)  # NaN compares false too
            if wrong is not None:
                # A latency is never negative: such bounds make every quantile a made-up number.
                missing[name] = f'a bucket bound le="{_shown(wrong)}" on the page: not a latency histogram'
                break
            by_le.setdefault(math.inf, [])  # no +Inf bucket: the count stands in for it
            buckets = tuple((bound, tuple(by_le[bound])) for bound in sorted(by_le))
            histograms.append(
                (name, buckets, tuple(index.get(base + "_sum", [])), tuple(index.get(base + "_count", [])))
            )
            found_names.add(name)
            break
        else:
            missing.setdefault(name, absent_reason)
    process_start = tuple(index.get("process_start_time_seconds", []))
    if process_start:
        missing.pop("process_start_time", None)
    ranks = tuple(
        (
            rank,
            tuple(per_rank[rank].get("requests_running", ())),
            tuple(per_rank[rank].get("requests_waiting", ())),
            tuple(per_rank[rank].get("kv_cache_usage", ())),
        )
        for rank in sorted(per_rank, key=lambda r: (len(r), r))
    )
    models: list[str] = []
    for name, labels in heads:
        if spec.prefix and not name.startswith(spec.prefix):
            continue
        for label in spec.model_labels:
            value = label_value(labels, label)
            if value and value not in models:
                models.append(value)
    if series is None:
        series = sum(1 for name, _ in heads if name.startswith(spec.prefix)) if spec.prefix else len(heads)
    for name in found_names:
        missing.pop(name, None)
    return Plan(
        tuple(gauges),
        tuple(counters),
        tuple(histograms),
        process_start,
        ranks,
        tuple(models),
        series,
        MappingProxyType(missing),
    )


def metrics_from_samples(samples: list[Sample], spec: MetricSpec) -> tuple[EngineMetrics, dict[str, str]]:
    """Normalize samples; returns the metrics and, per missing normalized name, why it is unknown."""
    if spec.skip is not None:
        samples = [s for s in samples if not spec.skip(s)]
    heads = [(s.name, s.labels) for s in samples]
    series = sum(1 for s in samples if s.name.startswith(spec.prefix)) if spec.prefix else len(samples)
    plan = build_plan(heads, spec, series)
    return plan.apply([s.value for s in samples])  # a NaN, infinite or negative sample: that metric is unknown


def parse_metrics(
    body: bytes | str, spec: MetricSpec, memo: PageMemo | None = None
) -> tuple[EngineMetrics, dict[str, str], Exposition]:
    """Bytes of a /metrics page -> normalized metrics, the reasons for what is missing, and the raw parse
    (its `bad_lines` count says how many lines were dropped). Raises ParseError when nothing is usable.
    With a memo (one per engine), a page laid out like the last one is read on the fast path."""
    if memo is not None:
        text = decode(body)
        fast = memo.read(text, spec)
        if fast is not None:
            return fast
        body = text
    exposition = parse_exposition(body, spec.wanted, spec.prefix)
    metrics, missing = metrics_from_samples(exposition.samples, spec)
    if exposition.prefixed_lines is not None:
        metrics = replace(metrics, series=exposition.prefixed_lines)
    if memo is not None:
        memo.reviewed(exposition)
    return metrics, missing, exposition
