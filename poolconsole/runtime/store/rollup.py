"""Rollups: one row for the polls of one target and minute. Every field a stored poll carries has a rule
here, one table per model (the engine view, the host snapshot and what it nests); a test holds each table
to its model's fields, so a field added to a model fails it until it is given a rule."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import Enum
from typing import Any

from poolconsole.model.states import severity_of


class Rule(Enum):
    """How a minute's values of one field become one. A value that is not a number (text, a flag) is
    always the last poll's; `state` and `error` are the worst poll's (rollup)."""

    MEAN = "mean"
    """Gauges and rates: the weighted mean of the known values (None when none was known)."""
    LAST = "last"
    """Identities, capacities, timestamps and counters: the last known value."""
    SUM = "sum"
    """What each poll counted for itself (counter resets, the window its rates cover)."""
    EACH = "each"
    """A nested object or list of objects: merged field by field, each by its own rule."""
    SUM_EACH = "sum each"
    """An object of per-poll increases: every value summed."""
    WHOLE = "whole"
    """Kept whole as the last poll had it (running totals, details, lists of names)."""


ENGINE_RULES: Mapping[str, Rule] = {
    "name": Rule.LAST,
    "kind": Rule.LAST,
    "host": Rule.LAST,
    "url": Rule.LAST,
    "state": Rule.LAST,
    "error": Rule.LAST,
    "models": Rule.WHOLE,
    "requests_running": Rule.MEAN,
    "requests_waiting": Rule.MEAN,
    "kv_cache_usage": Rule.MEAN,
    "prompt_tokens_total": Rule.LAST,
    "generation_tokens_total": Rule.LAST,
    "generation_tokens_per_s": Rule.MEAN,
    "prompt_tokens_per_s": Rule.MEAN,
    "ttft_mean_s": Rule.MEAN,
    "prefix_cache_hit_rate": Rule.MEAN,
    "spec_decode_acceptance_rate": Rule.MEAN,
    "preemptions_total": Rule.LAST,
    "ranks": Rule.LAST,
    "version": Rule.LAST,
    "source": Rule.LAST,
    "latency_ms": Rule.MEAN,
    "polled_at": Rule.LAST,
    "last_ok_at": Rule.LAST,
    "window_s": Rule.SUM,
    "counter_resets": Rule.SUM,
    "increase": Rule.SUM_EACH,
    "progress_total": Rule.LAST,
    "ttft_p50_s": Rule.MEAN,
    "ttft_p95_s": Rule.MEAN,
    "ttft_window": Rule.LAST,
    "itl_mean_s": Rule.MEAN,
    "itl_p95_s": Rule.MEAN,
    "engine_reported_generation_tokens_per_s": Rule.MEAN,
    "rank_detail": Rule.EACH,
    "unknown": Rule.WHOLE,
    "details": Rule.WHOLE,
    "totals": Rule.WHOLE,
}
"""EngineView's fields, and the running totals stored with them."""

RANK_RULES: Mapping[str, Rule] = {
    "rank": Rule.LAST,
    "requests_running": Rule.MEAN,
    "requests_waiting": Rule.MEAN,
    "kv_cache_usage": Rule.MEAN,
}
"""An entry of EngineView.rank_detail."""

HOST_RULES: Mapping[str, Rule] = {
    "name": Rule.LAST,
    "state": Rule.LAST,
    "error": Rule.LAST,
    "source": Rule.LAST,
    "memory_kind": Rule.LAST,
    "gpus": Rule.EACH,
    "system_memory": Rule.EACH,
    "rtt_ms": Rule.MEAN,
    "address": Rule.LAST,
    "driver": Rule.LAST,
    "processes": Rule.WHOLE,
    "engine_gpus": Rule.WHOLE,
    "notes": Rule.WHOLE,
    "polled_at": Rule.LAST,
}
"""HostSnapshot.to_json's fields."""

GPU_RULES: Mapping[str, Rule] = {
    "index": Rule.LAST,
    "name": Rule.LAST,
    "uuid": Rule.LAST,
    "memory_total_bytes": Rule.LAST,
    "memory_used_bytes": Rule.MEAN,
    "utilization_pct": Rule.MEAN,
    "temperature_c": Rule.MEAN,
    "power_w": Rule.MEAN,
    "power_limit_w": Rule.LAST,
    "memory_free_bytes": Rule.MEAN,
    "memory_reserved_bytes": Rule.MEAN,
    "sm_clock_mhz": Rule.MEAN,
    "mem_clock_mhz": Rule.MEAN,
    "pcie_gen": Rule.LAST,
    "pcie_width": Rule.LAST,
    "memory_source": Rule.LAST,
    "pci_bus_id": Rule.LAST,
    # As the rollups have always stored them (no behaviour change in the split); a mean of a constant is
    # the constant, but a bitmask or a counter that moved within the minute is averaged.
    "pcie_gen_max": Rule.MEAN,
    "pcie_width_max": Rule.MEAN,
    "clock_event_reasons": Rule.MEAN,
    "ecc_uncorrected": Rule.MEAN,
    "remapped_rows_pending": Rule.LAST,
    "retired_pages_pending": Rule.LAST,
    "xids": Rule.WHOLE,
}
"""GpuReading's fields (HostSnapshot.gpus)."""

MEMORY_RULES: Mapping[str, Rule] = {
    "total_bytes": Rule.LAST,
    "available_bytes": Rule.MEAN,
    "swap_used_bytes": Rule.MEAN,
    "swap_total_bytes": Rule.LAST,
    "pressure": Rule.LAST,
}
"""SystemMemory's fields (HostSnapshot.system_memory)."""

PROCESS_RULES: Mapping[str, Rule] = {
    "pid": Rule.LAST,
    "name": Rule.LAST,
    "gpu_uuid": Rule.LAST,
    "used_memory_bytes": Rule.MEAN,
    "engine": Rule.LAST,
}
"""GpuProcess's fields (HostSnapshot.processes, kept whole: the rules say what a merge would do)."""

TABLES: Mapping[str, Mapping[str, Rule]] = {
    "engine": ENGINE_RULES,
    "rank": RANK_RULES,
    "host": HOST_RULES,
    "gpu": GPU_RULES,
    "memory": MEMORY_RULES,
    "process": PROCESS_RULES,
}


def _by_name() -> dict[str, Rule]:
    """The rows are JSON, merged by key: a name has one rule wherever it appears."""
    out: dict[str, Rule] = {}
    for table, rules in TABLES.items():
        for name, rule in rules.items():
            if out.setdefault(name, rule) is not rule:
                raise ValueError(f"rollup rules: {name!r} is {out[name].value} elsewhere, {rule.value} in {table}")
    return out


RULES = _by_name()


def _merge(values: Sequence[Any], weights: Sequence[int], key: str, mode: str) -> Any:
    last = values[-1]
    rule = RULES.get(key)
    if isinstance(last, dict):
        if rule is Rule.WHOLE:
            return last
        child = "sum" if rule is Rule.SUM_EACH else mode
        pairs = [(v, w) for v, w in zip(values, weights, strict=True) if isinstance(v, dict)]
        keys = dict.fromkeys([*last, *(k for v, _ in pairs for k in v)])  # the last poll's order first
        return {k: _merge([v.get(k) for v, _ in pairs], [w for _, w in pairs], k, child) for k in keys}
    if isinstance(last, list):
        same = all(isinstance(v, list) and len(v) == len(last) for v in values)
        if rule is Rule.WHOLE or not same or not all(isinstance(e, dict) for e in last):
            return last
        return [_merge([v[i] for v in values], weights, "", mode) for i in range(len(last))]
    if isinstance(last, bool) or not isinstance(last, int | float | None):
        return last
    known = [
        (v, w) for v, w in zip(values, weights, strict=True) if isinstance(v, int | float) and not isinstance(v, bool)
    ]
    if not known:
        return None
    if mode == "sum" or rule is Rule.SUM:
        return sum(v for v, _ in known)
    if rule is Rule.LAST or (rule is None and key.endswith("_total")):  # a counter among a dict's own keys
        return known[-1][0]
    mean = sum(v * w for v, w in known) / sum(w for _, w in known)
    if all(isinstance(v, int) for v, _ in known):
        return round(mean)
    return float(f"{mean:.6g}")  # 6 significant digits: 17 digits of a mean deflate to 3x the bytes


def rollup(weighted: Sequence[tuple[dict[str, Any], int]]) -> dict[str, Any]:
    """One row for several polls of one target (oldest first, each with the number of polls it stands for):
    each field by its rule (to 6 significant digits for a mean); `state` and `error` are the worst poll's
    (down beats degraded beats ok), so an outage shows."""
    docs = [d for d, _ in weighted]
    weights = [w for _, w in weighted]
    out: dict[str, Any] = _merge(docs, weights, "", "mean")
    worst = max(range(len(docs)), key=lambda i: (severity_of(docs[i].get("state")), i))
    out["state"], out["error"] = docs[worst].get("state"), docs[worst].get("error")
    if "unknown" in out:  # why a field is null, for the fields the rollup left null
        reasons: dict[str, Any] = {}
        for doc in docs:
            reasons.update(doc.get("unknown") or {})
        out["unknown"] = {k: v for k, v in reasons.items() if out.get(k) is None}
    return out
