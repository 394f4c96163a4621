"""One adapter per engine kind (collect/engines/kinds/): every kind has one, found by its name; each holds what
the poller, the health check, the KV-capacity read, prometheus-config and the exposure audit ask of it, with
the values the per-kind tables held before."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from types import MappingProxyType, SimpleNamespace
from typing import cast

import pytest

from poolconsole.collect.engines import specs
from poolconsole.collect.engines.kinds import Capability, EngineAdapter, adapter, adapters
from poolconsole.collect.engines.kinds.base import int_or_none
from poolconsole.collect.engines.spec_window import Reading, spec_figures
from poolconsole.collect.hosts.owners import NO_GPU
from poolconsole.collect.prometheus import discovery as prometheus_discovery
from poolconsole.collect.prometheus.api import Answer, PrometheusAPI
from poolconsole.collect.prometheus.discovery import NoEngineSeries, discover, prefixes
from poolconsole.config import parse_config
from poolconsole.config.models import PROMETHEUS_KINDS, EngineKind, said
from poolconsole.model.failure_modes import BY_ID, MODES
from poolconsole.ops.capacity import kv_from_json, kv_from_metrics
from poolconsole.ops.prometheus_config import jobs_for, reminders
from poolconsole.ops.prometheus_rules import stall_series, ttft_histograms
from poolconsole.ops.smoke.context import Watch, _kv_unknown
from poolconsole.runtime.alerts_canary import PROBED


def test_every_kind_has_its_adapter_in_the_module_named_after_it() -> None:
    assert [a.kind for a in adapters()] == list(EngineKind)
    assert set(SIX) <= set(EngineKind)
    for kind in EngineKind:
        found = adapter(kind)
        assert isinstance(found, EngineAdapter) and found.kind is kind
        assert type(found).__module__ == f"poolconsole.collect.engines.kinds.{kind.value}"


def test_an_adapter_registered_under_another_kind_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from poolconsole.collect.engines.kinds import vllm

    adapter.cache_clear()
    monkeypatch.setattr(vllm, "ADAPTER", adapter(EngineKind.SGLANG))
    try:
        with pytest.raises(TypeError, match="not the adapter of 'vllm'"):
            adapter(EngineKind.VLLM)
    finally:
        adapter.cache_clear()


SIX = (
    EngineKind.VLLM,
    EngineKind.SGLANG,
    EngineKind.LLAMACPP,
    EngineKind.OLLAMA,
    EngineKind.LITELLM,
    EngineKind.OPENAI,
)
"""The kinds whose per-kind tables the adapters replaced (a kind added later brings its own tests)."""


def test_the_kinds_data_as_the_tables_held_it() -> None:
    six = [adapter(kind) for kind in SIX]
    health = {a.kind: a.health_path for a in six}
    assert health == {
        EngineKind.VLLM: "/health",
        EngineKind.SGLANG: "/health",
        EngineKind.LLAMACPP: "/health",
        EngineKind.OLLAMA: "/api/version",
        EngineKind.LITELLM: "/health/liveliness",
        EngineKind.OPENAI: "/v1/models",
    }
    assert {a.kind: a.spec for a in six if a.spec is not None} == {
        EngineKind.VLLM: specs.VLLM,
        EngineKind.SGLANG: specs.SGLANG,
        EngineKind.LLAMACPP: specs.LLAMACPP,
    }
    assert {a.kind for a in six if a.serves_metrics} == {EngineKind.VLLM, EngineKind.SGLANG, EngineKind.LLAMACPP}
    assert {a.kind for a in six if a.probes_metrics} == {
        EngineKind.VLLM,
        EngineKind.SGLANG,
        EngineKind.LLAMACPP,
        EngineKind.LITELLM,
    }
    assert [a.kind for a in six if a.is_gateway] == [EngineKind.LITELLM]
    assert [a.kind for a in six if Capability.SLOTS in a.capabilities] == [EngineKind.LLAMACPP]
    assert [a.kind for a in six if Capability.RESIDENCY in a.capabilities] == [EngineKind.OLLAMA]
    assert adapter(EngineKind.VLLM).no_series_hint == "the engine runs with --disable-log-stats"
    assert adapter(EngineKind.SGLANG).no_series_hint == "start SGLang with --enable-metrics"
    assert (
        adapter(EngineKind.OLLAMA).bind_fix.format(port=11434) == "OLLAMA_HOST=127.0.0.1:11434 (or the tailnet address)"
    )


def test_each_kind_reads_only_its_own_kv_capacity() -> None:
    vllm_page = 'vllm:cache_config_info{block_size="16",num_gpu_blocks="8192"} 1\nsglang:max_total_num_tokens 5000\n'
    assert kv_from_metrics(vllm_page, EngineKind.VLLM) is not None
    got = kv_from_metrics(vllm_page, EngineKind.VLLM)
    assert got is not None and (got.tokens, got.source) == (
        131072,
        "vllm:cache_config_info num_gpu_blocks 8,192 x block_size 16",
    )
    sglang = kv_from_metrics(vllm_page, EngineKind.SGLANG)
    assert sglang is not None and sglang.tokens == 5000
    assert kv_from_metrics(vllm_page, EngineKind.OLLAMA) is None
    slots = json.dumps([{"n_ctx": 4096}, {"n_ctx": 4096}])
    got = kv_from_json(slots, EngineKind.LLAMACPP)
    assert got is not None and (got.tokens, got.source) == (8192, "/slots n_ctx 4,096 x 2 slot(s)")
    assert kv_from_json(slots, EngineKind.SGLANG) is None  # a list is not SGLang's /server_info
    assert kv_from_json('{"max_total_num_tokens": 70000}', EngineKind.SGLANG) is not None
    assert kv_from_json('{"max_total_num_tokens": 70000}', EngineKind.VLLM) is None
    assert [int_or_none(t) for t in ("12", "1.5e3", "", "None", None, "x")] == [12, 1500, None, None, None, None]


def test_prometheus_config_scrapes_the_kinds_with_metrics_and_reminds_of_their_flags(tmp_path: Path) -> None:
    rows = "\n".join(
        f'[[engines]]\nname = "{kind.value}"\nkind = "{kind.value}"\nurl = "http://127.0.0.1:{8000 + i}"\n'
        for i, kind in enumerate(SIX)
    )
    config = parse_config(rows)
    jobs, notes = jobs_for(config, tmp_path)
    assert [j.name for j in jobs] == ["vllm", "sglang", "llamacpp", "litellm"]
    assert notes == [
        "engine ollama: not scraped (Ollama has no /metrics endpoint)",
        "engine openai: not scraped (a generic OpenAI-compatible server has no known /metrics)",
    ]
    assert reminders(config, tmp_path) == [
        "SGLang serves /metrics only when started with --enable-metrics",
        "llama-server serves /metrics only when started with --metrics",
    ]


def test_log_patterns_are_failure_modes_of_the_library_and_every_mode_belongs_to_a_kind() -> None:
    claimed = {pattern for a in adapters() for pattern in a.log_patterns}
    assert claimed == set(BY_ID)  # each pattern a failure mode of the library, each mode some kind's
    sglang = adapter(EngineKind.SGLANG).failure_modes
    assert [m.id for m in sglang] == [m.id for m in MODES if m.id in adapter(EngineKind.SGLANG).log_patterns]
    assert "sglang_mem_fraction" in {m.id for m in sglang} and "vllm_no_cache_blocks" not in {m.id for m in sglang}
    assert adapter(EngineKind.LITELLM).failure_modes == ()


def test_the_rule_files_series_as_the_tables_held_them() -> None:
    """prometheus-rules' STALL_METRICS and TTFT tables, now asked of the adapters."""
    assert {k: v for k, v in stall_series().items() if k in SIX} == {
        EngineKind.VLLM: (
            "vllm:num_requests_running",
            "vllm:num_requests_waiting",
            "vllm:generation_tokens_total",
            "vllm:prompt_tokens_total",
        ),
        EngineKind.SGLANG: (
            "sglang:num_running_reqs",
            "sglang:num_queue_reqs",
            "sglang:generation_tokens_total",
            "sglang:prompt_tokens_total",
        ),
        EngineKind.LLAMACPP: (
            "llamacpp:requests_processing",
            "llamacpp:requests_deferred",
            "llamacpp:n_decode_total",
            "llamacpp:prompt_tokens_total",
        ),
    }
    assert {k: v for k, v in ttft_histograms().items() if k in SIX} == {
        EngineKind.VLLM: "vllm:time_to_first_token_seconds",
        EngineKind.SGLANG: "sglang:time_to_first_token_seconds",
    }
    assert adapter(EngineKind.OLLAMA).stall_series is None and adapter(EngineKind.LLAMACPP).ttft_histogram is None


def test_what_prometheus_discovery_the_canary_and_gpu_owners_ask_as_the_tables_held_it() -> None:
    six = {k: v for k, v in prefixes().items() if k in SIX}
    assert six == {EngineKind.VLLM: "vllm:", EngineKind.SGLANG: "sglang:", EngineKind.LLAMACPP: "llamacpp:"}
    assert list(six) == [EngineKind.VLLM, EngineKind.SGLANG, EngineKind.LLAMACPP]  # the queries' order
    assert PROBED & set(SIX) == {EngineKind.VLLM, EngineKind.SGLANG, EngineKind.LLAMACPP}
    assert NO_GPU & set(SIX) == {EngineKind.LITELLM}
    assert tuple(k for k in PROMETHEUS_KINDS if k in SIX) == (EngineKind.VLLM, EngineKind.SGLANG, EngineKind.LLAMACPP)


def test_the_enums_one_fact_is_the_adapters() -> None:
    """hosts.toml's validation knows `read = "prometheus"` from the enum (config is below the adapters): it must
    say what the adapter's metric spec says, for every kind, a later one too."""
    for kind in EngineKind:
        assert kind.in_prometheus == adapter(kind).serves_metrics, kind
    assert said(tuple(k for k in PROMETHEUS_KINDS if k in SIX)) == "vllm, sglang and llamacpp"
    assert said((EngineKind.VLLM,)) == "vllm" and said((EngineKind.VLLM, EngineKind.OLLAMA)) == "vllm and ollama"
    assert [kind.value for kind in SIX] == ["vllm", "sglang", "llamacpp", "ollama", "litellm", "openai"]
    assert EngineKind("sglang") is EngineKind.SGLANG and f"{EngineKind.SGLANG}" == "sglang"


class _Prometheus:
    """A query API that records the queries and holds no series."""

    def __init__(self) -> None:
        self.asked: list[str] = []
        self.source = SimpleNamespace(url="http://127.0.0.1:9090")

    async def query(self, expr: str) -> Answer:
        self.asked.append(expr)
        return Answer()


def test_discovery_asks_for_each_kinds_families_and_names_them_when_none_are_held(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(prometheus_discovery, "adapters", lambda: tuple(adapter(kind) for kind in SIX))
    api = _Prometheus()
    with pytest.raises(NoEngineSeries) as raised:
        asyncio.run(discover(cast(PrometheusAPI, api)))
    assert api.asked == [
        'group by (job, instance) ({__name__=~"vllm:.+"})',
        'group by (job, instance) ({__name__=~"sglang:.+"})',
        'group by (job, instance) ({__name__=~"llamacpp:.+"})',
    ]
    assert str(raised.value) == (
        "http://127.0.0.1:9090 holds no vllm:*, sglang:* or llamacpp:* series, nor node_exporter, DCGM exporter "
        "or nvidia_gpu_exporter series (is it scraping the pool?)"
    )


def test_the_smoke_contexts_tokenize_bodies_as_its_branches_held_them() -> None:
    """ops/smoke/context.py asked /tokenize of vLLM ({"model","prompt"}) and llama.cpp ({"content"}, with
    add_special to count the BOS token the completion gets) and estimated for every other kind."""
    bodies = {kind: adapter(kind).tokenize_body("m", "hi") for kind in SIX}
    assert bodies == {
        EngineKind.VLLM: {"model": "m", "prompt": "hi"},
        EngineKind.SGLANG: None,
        EngineKind.LLAMACPP: {"content": "hi", "add_special": True},
        EngineKind.OLLAMA: None,
        EngineKind.LITELLM: None,
        EngineKind.OPENAI: None,
    }
    watch = Watch()
    assert [_kv_unknown(kind.value, watch) for kind in SIX] == [
        "no reading while it ran",
        "no reading while it ran",
        "no reading while it ran",
        "ollama reports no KV usage",
        "litellm reports no KV usage",
        "openai reports no KV usage",
    ]


def test_the_spec_windows_words_name_sglangs_gauges_from_its_spec() -> None:
    said_rate = Reading("sglang", MappingProxyType({"accept_rate": 0.7, "accept_length": 2.5}))
    assert spec_figures(said_rate, said_rate)["source"] == (
        "sglang:spec_accept_rate / spec_accept_length gauges after the run (its last log interval)"
    )
    none = Reading("sglang", MappingProxyType({}))
    assert spec_figures(said_rate, none)["reason"] == "no speculative decoding: sglang:spec_accept_rate is absent or 0"
