"""What an engine kind is, in one class: how to poll it, its metric spec, its health and version paths, how
to read its KV capacity, what to tell an operator whose /metrics is off, what the exposure audit probes, and
the log patterns it writes. One subclass per kind, in a module named after the kind (kinds/vllm.py ...).

Optional capabilities are declared, as harlequin's HarlequinAdapter declares its own: a caller asks
`Capability.KV_CAPACITY in adapter.capabilities` instead of knowing which kinds have it."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from enum import Flag, auto
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

from poolconsole.collect.engines import jsonparse
from poolconsole.collect.engines.mapping import Agg, MetricSpec
from poolconsole.collect.engines.scratch import Scratch
from poolconsole.collect.http import Fetched
from poolconsole.collect.prom import ParseError, Sample
from poolconsole.config.models import EngineKind
from poolconsole.model.failure_modes import MODES, FailureMode
from poolconsole.model.snapshots import EngineMetrics

if TYPE_CHECKING:
    from poolconsole.collect.engines.poll import EnginePoller

Reader = Callable[[bytes], dict[str, Any]]
"""A pure parser of one endpoint's body into the figures an engine reports of itself (collect/engines/reported)."""
NOTHING: Mapping[str, Any] = MappingProxyType({})

KvReading = tuple[int, str]
"""Tokens the KV cache holds, and where that was read (e.g. "sglang:max_total_num_tokens 1,000")."""

BIND_LOOPBACK = "--host 127.0.0.1 (or the tailnet address)"


class StallSeries(NamedTuple):
    """The families prometheus-rules' stalled rule reads of one kind: requests running or waiting and no
    progress nor prompt token counted (a long prefill is not a wedge)."""

    running: str
    waiting: str
    progress: str
    """A counter of generation progress."""
    prompt: str


class Capability(Flag):
    """What an engine kind offers beyond the common poll (health, models list, completions)."""

    NONE = 0
    METRICS = auto()
    """Serves a Prometheus /metrics page that a metric spec maps (a Prometheus can scrape it too)."""
    KV_CAPACITY = auto()
    """Says how many tokens its KV cache holds (read once for the fit check and `plan`)."""
    SLOTS = auto()
    """Has llama.cpp's /slots: per-slot KV fill, and the prompts of live requests (an exposure)."""
    RESIDENCY = auto()
    """Lists the models it holds in memory and for how long (Ollama's /api/ps)."""
    GATEWAY = auto()
    """Routes to other engines (LiteLLM): no GPU of its own, no per-engine metrics."""


class EngineAdapter:
    """The base of every engine kind. Class attributes are the kind's data; methods its behaviour."""

    kind: ClassVar[EngineKind]
    title: ClassVar[str]
    """The engine's name as its makers spell it (vLLM, llama.cpp)."""
    capabilities: ClassVar[Capability] = Capability.NONE
    spec: ClassVar[MetricSpec | None] = None
    """How its /metrics names map onto the normalized vocabulary (None: it has no /metrics we read)."""
    health_path: ClassVar[str] = "/v1/models"
    """What answers 200 once the engine serves (the restart and rollover health check)."""
    version_path: ClassVar[str | None] = None
    """Read on the first poll for the engine's version (None: the poll reads it, or it has none)."""
    metrics_hint: ClassVar[str] = ""
    """What to do when /metrics is missing (HTTP 404)."""
    empty_metrics_hint: ClassVar[str] = ""
    """Why /metrics has no series of the engine (defaults to metrics_hint)."""
    scrape_note: ClassVar[str] = ""
    """prometheus-config: what the operator must do for a Prometheus to scrape it, or why it is not scraped."""
    scraped: ClassVar[bool] = False
    """prometheus-config writes a scrape job for it (it serves a /metrics page worth scraping)."""
    scrape_reminder: ClassVar[bool] = False
    """prometheus-config lists scrape_note among the steps left for the operator (a flag the engine needs)."""
    kv_paths: ClassVar[tuple[str, ...]] = ()
    """Where its KV capacity is read, in order (with Capability.KV_CAPACITY)."""
    bind_fix: ClassVar[str] = "its listen address set to 127.0.0.1 or the tailnet address"
    """The exposure audit: how to bind it to loopback ({port} is filled)."""
    key_fix: ClassVar[str] = "require a key at the server or a proxy in front of it"
    """The exposure audit: how to make it ask for a key."""
    probes_metrics: ClassVar[bool] = False
    """The exposure audit GETs /metrics without a key."""
    models_public_with_key: ClassVar[bool] = False
    """Its /v1/models may answer a caller without a key even when it requires one (some llama.cpp builds):
    the exposure audit asks the key-guarded endpoints instead."""
    no_metrics: ClassVar[str] = "this engine exposes no metrics"
    """Why every metric is unknown, for a kind the base poll reads (only /v1/models)."""
    progress_counter: ClassVar[str | None] = None
    """prometheus-rules' stalled rule: the counter that moves with every step of generation, where the spec's
    generation counter does not (llama.cpp counts a request's tokens when it ends). None: that counter."""
    canary: ClassVar[bool] = False
    """The watcher's canary may send it a one-token completion: a self-hosted engine, where a probe bills no
    upstream (a gateway, an `openai` endpoint) and loads no model that was let go (Ollama)."""

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if cls.spec is not None:
            cls.capabilities |= Capability.METRICS

    window_gauges: ClassVar[Mapping[str, tuple[tuple[str, ...], Agg]]] = NOTHING
    """Families only a measured window reads (collect/engines/spec_window), beyond its metric spec's."""
    window_counters: ClassVar[Mapping[str, tuple[str, ...]]] = NOTHING
    reported: ClassVar[tuple[tuple[str, Reader], ...]] = ()
    """Where it says what it runs with (context, quantization, KV dtype ...), each path with its parser, in
    the order read (collect/engines/reported)."""
    reported_if_unknown: ClassVar[frozenset[str]] = frozenset()
    """Paths among `reported` read only while the context length is still unknown."""
    reported_older: ClassVar[Mapping[str, str]] = NOTHING
    """An older path among `reported` -> its newer name: the older one is read only where the newer failed."""
    log_patterns: ClassVar[tuple[str, ...]] = ()
    """The failure modes (ids in model/failure_modes.py, which holds their patterns) its logs can show."""

    @property
    def failure_modes(self) -> tuple[FailureMode, ...]:
        """The failure modes of log_patterns, in the library's order (the order they are tried in)."""
        return tuple(mode for mode in MODES if mode.id in self.log_patterns)

    @property
    def no_series_hint(self) -> str:
        """Why its /metrics page may hold none of its series."""
        return self.empty_metrics_hint or self.metrics_hint

    @property
    def serves_metrics(self) -> bool:
        return Capability.METRICS in self.capabilities

    @property
    def is_gateway(self) -> bool:
        return Capability.GATEWAY in self.capabilities

    @property
    def stall_series(self) -> StallSeries | None:
        """What prometheus-rules' stalled rule reads of it, from its metric spec (newest names): None for a
        kind whose spec lacks one of them (or that has no spec)."""
        spec = self.spec
        if spec is None:
            return None
        running, waiting = spec.gauges.get("requests_running"), spec.gauges.get("requests_waiting")
        generated = spec.counters.get("generation_tokens_total", ())
        prompt = spec.counters.get("prompt_tokens_total", ())
        if running is None or waiting is None or not generated or not prompt:
            return None
        return StallSeries(running[0][0], waiting[0][0], self.progress_counter or generated[0], prompt[0])

    @property
    def ttft_histogram(self) -> str | None:
        """The TTFT histogram prometheus-rules' slo_burn reads (its spec's newest name); None without one."""
        names = self.spec.histograms.get("ttft", ()) if self.spec is not None else ()
        return names[0] if names else None

    async def poll(self, poller: EnginePoller, poll: Scratch) -> None:
        """One poll: the GETs of its endpoints, read into `poll`. Never raises for what the engine answers."""
        got = await poller.gather(["/v1/models"], poller.headers(poll))
        fetched = got["/v1/models"]
        if not fetched.ok:
            poll.worse(poller.failed(fetched), f"/v1/models: {fetched.error}")
        else:
            poller.read_models(poll, fetched)
        poll.all_missing(self.no_metrics)

    def read_version(self, body: bytes | str) -> str | None:
        """Its version from the body of version_path."""
        return jsonparse.parse_version(body)

    def version_of(self, fetched: Fetched) -> str | None:
        try:
            return self.read_version(fetched.body)
        except ParseError:
            return None

    def adjust_metrics(self, metrics: EngineMetrics, missing: dict[str, str]) -> tuple[EngineMetrics, dict[str, str]]:
        """Metrics the engine exposes only in pieces, completed (the direct poll and the Prometheus read)."""
        return metrics, missing

    def kv_from_samples(self, samples: Sequence[Sample]) -> KvReading | None:
        """KV capacity from a /metrics page, when the engine states it there."""
        return None

    def kv_from_json(self, doc: object) -> KvReading | None:
        """KV capacity from a JSON endpoint among kv_paths."""
        return None

    def tokenize_body(self, model: str, text: str) -> dict[str, Any] | None:
        """The body of a POST /tokenize that counts `text` as a completion of `model` would (the smoke
        context's prompt sizing; the answer's "count" or "tokens"); None: it serves no /tokenize."""
        return None


def int_or_none(text: str | None) -> int | None:
    """An integer an engine wrote as text (a label, a JSON field); None for missing or garbage."""
    try:
        return int(float(text)) if text not in (None, "", "None") else None
    except ValueError:
        return None
