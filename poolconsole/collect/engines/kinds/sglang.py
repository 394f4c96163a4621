"""SGLang: /metrics only with --enable-metrics (sglang: families), /server_info for its version and KV
capacity (max_total_num_tokens, also a metric), /health."""

from __future__ import annotations

from collections.abc import Sequence
from types import MappingProxyType
from typing import ClassVar

from poolconsole.collect.engines import reported as reported_figures
from poolconsole.collect.engines import specs
from poolconsole.collect.engines.kinds.base import BIND_LOOPBACK, Capability, KvReading, int_or_none
from poolconsole.collect.engines.kinds.metrics_engine import MetricsEngineAdapter
from poolconsole.collect.engines.mapping import MetricSpec
from poolconsole.collect.prom import Sample
from poolconsole.config.models import EngineKind


class SglangAdapter(MetricsEngineAdapter):
    kind = EngineKind.SGLANG
    title = "SGLang"
    canary = True
    log_patterns = (
        "quantization_unsupported",
        "cuda_graph_capture",
        "nccl_error",
        "sglang_mem_fraction",
        "gb10_nv_err_no_memory",
        "cuda_out_of_memory",
    )
    capabilities = Capability.KV_CAPACITY
    spec: ClassVar[MetricSpec] = specs.SGLANG
    version_path = "/server_info"
    metrics_hint = "start SGLang with --enable-metrics"
    scrape_note = "SGLang serves /metrics only when started with --enable-metrics"
    scrape_reminder = True
    kv_paths = ("/metrics", "/server_info")
    window_gauges = MappingProxyType({"accept_length": (("sglang:spec_accept_length",), "mean")})
    # /get_server_info is the older name of /server_info; its context_length is null unless --context-length
    # was given, so /v1/models max_model_len (the model's) fills it then.
    reported = (
        ("/server_info", reported_figures.parse_sglang_server_info),
        ("/get_server_info", reported_figures.parse_sglang_server_info),
        ("/v1/models", reported_figures.models_context),
    )
    reported_if_unknown = frozenset({"/v1/models"})
    reported_older = MappingProxyType({"/get_server_info": "/server_info"})
    bind_fix = BIND_LOOPBACK
    key_fix = "start SGLang with --api-key and set api_key_env for it in hosts.toml"

    def kv_from_samples(self, samples: Sequence[Sample]) -> KvReading | None:
        for s in samples:
            if s.name == "sglang:max_total_num_tokens" and s.value > 0:
                return int(s.value), f"sglang:max_total_num_tokens {int(s.value):,}"
        return None

    def kv_from_json(self, doc: object) -> KvReading | None:
        if not isinstance(doc, dict):
            return None
        tokens = int_or_none(str(doc.get("max_total_num_tokens")))
        return (tokens, f"/server_info max_total_num_tokens {tokens:,}") if tokens else None


ADAPTER = SglangAdapter()
