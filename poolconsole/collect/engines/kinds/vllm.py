"""vLLM: /metrics always mounted (vllm: families), /version, /health; its KV capacity in the labels of
vllm:cache_config_info (kv_cache_size_tokens from 0.24, else num_gpu_blocks x block_size)."""

from __future__ import annotations

from collections.abc import Sequence
from types import MappingProxyType
from typing import Any, ClassVar

from poolconsole.collect.engines import reported as reported_figures
from poolconsole.collect.engines import specs
from poolconsole.collect.engines.kinds.base import BIND_LOOPBACK, Capability, KvReading, int_or_none
from poolconsole.collect.engines.kinds.metrics_engine import MetricsEngineAdapter
from poolconsole.collect.engines.mapping import MetricSpec
from poolconsole.collect.prom import Sample
from poolconsole.config.models import EngineKind


class VllmAdapter(MetricsEngineAdapter):
    kind = EngineKind.VLLM
    title = "vLLM"
    canary = True
    log_patterns = (
        "vllm_kv_cache_too_small",
        "vllm_no_cache_blocks",
        "quantization_unsupported",
        "cuda_graph_capture",
        "nccl_error",
        "gb10_nv_err_no_memory",
        "cuda_out_of_memory",
    )
    capabilities = Capability.KV_CAPACITY
    spec: ClassVar[MetricSpec] = specs.VLLM
    version_path = "/version"
    metrics_hint = "vLLM always mounts /metrics: is this really vLLM?"
    empty_metrics_hint = "the engine runs with --disable-log-stats"
    scrape_note = "vLLM serves /metrics always (its --disable-log-stats empties it)"
    kv_paths = ("/metrics",)
    window_counters = MappingProxyType({"drafts": ("vllm:spec_decode_num_drafts_total",)})
    reported = (
        ("/metrics", reported_figures.parse_vllm_metrics),
        ("/v1/models", reported_figures.models_context),
    )
    bind_fix = BIND_LOOPBACK
    key_fix = "start vLLM with --api-key (or VLLM_API_KEY) and set api_key_env for it in hosts.toml"

    def tokenize_body(self, model: str, text: str) -> dict[str, Any] | None:
        return {"model": model, "prompt": text}

    def kv_from_samples(self, samples: Sequence[Sample]) -> KvReading | None:
        for s in samples:
            if s.name != "vllm:cache_config_info":
                continue
            tokens = int_or_none(s.label("kv_cache_size_tokens"))
            if tokens:
                return tokens, f"vllm:cache_config_info kv_cache_size_tokens {tokens:,}"
            blocks, size = int_or_none(s.label("num_gpu_blocks")), int_or_none(s.label("block_size"))
            if blocks and size:
                return blocks * size, f"vllm:cache_config_info num_gpu_blocks {blocks:,} x block_size {size}"
        return None


ADAPTER = VllmAdapter()
