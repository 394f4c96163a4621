"""Values derived over the window between polls: rates from counter deltas that survive restarts,
latency means and quantiles from histogram bucket deltas, hit and acceptance rates.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from poolconsole.model.snapshots import COUNTERS, EngineSnapshot, Histogram


def counter_delta(before: float, after: float, reset: bool) -> float:
    """Increase of a counter; after a restart (or any decrease) the new value is all increase since it.
    Never negative: a counter below 0 is no count (the collector leaves such a value unknown; this holds for
    whatever else feeds it, a recording included)."""
    if reset or after < before or before < 0:
        return max(0.0, after)
    return after - before


def histogram_delta(before: Histogram, after: Histogram, reset: bool) -> Histogram:
    if reset or after.count < before.count:
        return after
    buckets: tuple[tuple[float, float], ...] | None = None
    if len(before.buckets) == len(after.buckets):  # the usual case, the same bounds poll after poll: pairwise
        pairs = []
        for (le, count), (old_le, old) in zip(after.buckets, before.buckets, strict=True):
            if le != old_le:  # a bound moved (or is NaN): by bound, below
                break
            pairs.append((le, count - old if count > old else 0.0))
        else:
            buckets = tuple(pairs)
    if buckets is None:
        prev = dict(before.buckets)
        buckets = tuple((le, max(0.0, count - prev.get(le, 0.0))) for le, count in after.buckets)
    return Histogram(buckets, max(0.0, after.sum - before.sum), max(0.0, after.count - before.count))


def add_histograms(a: Histogram | None, b: Histogram) -> Histogram:
    if a is None:
        return b
    merged: dict[float, float] = dict(a.buckets)
    for le, count in b.buckets:
        merged[le] = merged.get(le, 0.0) + count
    return Histogram(tuple(sorted(merged.items())), a.sum + b.sum, a.count + b.count)


def quantile(q: float, hist: Histogram) -> float | None:
    """Prometheus' histogram_quantile: linear interpolation inside the bucket holding the rank. Unknown
    when a bound is negative or NaN: a latency is never negative, and such bounds make up the answer."""
    return _quantile(q, hist) if _bounds_usable(hist) else None


def _bounds_usable(hist: Histogram) -> bool:
    """A count, buckets, and every bound >= 0 (NaN is not): checked once a histogram, not once a quantile."""
    return hist.count > 0 and bool(hist.buckets) and all(bound >= 0 for bound, _ in hist.buckets)


def _quantile(q: float, hist: Histogram) -> float | None:
    """quantile() on a histogram whose bounds _bounds_usable() accepted."""
    rank = q * hist.count
    lower_bound, lower_count = 0.0, 0.0
    for bound, cumulative in hist.buckets:
        if cumulative >= rank:
            if math.isinf(bound):
                return lower_bound if lower_bound > 0 else None
            span = cumulative - lower_count
            if span <= 0:
                return bound
            return lower_bound + (bound - lower_bound) * (rank - lower_count) / span
        lower_bound, lower_count = bound, cumulative
    return None


@dataclass(frozen=True)
class LatencyStats:
    mean: float | None
    p50: float | None
    p95: float | None
    count: float
    window: str
    """'window' (requests finished between the polls) or 'lifetime' (since the engine started)."""


def latency(hist: Histogram | None, window: str) -> LatencyStats | None:
    if hist is None or hist.count <= 0:
        return None
    mean = hist.sum / hist.count
    known = math.isfinite(mean) and mean >= 0
    if not _bounds_usable(hist):
        return LatencyStats(mean if known else None, None, None, hist.count, window)
    return LatencyStats(mean if known else None, _quantile(0.5, hist), _quantile(0.95, hist), hist.count, window)


@dataclass(frozen=True)
class Derived:
    """What happened over a window of polls of one engine."""

    seconds: float
    resets: int
    deltas: dict[str, float] = field(default_factory=dict)
    histograms: dict[str, Histogram] = field(default_factory=dict)

    def rate(self, counter: str) -> float | None:
        if self.seconds <= 0 or counter not in self.deltas:
            return None
        return self.deltas[counter] / self.seconds


def derive(samples: Sequence[EngineSnapshot]) -> Derived:
    """Accumulate counter and histogram deltas over consecutive pairs of good polls."""
    good = [s for s in samples if s.metrics is not None]
    deltas: dict[str, float] = {}
    hists: dict[str, Histogram] = {}
    seconds = 0.0
    resets = 0
    for before, after in itertools.pairwise(good):
        assert before.metrics is not None and after.metrics is not None
        marker_changed = (
            before.restart_marker is not None
            and after.restart_marker is not None
            and before.restart_marker != after.restart_marker
        )
        was, now = before.metrics.values, after.metrics.values
        pairs = [(name, was[name], now[name]) for name in COUNTERS if name in was and name in now]
        reset = marker_changed or any(value < old for _, old, value in pairs)
        resets += int(reset)
        seconds += max(0.0, after.monotonic - before.monotonic)
        for name, old, value in pairs:
            deltas[name] = deltas.get(name, 0.0) + counter_delta(old, value, reset)
        for name, hist in after.metrics.histograms.items():
            prev = before.metrics.histograms.get(name)
            if prev is not None:
                hists[name] = add_histograms(hists.get(name), histogram_delta(prev, hist, reset))
    return Derived(seconds, resets, deltas, hists)


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or denominator is None or denominator <= 0:
        return None
    return numerator / denominator
