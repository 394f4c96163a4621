"""Per-engine metric names (newest first) mapped onto the normalized vocabulary.

Sources: shared/reference/telemetry-formats.md sections 1-3 and the real captures.
"""

from __future__ import annotations

from poolconsole.collect.engines.mapping import MetricSpec
from poolconsole.collect.prom import Sample
from poolconsole.config.models import EngineKind

VLLM = MetricSpec(
    kind=EngineKind.VLLM,
    prefix="vllm:",
    rank_label="engine",
    gauges={
        "requests_running": (("vllm:num_requests_running",), "sum"),
        "requests_waiting": (("vllm:num_requests_waiting",), "sum"),
        # kv_cache_usage_perc is a fraction 0..1 despite its name; gpu_cache_usage_perc before 0.9.
        # Over data-parallel ranks the fullest rank is reported: that is the one that queues.
        "kv_cache_usage": (("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"), "max"),
    },
    counters={
        "prompt_tokens_total": ("vllm:prompt_tokens_total",),
        "generation_tokens_total": ("vllm:generation_tokens_total",),
        "preemptions_total": ("vllm:num_preemptions_total",),
        "prefix_cache_queries_total": ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"),
        "prefix_cache_hits_total": ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"),
        "spec_decode_draft_tokens_total": ("vllm:spec_decode_num_draft_tokens_total",),
        "spec_decode_accepted_tokens_total": ("vllm:spec_decode_num_accepted_tokens_total",),
        "requests_finished_total": ("vllm:request_success_total",),
    },
    histograms={
        "ttft": ("vllm:time_to_first_token_seconds",),
        "itl": ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
    },
    not_exposed={
        "generation_tokens_per_s_gauge": "vLLM V1 has no throughput gauge: derived from counters",
        "prompt_tokens_per_s_gauge": "vLLM V1 has no throughput gauge: derived from counters",
        "prefix_cache_hit_rate_gauge": "derived from prefix_cache_hits/queries counters",
        "spec_decode_acceptance_rate_gauge": "derived from spec_decode counters",
    },
)


def _sglang_duplicate_rank(sample: Sample) -> bool:
    """With enable_metrics_for_all_schedulers every TP rank repeats the same gauges: keep tp_rank 0."""
    tp = sample.label("tp_rank")
    return tp is not None and tp != "0"


SGLANG = MetricSpec(
    kind=EngineKind.SGLANG,
    prefix="sglang:",
    rank_label="dp_rank",
    model_labels=("model_name", "name"),
    skip=_sglang_duplicate_rank,
    gauges={
        "requests_running": (("sglang:num_running_reqs",), "sum"),
        "requests_waiting": (("sglang:num_queue_reqs",), "sum"),
        "kv_cache_usage": (("sglang:token_usage",), "max"),
        "generation_tokens_per_s_gauge": (("sglang:gen_throughput",), "sum"),
        "prefix_cache_hit_rate_gauge": (("sglang:cache_hit_rate",), "mean"),
        "spec_decode_acceptance_rate_gauge": (("sglang:spec_accept_rate",), "mean"),
    },
    counters={
        "prompt_tokens_total": ("sglang:prompt_tokens_total",),
        "generation_tokens_total": ("sglang:generation_tokens_total",),
        # SGLang "retracts" a running request when KV runs out: its preemption.
        "preemptions_total": ("sglang:num_retracted_requests_total",),
        "requests_finished_total": ("sglang:num_requests_total",),
    },
    histograms={
        "ttft": ("sglang:time_to_first_token_seconds",),
        "itl": ("sglang:inter_token_latency_seconds",),
    },
    not_exposed={
        "prompt_tokens_per_s_gauge": "not exposed by SGLang: derived from counters",
        "prefix_cache_queries_total": "SGLang exposes the hit rate as a gauge (cache_hit_rate)",
        "prefix_cache_hits_total": "SGLang exposes the hit rate as a gauge (cache_hit_rate)",
        "spec_decode_draft_tokens_total": "SGLang exposes the acceptance rate as a gauge (spec_accept_rate)",
        "spec_decode_accepted_tokens_total": "SGLang exposes the acceptance rate as a gauge (spec_accept_rate)",
    },
)

LLAMACPP = MetricSpec(
    kind=EngineKind.LLAMACPP,
    prefix="llamacpp:",
    model_labels=(),
    gauges={
        "requests_running": (("llamacpp:requests_processing",), "sum"),
        "requests_waiting": (("llamacpp:requests_deferred",), "sum"),
        # Averaged "since the previous /metrics call": a second scraper distorts both readers.
        "generation_tokens_per_s_gauge": (("llamacpp:predicted_tokens_seconds",), "sum"),
        "prompt_tokens_per_s_gauge": (("llamacpp:prompt_tokens_seconds",), "sum"),
        # Removed upstream (llama.cpp #13660); read when an older build still has it.
        "kv_cache_usage": (("llamacpp:kv_cache_usage_ratio",), "max"),
    },
    counters={
        "prompt_tokens_total": ("llamacpp:prompt_tokens_total",),
        "generation_tokens_total": ("llamacpp:tokens_predicted_total",),
        # tokens_predicted_total grows only when a request ends; the llama_decode calls grow at every step of
        # the requests in progress (prompt batches and generated tokens): the stalled rule's progress
        "progress_total": ("llamacpp:n_decode_total",),
        # prompt_tokens_total excludes cached tokens: hit rate = cached / (cached + processed).
        "prefix_cache_hits_total": ("llamacpp:prompt_tokens_cached_total",),
        "spec_decode_draft_tokens_total": ("llamacpp:spec_decode_num_draft_tokens_total",),
        "spec_decode_accepted_tokens_total": ("llamacpp:spec_decode_num_accepted_tokens_total",),
    },
    histograms={},
    not_exposed={
        "preemptions_total": "not exposed by llama.cpp",
        "ttft": "llama.cpp exposes no latency histograms",
        "itl": "llama.cpp exposes no latency histograms",
        "prefix_cache_hit_rate_gauge": "derived from prompt_tokens_cached_total",
        "spec_decode_acceptance_rate_gauge": "derived from spec_decode counters",
        "requests_finished_total": "not exposed by llama.cpp",
    },
)
