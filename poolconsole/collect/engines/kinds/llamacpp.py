"""llama.cpp's llama-server: /metrics only with --metrics (llamacpp: families), /props for its build,
/slots for the KV fill and capacity it has no metric for; /health answers 503 while a model loads."""

from __future__ import annotations

from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar

from poolconsole.collect.engines import jsonparse, specs
from poolconsole.collect.engines import reported as reported_figures
from poolconsole.collect.engines.kinds.base import BIND_LOOPBACK, Capability, KvReading, int_or_none
from poolconsole.collect.engines.kinds.metrics_engine import MetricsEngineAdapter
from poolconsole.collect.engines.mapping import MetricSpec
from poolconsole.collect.engines.scratch import Scratch, set_value
from poolconsole.collect.http import Failure, Fetched
from poolconsole.collect.prom import ParseError
from poolconsole.config.models import EngineKind
from poolconsole.model.snapshots import EngineMetrics, EngineState

if TYPE_CHECKING:
    from poolconsole.collect.engines.poll import EnginePoller


class LlamacppAdapter(MetricsEngineAdapter):
    kind = EngineKind.LLAMACPP
    title = "llama.cpp"
    canary = True
    log_patterns = ("metal_out_of_memory", "llamacpp_buffer_alloc", "gb10_nv_err_no_memory", "cuda_out_of_memory")
    capabilities = Capability.KV_CAPACITY | Capability.SLOTS
    spec: ClassVar[MetricSpec] = specs.LLAMACPP
    version_path = "/props"
    metrics_hint = "start llama-server with --metrics"
    scrape_note = "llama-server serves /metrics only when started with --metrics"
    scrape_reminder = True
    kv_paths = ("/slots",)
    window_counters = MappingProxyType(
        {
            "drafts": ("llamacpp:spec_decode_num_drafts_total",),
            # prompt_tokens_total leaves out cached tokens: both together are what was sent
            "prompt_tokens_cached": ("llamacpp:prompt_tokens_cached_total",),
        }
    )
    reported = (("/props", reported_figures.parse_llamacpp_props),)
    extra_paths = ("/slots",)
    loading_on_503 = True
    # tokens_predicted_total grows only when a request ends (a two-minute answer would read as a wedge): the
    # stalled rule reads the llama_decode calls, one per step of every request in progress (its spec's
    # progress_total, which the poll reads into the view too)
    progress_counter = specs.LLAMACPP.counters["progress_total"][0]
    models_public_with_key = True
    bind_fix = BIND_LOOPBACK
    key_fix = "start llama-server with --api-key (or --api-key-file) and set api_key_env in hosts.toml"

    def read_version(self, body: bytes | str) -> str | None:
        return jsonparse.parse_props_build(body)

    def adjust_metrics(self, metrics: EngineMetrics, missing: dict[str, str]) -> tuple[EngineMetrics, dict[str, str]]:
        return cache_queries(metrics, missing)

    def after_metrics(self, poller: EnginePoller, poll: Scratch, got: dict[str, Fetched]) -> None:
        if "/slots" in got:
            _read_slots(poll, got["/slots"])
        _live_generation(poller, poll)

    def tokenize_body(self, model: str, text: str) -> dict[str, Any] | None:
        return {"content": text, "add_special": True}  # add_special: count the BOS token the completion will get

    def kv_from_json(self, doc: object) -> KvReading | None:
        if not isinstance(doc, list):
            return None
        contexts = [int_or_none(str(s.get("n_ctx"))) for s in doc if isinstance(s, dict)]
        known = [c for c in contexts if c]
        if known and len(known) == len(contexts):
            return sum(known), f"/slots n_ctx {known[0]:,} x {len(known)} slot(s)"
        return None


def _read_slots(poll: Scratch, fetched: Fetched) -> None:
    if not fetched.ok:
        if fetched.failure is not Failure.NOT_FOUND:
            poll.errors.append(f"/slots: {fetched.error}")
        poll.missing.setdefault("kv_cache_usage", "llama.cpp has no KV metric and /slots is unavailable")
        return
    try:
        poll.slots = jsonparse.parse_slots(fetched.body)
    except ParseError as exc:
        poll.worse(EngineState.DEGRADED, str(exc))
        return
    poll.answered(fetched, "/slots")
    fill = poll.slots.kv_fill
    if poll.metrics is not None and fill is not None and poll.metrics.get("kv_cache_usage") is None:
        set_value(poll, "kv_cache_usage", fill)
        poll.missing.pop("kv_cache_usage", None)
        poll.extra["kv_cache_usage_source"] = "estimated from /slots (tokens held / slot context)"


NO_PROGRESS = "; without /slots its generation counter moves only when a request ends: a long answer reads as a wedge"
"""Added to why n_decode_total is unknown (not on the page, or not a count): the stalled rule stands aside for
an engine whose progress_total is unknown with a reason (model.alerts)."""


def _live_generation(poller: EnginePoller, poll: Scratch) -> None:
    """llama.cpp counts a request's generated tokens when it ends; the requests in progress are added
    from /slots (collect.engines.live_generation). Without /slots the stalled rule reads n_decode_total
    (progress_total), which moves at every step; with /slots the live count is progress enough, and a
    build without n_decode_total is judged by it."""
    counted = poll.metrics.get("generation_tokens_total") if poll.metrics is not None else None
    if counted is None:
        return
    if "progress_total" in poll.missing:
        if poll.slots is None:
            poll.missing["progress_total"] += NO_PROGRESS
        else:
            del poll.missing["progress_total"]
    decoding = poll.slots.decoded if poll.slots is not None else None
    live = poller.generation.count(counted, decoding or 0, poll.restart_marker)
    set_value(poll, "generation_tokens_total", live)
    if decoding:
        poll.extra["generation_tokens_source"] = (
            "llamacpp:tokens_predicted_total and the requests in progress (/slots n_decoded)"
        )


def cache_queries(metrics: EngineMetrics, missing: dict[str, str]) -> tuple[EngineMetrics, dict[str, str]]:
    """llama.cpp's prompt_tokens_total excludes cached tokens: queries = processed + cached."""
    cached = metrics.get("prefix_cache_hits_total")
    processed = metrics.get("prompt_tokens_total")
    if cached is None or processed is None:
        return metrics, missing
    values = dict(metrics.values)
    values["prefix_cache_queries_total"] = cached + processed
    missing = {k: v for k, v in missing.items() if k != "prefix_cache_queries_total"}
    return EngineMetrics(
        MappingProxyType(values), metrics.histograms, metrics.ranks, metrics.model_names, metrics.series
    ), missing


ADAPTER = LlamacppAdapter()
