"""One adapter per engine kind (collect/engines/kinds/): every kind has one, found by its name; each holds what
the poller, the health check, the KV-capacity read, prometheus-config and the exposure audit ask of it, with
the values the per-kind tables held before."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from poolconsole.collect.engines import specs
from poolconsole.collect.engines.kinds import Capability, EngineAdapter, adapter, adapters
from poolconsole.collect.engines.kinds.base import int_or_none
from poolconsole.config import parse_config
from poolconsole.config.models import EngineKind
from poolconsole.model.failure_modes import BY_ID, MODES
from poolconsole.ops.capacity import kv_from_json, kv_from_metrics
from poolconsole.ops.prometheus_config import jobs_for, reminders


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
