"""The operator's view of one engine, computed from its recent polls. The CLI's JSON and the console
both read this; field names of `to_json` are a contract (issue 2).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from poolconsole.config.models import EngineKind
from poolconsole.model.rates import Derived, LatencyStats, derive, latency, ratio
from poolconsole.model.snapshots import EngineSnapshot, EngineState


@dataclass(frozen=True)
class EngineView:
    name: str
    kind: EngineKind
    host: str | None
    url: str
    state: EngineState
    error: str | None
    models: list[str]
    requests_running: float | None
    requests_waiting: float | None
    kv_cache_usage: float | None
    prompt_tokens_total: float | None
    generation_tokens_total: float | None
    generation_tokens_per_s: float | None
    prompt_tokens_per_s: float | None
    ttft_mean_s: float | None
    prefix_cache_hit_rate: float | None
    spec_decode_acceptance_rate: float | None
    preemptions_total: float | None
    ranks: int | None
    # beyond the contract
    version: str | None = None
    source: str = ""
    latency_ms: float | None = None
    polled_at: float | None = None
    last_ok_at: float | None = None
    window_s: float | None = None
    counter_resets: int = 0
    increase: dict[str, float] = field(default_factory=dict)
    """Each counter's reset-safe increase over the window (since the previous poll that read metrics)."""
    progress_total: float | None = None
    """The engine's count of work steps, where its metric spec declares one (`progress_total`): it moves at
    every step of the requests in progress, prefill and generation alike (llama.cpp's `n_decode_total`, its
    llama_decode calls, where `tokens_predicted_total` moves only when a request ends). None for a kind that
    declares none (its generation counter is its progress), or with a reason in `unknown` when the engine
    does not expose it."""
    ttft_p50_s: float | None = None
    ttft_p95_s: float | None = None
    ttft_window: str | None = None
    itl_mean_s: float | None = None
    itl_p95_s: float | None = None
    engine_reported_generation_tokens_per_s: float | None = None
    rank_detail: list[dict[str, Any]] = field(default_factory=list)
    unknown: dict[str, str] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _lat(samples: Sequence[EngineSnapshot], name: str, window_hist: Any) -> LatencyStats | None:
    stats = latency(window_hist, "window")
    if stats is not None:
        return stats
    last = samples[-1].metrics
    return latency(last.histograms.get(name) if last else None, "lifetime")


SPEED_GAUGES = frozenset({EngineKind.LLAMACPP})
"""Engines whose tokens-per-second gauges are the speed of the requests while they ran, not the engine's
throughput: llama.cpp's prompt_tokens_seconds read 1,657 tok/s (prefill speed) on a poll whose prompt
tokens per second of wall time were 40. Their first poll has no rate (n/a), not a spike."""


def _rate_or_lifetime(
    window_num: float | None, window_den: float | None, life_num: float | None, life_den: float | None
) -> float | None:
    value = ratio(window_num, window_den)
    return value if value is not None else ratio(life_num, life_den)


def engine_view(samples: Sequence[EngineSnapshot]) -> EngineView:
    """Summarise the polls of one engine (oldest first). Numbers are null when unknown, never 0."""
    if not samples:
        raise ValueError("engine_view needs at least one snapshot")
    last = samples[-1]
    ok_samples = [s for s in samples if s.state is not EngineState.DOWN and s.metrics is not None]
    current = last.metrics if last.state is not EngineState.DOWN else None
    derived = derive(samples) if current is not None else None
    missing = dict(last.missing)

    def gauge(name: str) -> float | None:
        return current.get(name) if current else None

    gen_rate = derived.rate("generation_tokens_total") if derived else None
    prompt_rate = derived.rate("prompt_tokens_total") if derived else None
    if last.kind not in SPEED_GAUGES:  # a throughput gauge stands in for the rate until two polls give one
        if gen_rate is None:
            gen_rate = gauge("generation_tokens_per_s_gauge")
        if prompt_rate is None:
            prompt_rate = gauge("prompt_tokens_per_s_gauge")

    d = derived.deltas if derived else {}
    hit_rate = _rate_or_lifetime(
        d.get("prefix_cache_hits_total"),
        d.get("prefix_cache_queries_total"),
        gauge("prefix_cache_hits_total"),
        gauge("prefix_cache_queries_total"),
    )
    if hit_rate is None:
        hit_rate = gauge("prefix_cache_hit_rate_gauge")
    accept = _rate_or_lifetime(
        d.get("spec_decode_accepted_tokens_total"),
        d.get("spec_decode_draft_tokens_total"),
        gauge("spec_decode_accepted_tokens_total"),
        gauge("spec_decode_draft_tokens_total"),
    )
    if accept is None:
        accept = gauge("spec_decode_acceptance_rate_gauge")

    ttft = _lat(samples, "ttft", derived.histograms.get("ttft") if derived else None) if current else None
    itl = _lat(samples, "itl", derived.histograms.get("itl") if derived else None) if current else None
    ranks = (len(current.ranks) or 1) if current is not None else None

    details: dict[str, Any] = {}
    if last.slots is not None:
        details["slots"] = {
            "total": last.slots.total_slots,
            "busy": last.slots.busy_slots,
            "ctx_total": last.slots.ctx_total,
            "ctx_used": last.slots.ctx_used,
        }
    if last.ollama_models:
        details["loaded_models"] = [
            {
                "name": m.name,
                "size_bytes": m.size_bytes,
                "size_vram_bytes": m.size_vram_bytes,
                "partial_offload": m.partial_offload,
                "context_length": m.context_length,
                "expires_at": m.expires_at,
                "quantization": m.quantization,
            }
            for m in last.ollama_models
        ]
    details.update(dict(last.extra))

    view = EngineView(
        name=last.name,
        kind=last.kind,
        host=last.host,
        url=last.url,
        state=last.state,
        error=last.error,
        models=list(last.models) or (list(current.model_names) if current else []),
        requests_running=gauge("requests_running"),
        requests_waiting=gauge("requests_waiting"),
        kv_cache_usage=gauge("kv_cache_usage"),
        prompt_tokens_total=gauge("prompt_tokens_total"),
        generation_tokens_total=gauge("generation_tokens_total"),
        generation_tokens_per_s=gen_rate,
        prompt_tokens_per_s=prompt_rate,
        ttft_mean_s=ttft.mean if ttft else None,
        prefix_cache_hit_rate=hit_rate,
        spec_decode_acceptance_rate=accept,
        preemptions_total=gauge("preemptions_total"),
        ranks=ranks,
        version=last.version,
        source=last.source,
        latency_ms=round(last.latency_s * 1000, 1) if last.latency_s is not None else None,
        polled_at=last.fetched_at,
        last_ok_at=ok_samples[-1].fetched_at if ok_samples else None,
        window_s=round(derived.seconds, 3) if derived else None,
        counter_resets=derived.resets if derived else 0,
        increase=dict(derived.deltas) if derived else {},
        progress_total=gauge("progress_total"),
        ttft_p50_s=ttft.p50 if ttft else None,
        ttft_p95_s=ttft.p95 if ttft else None,
        ttft_window=ttft.window if ttft else None,
        itl_mean_s=itl.mean if itl else None,
        itl_p95_s=itl.p95 if itl else None,
        engine_reported_generation_tokens_per_s=gauge("generation_tokens_per_s_gauge"),
        rank_detail=[
            {
                "rank": r.rank,
                "requests_running": r.requests_running,
                "requests_waiting": r.requests_waiting,
                "kv_cache_usage": r.kv_cache_usage,
            }
            for r in (current.ranks if current else ())
        ],
        details=details,
    )
    view.unknown.update(_unknown_reasons(view, missing, derived))  # its own new dict: the view is not shared yet
    return view


_DIRECT = (
    "requests_running",
    "requests_waiting",
    "kv_cache_usage",
    "prompt_tokens_total",
    "generation_tokens_total",
    "preemptions_total",
)


ONE_POLL = "needs two polls: a rate is the change between two, and this is the first (status: --samples 2 or more)"
"""Why a rate is unknown on an engine's first poll: in the console, a recording or `status --samples 1`."""


def _unknown_reasons(view: EngineView, missing: dict[str, str], derived: Derived | None) -> dict[str, str]:
    """For every contract field that is null, say why."""
    out: dict[str, str] = {}
    fallback = missing.get("requests_running", "unknown")
    for name in _DIRECT:
        if getattr(view, name) is None:
            out[name] = missing.get(name, fallback)
    one_poll = derived is not None and derived.seconds <= 0
    for name, counter in (
        ("generation_tokens_per_s", "generation_tokens_total"),
        ("prompt_tokens_per_s", "prompt_tokens_total"),
    ):
        if getattr(view, name) is None:
            out[name] = missing.get(counter) or (ONE_POLL if one_poll else fallback)
    if view.ttft_mean_s is None:
        out["ttft_mean_s"] = missing.get("ttft") or "no request has finished yet"
    if view.prefix_cache_hit_rate is None:
        out["prefix_cache_hit_rate"] = (
            missing.get("prefix_cache_queries_total") if "prefix_cache_hit_rate_gauge" in missing else None
        ) or "no prefix-cache lookups yet"
    if view.spec_decode_acceptance_rate is None:
        said = missing.get("spec_decode_draft_tokens_total")
        unread = said is not None and (view.state is not EngineState.OK or said == missing.get("requests_running"))
        # down, or no engine metrics at all (Ollama; a LiteLLM gateway): why nothing was read, not "off"
        out["spec_decode_acceptance_rate"] = (
            said if unread and said else "speculative decoding is off (no draft tokens)"
        )
    if view.ranks is None:
        out["ranks"] = fallback
    if view.progress_total is None and "progress_total" in missing:  # declared by its spec, and not read
        out["progress_total"] = missing["progress_total"]
    return out
