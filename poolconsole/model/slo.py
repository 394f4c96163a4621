"""The slo_burn rule's arithmetic (issue 37), pure: a TTFT objective's error ratio from histogram buckets,
running totals that survive counter resets, and Google's multi-window burn-rate alerts (The Site
Reliability Workbook, "Alerting on SLOs"): the error ratio over a window divided by the error budget
(1 - objective); 1 h and 5 min both above 14.4 page (2% of a 30-day budget in an hour), 6 h and 30 min
both above 6 warn (5% in six hours). The short window makes an alert clear soon after the burn stops."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass

from poolconsole.model.snapshots import Histogram

PAGE = (3600.0, 300.0, 14.4)
"""(long window s, short window s, burn factor) that pages (critical)."""
WARN = (21600.0, 1800.0, 6.0)
"""(long window s, short window s, burn factor) that warns."""
COVERED = 0.9
"""A window's burn rate is known once the samples span this share of it: a first start does not read a few
seconds of slow requests as an hour's burn (the samples kept beside the store carry a restart over)."""
KEEP_S = WARN[0] + 600.0
"""Samples kept: the longest window and a little more."""


def within(hist: Histogram, ttft_s: float) -> tuple[float, float]:
    """(requests within ttft_s, all requests) of a cumulative histogram: the largest bucket bound at or under
    the threshold (between two bounds a request is not proven fast, so it counts as slow)."""
    good = 0.0
    for bound, cumulative in hist.buckets:
        if bound <= ttft_s * (1 + 1e-9):
            good = cumulative
    return good, hist.count


@dataclass
class Totals:
    """Running totals of one objective's requests (within, all), fed each engine's cumulative counts: a
    count that fell is a restart, and its new value is the increase."""

    good: float = 0.0
    all: float = 0.0
    last: dict[str, tuple[float, float]] | None = None

    def add(self, source: str, good: float, count: float) -> None:
        last = self.last if self.last is not None else {}
        self.last = last
        before = last.get(source)
        last[source] = (good, count)
        if before is None:
            return  # the first read: a baseline, not an increase
        reset = count < before[1] or good < before[0]
        self.good += good if reset else good - before[0]
        self.all += count if reset else count - before[1]


@dataclass(frozen=True)
class Sample:
    at: float
    good: float
    all: float


def burn(samples: Sequence[Sample], now: float, window_s: float, objective: float) -> float | None:
    """The burn rate over the window ending at the last sample: the error ratio of the requests in it over the
    error budget. None while the samples span less than COVERED of it, or without a request in it (no
    traffic burns nothing, and an unknown is no alert)."""
    if not samples:
        return None
    end = samples[-1]
    first = bisect_left(samples, now - window_s, key=lambda s: s.at)  # samples are in time order
    if first >= len(samples) - 1:
        return None
    start = samples[first]
    if end.at - start.at < COVERED * window_s:
        return None  # a watcher without the window's history (a first start): unknown, not the last minute's
    requests = end.all - start.all
    if requests <= 0:
        return None
    errors = max(0.0, requests - (end.good - start.good))
    return (errors / requests) / (1 - objective)


def level(samples: Sequence[Sample], now: float, objective: float) -> tuple[bool, bool, dict[str, float | None]]:
    """(pages: 1 h and 5 min over 14.4x, warns: 6 h and 30 min over 6x, the four burn rates by window)."""
    rates = {
        name: burn(samples, now, window, objective)
        for name, window in (("1h", PAGE[0]), ("5m", PAGE[1]), ("6h", WARN[0]), ("30m", WARN[1]))
    }

    def over(a: str, b: str, factor: float) -> bool:
        x, y = rates[a], rates[b]
        return x is not None and y is not None and x > factor and y > factor

    return over("1h", "5m", PAGE[2]), over("6h", "30m", WARN[2]), rates


def said(rates: dict[str, float | None]) -> str:
    """The burn rates in words: "burn 20x over 1 h, 31x over 5 min, ..." (n/a where unknown)."""
    words = {"1h": "1 h", "5m": "5 min", "6h": "6 h", "30m": "30 min"}
    return ", ".join(f"{'n/a' if v is None else f'{v:.1f}x'} over {words[k]}" for k, v in rates.items())
