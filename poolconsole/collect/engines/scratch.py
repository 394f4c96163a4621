"""The mutable scratch of one engine poll, shared by the poller and the kind adapters; frozen into an
EngineSnapshot when the poll ends."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from poolconsole.collect.http import Failure, Fetched
from poolconsole.model.snapshots import (
    COUNTERS,
    GAUGES,
    HISTOGRAMS,
    EngineMetrics,
    EngineState,
    OllamaModel,
    SlotsInfo,
)

ALL_METRICS = (*GAUGES, *COUNTERS, *HISTOGRAMS)


@dataclass
class Scratch:
    """What one poll found so far: the worst state, the errors, the endpoints that answered, the readings."""

    state: EngineState = EngineState.OK
    errors: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    missing: dict[str, str] = field(default_factory=dict)
    metrics: EngineMetrics | None = None
    models: tuple[str, ...] = ()
    slots: SlotsInfo | None = None
    ollama: tuple[OllamaModel, ...] = ()
    residency_read: bool = False
    """The engine's list of loaded models answered (Ollama's /api/ps): its residency can be observed."""
    extra: dict[str, Any] = field(default_factory=dict)
    restart_marker: str | None = None
    latency_s: float | None = None
    sampled: float | None = None
    """time.monotonic() when the /metrics page arrived: the snapshot's time (rates divide by its steps)."""

    def worse(self, state: EngineState, error: str) -> None:
        # Among the states that do not answer, down wins: an endpoint that refused or timed out says more
        # about the engine than one that refused the key.
        if state.severity > self.state.severity or state is EngineState.DOWN:
            self.state = state
        self.errors.append(error)

    def answered(self, fetched: Fetched, path: str) -> None:
        self.sources.append(path)
        if self.latency_s is None or fetched.elapsed_s > self.latency_s:
            self.latency_s = fetched.elapsed_s

    def all_missing(self, reason: str) -> None:
        present = set(self.metrics.values) | set(self.metrics.histograms) if self.metrics else set()
        for name in ALL_METRICS:
            if name not in present:
                self.missing.setdefault(name, reason)


def failure_state(fetched: Fetched) -> EngineState:
    """The state one failed GET puts the engine in."""
    if fetched.failure is Failure.AUTH:
        return EngineState.AUTH_FAILED
    if fetched.failure in (Failure.REFUSED, Failure.TIMEOUT, Failure.SERVER_ERROR):
        return EngineState.DOWN
    return EngineState.DEGRADED


def set_value(poll: Scratch, name: str, value: float) -> None:
    """The poll's metrics with one value replaced (EngineMetrics is frozen and may be the page memo's)."""
    assert poll.metrics is not None
    values = dict(poll.metrics.values)
    values[name] = value
    poll.metrics = EngineMetrics(
        MappingProxyType(values),
        poll.metrics.histograms,
        poll.metrics.ranks,
        poll.metrics.model_names,
        poll.metrics.series,
    )
