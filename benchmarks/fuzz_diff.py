"""The differential of benchmarks/fuzz.py (issue 35, deliverable 3): prom.py's fast path, its selection and a page
memo against prometheus_client's parser, which is right where they differ."""

from __future__ import annotations

import math
from typing import Any

from poolconsole.collect import prom, prom_select
from poolconsole.collect.engines import specs
from poolconsole.collect.engines.mapping import MetricSpec, metrics_from_samples, parse_metrics
from poolconsole.collect.engines.page_memo import PageMemo
from poolconsole.collect.prom import ParseError
from poolconsole.model.snapshots import EngineMetrics

Key = tuple[str, tuple[tuple[str, str], ...], tuple[bool, float]]
"""A sample as compared: NaN equals NaN (and sorts after every number)."""


def reference_samples(text: str) -> list[prom.Sample] | None:
    """prometheus_client's samples of a page, normalised as prom.py normalises (`_created` dropped, `vllm_x`
    read as `vllm:x`, labels sorted); None when prometheus_client refuses the page."""
    from prometheus_client.parser import text_string_to_metric_families

    try:
        families = list(text_string_to_metric_families(text))
    except Exception:  # it raises ValueError, IndexError, KeyError, TypeError...
        return None
    out: list[prom.Sample] = []
    for family in families:
        for s in family.samples:
            if s.name.endswith("_created"):
                continue
            name = prom_select.normalise_name(s.name)
            out.append(prom.Sample(name, tuple(sorted(s.labels.items())), _float(s.value)))
    return out


def _float(value: float) -> float:
    """prometheus_client keeps an integer past a float's range as an int: it reads as the infinity that
    float() of its text gives (prom.py's reading), not an OverflowError in the comparison."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def sample_keys(samples: list[prom.Sample]) -> list[Key]:
    return sorted((s.name, s.labels, (True, 0.0) if math.isnan(s.value) else (False, s.value)) for s in samples)


def metric_keys(metrics: EngineMetrics, missing: dict[str, str]) -> dict[str, Any]:
    """What a page's read gives the model, for comparison (the series count aside: the careful read counts
    sample lines, the reference its samples)."""
    return {
        "values": dict(metrics.values),
        "histograms": {k: (h.buckets, h.sum, h.count) for k, h in metrics.histograms.items()},
        "ranks": metrics.ranks,
        "models": metrics.model_names,
        "missing": dict(sorted(missing.items())),
    }


def differences(text: str, spec: MetricSpec = specs.VLLM, memo: PageMemo | None = None) -> list[str]:
    """Where prometheus_client accepts the page: how prom.py's fast path, its selection and a page memo that
    learnt `text`'s layout differ from it (empty when they agree, or when prometheus_client refuses)."""
    try:
        prom.decode(text)
    except ParseError:
        return []  # refused before any parsing, on purpose (NUL bytes, HTML, JSON): no page to compare
    reference = reference_samples(text)
    if reference is None:
        return []
    found: list[str] = []
    expected = sample_keys(reference)
    fast = prom._fast(text)
    if fast is not None and sample_keys(fast) != expected:
        found.append(f"fast path: {_diff(sample_keys(fast), expected)}")
    wanted = prom_select.exposed(spec.wanted)
    expected_wanted = [k for k in expected if _selected(k[0], spec)]
    try:
        selected = prom.parse_exposition(text, spec.wanted, spec.prefix)
    except ParseError as exc:
        if expected_wanted:  # refusing a page of garbage names (`\x08vllm:x{...}`, read by none) loses nothing
            found.append(f"selection refused a page whose wanted samples prometheus_client reads: {exc}")
        return found
    got = [k for k in sample_keys(selected.samples) if _selected(k[0], spec)]  # selection is a pre-filter: it
    # may keep a line of a wanted family's block that is no wanted sample (`vllm:x_to;tal{...}`), read by none
    if got != expected_wanted:
        found.append(f"selection ({sorted(wanted)[:3]}...): {_diff(got, expected_wanted)}")
    want_metrics = metric_keys(*metrics_from_samples([s for s in reference if _selected(s.name, spec)], spec))
    careful, missing, _ = parse_metrics(text, spec)
    if metric_keys(careful, missing) != want_metrics:
        found.append("careful read: " + _diff_dict(metric_keys(careful, missing), want_metrics))
    if memo is not None:
        try:
            fast_metrics, fast_missing, _ = parse_metrics(text, spec, memo)
        except ParseError as exc:
            found.append(f"page memo refused a page prometheus_client reads: {exc}")
        else:
            if metric_keys(fast_metrics, fast_missing) != want_metrics:
                found.append("page memo: " + _diff_dict(metric_keys(fast_metrics, fast_missing), want_metrics))
    return found


def _selected(name: str, spec: MetricSpec) -> bool:
    """A sample the selection keeps: its line's name is wanted (a counter's sample gains `_total` after)."""
    return name in spec.wanted or name.removesuffix("_total") in spec.wanted


def _diff(got: list[Key], want: list[Key]) -> str:
    extra = [k for k in got if k not in want][:2]
    lost = [k for k in want if k not in got][:2]
    return f"{len(got)} samples vs prometheus_client's {len(want)}; ours only: {extra}; theirs only: {lost}"


def _diff_dict(got: dict[str, Any], want: dict[str, Any]) -> str:
    return "; ".join(f"{k}: {got[k]!r:.200} != {want[k]!r:.200}" for k in want if got.get(k) != want[k])
