"""Immutable snapshots: what one poll of one target saw.

Unknown is None with a reason in `missing`, never 0: a metric an engine does not expose is not a
metric that is zero.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any

from poolconsole.config.models import EngineKind

EMPTY: MappingProxyType[str, Any] = MappingProxyType({})


def _empty() -> MappingProxyType[str, Any]:
    return EMPTY


class EngineState(StrEnum):
    OK = "ok"
    DEGRADED = "degraded"
    DOWN = "down"
    AUTH_FAILED = "auth_failed"

    @property
    def answering(self) -> bool:
        """It answered with readings (degraded: some of them); the others are down in some way."""
        return self in (EngineState.OK, EngineState.DEGRADED)

    @property
    def severity(self) -> int:
        """How bad, the one ranking of states (engines' and hosts' alike): 0 ok, 1 degraded (answering with
        some readings), 2 not answering (down, auth failed). For the worst of several and a sort by state."""
        return 0 if self is EngineState.OK else 1 if self is EngineState.DEGRADED else FAILING


FAILING = 2
"""The severity of every state that does not answer (and of a state word no enum knows)."""


# The normalized vocabulary every engine maps onto.
GAUGES = (
    "requests_running",
    "requests_waiting",
    "kv_cache_usage",
    "generation_tokens_per_s_gauge",
    "prompt_tokens_per_s_gauge",
    "prefix_cache_hit_rate_gauge",
    "spec_decode_acceptance_rate_gauge",
    "process_start_time",
)
COUNTERS = (
    "prompt_tokens_total",
    "generation_tokens_total",
    "preemptions_total",
    "prefix_cache_queries_total",
    "prefix_cache_hits_total",
    "spec_decode_draft_tokens_total",
    "spec_decode_accepted_tokens_total",
    "requests_finished_total",
)
HISTOGRAMS = ("ttft", "itl")


@dataclass(frozen=True, slots=True)
class Histogram:
    """A cumulative histogram: (upper bound, cumulative count) pairs ending with +Inf, plus sum and count."""

    buckets: tuple[tuple[float, float], ...]
    sum: float
    count: float


@dataclass(frozen=True, slots=True)
class RankMetrics:
    """One data-parallel rank behind an endpoint (vLLM `engine="N"`, SGLang `dp_rank`)."""

    rank: str
    requests_running: float | None = None
    requests_waiting: float | None = None
    kv_cache_usage: float | None = None


@dataclass(frozen=True)
class EngineMetrics:
    """Normalized metrics from one scrape (summed over ranks where that makes sense)."""

    values: MappingProxyType[str, float] = field(default_factory=_empty)
    histograms: MappingProxyType[str, Histogram] = field(default_factory=_empty)
    ranks: tuple[RankMetrics, ...] = ()
    model_names: tuple[str, ...] = ()
    series: int = 0

    def get(self, name: str) -> float | None:
        return self.values.get(name)


@dataclass(frozen=True)
class SlotsInfo:
    """llama.cpp `/slots`: the KV fill estimate, since llama.cpp has no KV metric any more."""

    total_slots: int
    busy_slots: int
    ctx_total: int
    ctx_used: int
    decoded: int | None = None
    """Tokens generated so far by the requests in progress (their `n_decoded`); None when no slot says."""

    @property
    def kv_fill(self) -> float | None:
        return self.ctx_used / self.ctx_total if self.ctx_total > 0 else None


@dataclass(frozen=True)
class OllamaModel:
    name: str
    size_bytes: int | None
    size_vram_bytes: int | None
    context_length: int | None
    expires_at: str | None
    quantization: str | None = None

    @property
    def partial_offload(self) -> bool | None:
        """True when part of the model sits in system RAM (size_vram < size): slow, worth a flag."""
        if self.size_bytes is None or self.size_vram_bytes is None:
            return None
        return self.size_vram_bytes < self.size_bytes


@dataclass(frozen=True)
class EngineSnapshot:
    """One poll of one engine."""

    name: str
    kind: EngineKind
    url: str
    host: str | None
    fetched_at: float
    """Wall-clock time (epoch seconds) the /metrics request went out, as Prometheus stamps a scrape (the
    poll's end when no page came)."""
    monotonic: float
    """time.monotonic() of the same moment, for rates."""
    state: EngineState
    error: str | None = None
    source: str = ""
    """Which endpoints answered, e.g. 'GET /metrics, /v1/models'."""
    latency_s: float | None = None
    version: str | None = None
    models: tuple[str, ...] = ()
    metrics: EngineMetrics | None = None
    restart_marker: str | None = None
    """Changes when the engine restarted (process start time, llama.cpp Process-Start-Time-Unix)."""
    missing: MappingProxyType[str, str] = field(default_factory=_empty)
    """Normalized metric name -> why it is unknown."""
    slots: SlotsInfo | None = None
    ollama_models: tuple[OllamaModel, ...] = ()
    extra: MappingProxyType[str, Any] = field(default_factory=_empty)
    residency_read: bool = False
    """The engine's list of loaded models answered this poll (Ollama's /api/ps): `ollama_models` is what it
    holds now, not merely unknown. Typed here so that nothing reads it back out of `source`, a label for people."""
