"""Mapping an engine's Prometheus samples onto the normalized vocabulary, with aliases per version."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from types import MappingProxyType
from typing import Literal

from poolconsole.collect.prom import Exposition, Sample, by_name, parse_exposition
from poolconsole.model.snapshots import EngineMetrics, Histogram, RankMetrics

Agg = Literal["sum", "max", "mean"]


@dataclass(frozen=True, eq=False)
class MetricSpec:
    """How one engine names things. Aliases are listed newest first; the first one present wins."""

    kind: str
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


def _aggregate(values: list[float], how: Agg) -> float:
    if how == "sum":
        return math.fsum(values)
    if how == "max":
        return max(values)
    return math.fsum(values) / len(values)


def _first_present(index: Mapping[str, list[Sample]], aliases: tuple[str, ...]) -> list[Sample] | None:
    for alias in aliases:
        found = index.get(alias)
        if found:
            return found
    return None


def _histogram(index: Mapping[str, list[Sample]], aliases: tuple[str, ...]) -> Histogram | None:
    for base in aliases:
        buckets = index.get(base + "_bucket")
        if not buckets:
            continue
        by_le: dict[float, float] = {}
        for s in buckets:
            le = s.label("le")
            if le is None:
                continue
            try:
                bound = float(le)
            except ValueError:
                continue
            by_le[bound] = by_le.get(bound, 0.0) + s.value
        if not by_le:
            continue
        total = math.fsum(s.value for s in index.get(base + "_sum", []))
        count = math.fsum(s.value for s in index.get(base + "_count", []))
        if math.inf not in by_le:
            by_le[math.inf] = count
        return Histogram(tuple(sorted(by_le.items())), total, count)
    return None


def metrics_from_samples(samples: list[Sample], spec: MetricSpec) -> tuple[EngineMetrics, dict[str, str]]:
    """Normalize samples; returns the metrics and, per missing normalized name, why it is unknown."""
    if spec.skip is not None:
        samples = [s for s in samples if not spec.skip(s)]
    valid = [s for s in samples if math.isfinite(s.value)]
    index = by_name(valid)
    values: dict[str, float] = {}
    missing: dict[str, str] = dict(spec.not_exposed)
    absent_reason = f"not in this {spec.kind} /metrics page (older or newer version, or metrics disabled)"

    rank_values: dict[str, dict[str, list[float]]] = {}
    for name, (aliases, how) in spec.gauges.items():
        found = _first_present(index, aliases)
        if found is None:
            missing.setdefault(name, absent_reason)
            continue
        values[name] = _aggregate([s.value for s in found], how)
        if spec.rank_label and name in ("requests_running", "requests_waiting", "kv_cache_usage"):
            for s in found:
                rank = s.label(spec.rank_label) or "0"
                rank_values.setdefault(rank, {}).setdefault(name, []).append(s.value)
    for name, aliases in spec.counters.items():
        found = _first_present(index, aliases)
        if found is None:
            missing.setdefault(name, absent_reason)
            continue
        values[name] = math.fsum(s.value for s in found)
    histograms: dict[str, Histogram] = {}
    for name, aliases in spec.histograms.items():
        hist = _histogram(index, aliases)
        if hist is None:
            missing.setdefault(name, absent_reason)
        else:
            histograms[name] = hist
    process_start = index.get("process_start_time_seconds")
    if process_start:
        values["process_start_time"] = max(s.value for s in process_start)
        missing.pop("process_start_time", None)

    ranks: list[RankMetrics] = []
    for rank in sorted(rank_values, key=lambda r: (len(r), r)):
        got = rank_values[rank]
        ranks.append(
            RankMetrics(
                rank,
                math.fsum(got["requests_running"]) if "requests_running" in got else None,
                math.fsum(got["requests_waiting"]) if "requests_waiting" in got else None,
                max(got["kv_cache_usage"]) if "kv_cache_usage" in got else None,
            )
        )
    models: list[str] = []
    for s in valid:
        if spec.prefix and not s.name.startswith(spec.prefix):
            continue
        for label in spec.model_labels:
            value = s.label(label)
            if value and value not in models:
                models.append(value)
    engine_series = sum(1 for s in samples if s.name.startswith(spec.prefix)) if spec.prefix else len(samples)
    for name in values:
        missing.pop(name, None)
    for name in histograms:
        missing.pop(name, None)
    return (
        EngineMetrics(
            MappingProxyType(values),
            MappingProxyType(histograms),
            tuple(ranks),
            tuple(models),
            engine_series,
        ),
        missing,
    )


def parse_metrics(body: bytes | str, spec: MetricSpec) -> tuple[EngineMetrics, dict[str, str], Exposition]:
    """Bytes of a /metrics page -> normalized metrics, the reasons for what is missing, and the raw parse
    (its `bad_lines` count says how many lines were dropped). Raises ParseError when nothing is usable."""
    exposition = parse_exposition(body, spec.wanted, spec.prefix)
    metrics, missing = metrics_from_samples(exposition.samples, spec)
    if exposition.prefixed_lines is not None:
        metrics = replace(metrics, series=exposition.prefixed_lines)
    return metrics, missing, exposition
