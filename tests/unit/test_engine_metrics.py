"""Normalized engine metrics from real captures of vLLM, llama.cpp and SGLang."""

from __future__ import annotations

import math

from poolconsole.collect.engines import specs
from poolconsole.collect.engines.jsonparse import (
    parse_litellm_health,
    parse_litellm_liveliness,
    parse_litellm_readiness,
    parse_models,
    parse_ollama_ps,
    parse_slots,
    parse_version,
)
from poolconsole.collect.engines.live_generation import LiveGeneration
from poolconsole.collect.engines.mapping import MetricSpec, parse_metrics
from poolconsole.sim.vllm_dp import dp_payload
from tests.conftest import REAL

VLLM = REAL / "vllm-0.32.0-cpu"
LLAMA = REAL / "llamacpp-b1-0c1e570"
SAMPLES = REAL / "issue-samples"


def test_vllm_under_load() -> None:
    m, missing, _ = parse_metrics((VLLM / "metrics.load.txt").read_bytes(), specs.VLLM)
    assert m.get("requests_running") == 8
    assert m.get("requests_waiting") == 8
    assert m.get("kv_cache_usage") is not None and 0 < m.get("kv_cache_usage") < 0.01  # type: ignore[operator]
    assert m.get("generation_tokens_total") == 334
    assert m.histograms["ttft"].count == 15
    assert math.isinf(m.histograms["ttft"].buckets[-1][0])
    assert m.model_names == ("tiny",)
    assert [r.rank for r in m.ranks] == ["0"]
    assert "spec_decode_draft_tokens_total" in missing  # spec decoding is off on that server


def test_vllm_disable_log_stats_has_no_engine_series() -> None:
    m, _, _ = parse_metrics((VLLM / "metrics.disable-log-stats.txt").read_bytes(), specs.VLLM)
    assert m.series == 0
    assert m.get("requests_running") is None


def test_vllm_old_names_are_aliases() -> None:
    m, _, _ = parse_metrics((SAMPLES / "vllm-metrics-v1-2025-03-production-stack-issue318.txt").read_text(), specs.VLLM)
    assert m.get("kv_cache_usage") == 0.0  # from vllm:gpu_cache_usage_perc


def test_vllm_data_parallel_ranks_are_summed_and_kept() -> None:
    base = (VLLM / "metrics.load.txt").read_text()
    m, _, _ = parse_metrics(dp_payload(base, 4), specs.VLLM)
    assert len(m.ranks) == 4
    assert m.get("requests_running") == sum(r.requests_running or 0 for r in m.ranks)
    assert m.get("kv_cache_usage") == max(r.kv_cache_usage or 0 for r in m.ranks)
    assert m.get("spec_decode_draft_tokens_total") == 4 * 1000
    assert m.histograms["ttft"].count == 4 * 15


def test_llamacpp_counters_and_cache_hits() -> None:
    m, missing, _ = parse_metrics((LLAMA / "metrics-after-requests.txt").read_bytes(), specs.LLAMACPP)
    assert m.get("requests_running") == 0
    assert m.get("generation_tokens_total") == 81
    assert m.get("prefix_cache_hits_total") == 169
    assert m.get("kv_cache_usage") is None
    assert "ttft" in missing and "latency" in missing["ttft"]


def test_sglang_single_rank_gauges() -> None:
    m, _, _exp = parse_metrics((SAMPLES / "sglang-metrics-v0.5.1-issue13485.txt").read_text(), specs.SGLANG)
    assert m.get("requests_running") == 1
    assert m.get("kv_cache_usage") == 0.0
    assert m.get("generation_tokens_per_s_gauge") is not None
    assert m.model_names == ("Qwen-32B",)
    assert m.series == 4  # the four sglang: lines of the window; the pasted curl command is not one


def test_sglang_old_name_label() -> None:
    m, _, _ = parse_metrics((SAMPLES / "sglang-metrics-2024-11-pr1853-oldnames.txt").read_text(), specs.SGLANG)
    assert m.model_names and m.model_names[0].startswith("/shared/public")


def test_sglang_tp_duplicates_are_not_double_counted() -> None:
    text = (
        "# TYPE sglang:num_running_reqs gauge\n"
        'sglang:num_running_reqs{dp_rank="0",model_name="m",tp_rank="0"} 5\n'
        'sglang:num_running_reqs{dp_rank="0",model_name="m",tp_rank="1"} 5\n'
        'sglang:num_running_reqs{dp_rank="1",model_name="m",tp_rank="0"} 2\n'
    )
    m, _, _ = parse_metrics(text, specs.SGLANG)
    assert m.get("requests_running") == 7
    assert [r.rank for r in m.ranks] == ["0", "1"]


def test_slots_estimate_kv_fill() -> None:
    idle = parse_slots((LLAMA / "slots-idle.json").read_bytes())
    assert idle.total_slots == 2 and idle.busy_slots == 0 and idle.kv_fill == 0
    busy = parse_slots(
        b'[{"id":0,"n_ctx":1000,"is_processing":true,"n_prompt_tokens":100,'
        b'"next_token":[{"n_decoded":150,"n_remain":10}]},{"id":1,"n_ctx":1000,"is_processing":false}]'
    )
    assert busy.busy_slots == 1 and busy.kv_fill == 0.125


def test_models_and_version() -> None:
    assert parse_models((VLLM / "v1_models.json").read_bytes()) == ("tiny",)
    assert parse_models((LLAMA / "v1-models.json").read_bytes()) == ("tiny",)
    assert parse_models((REAL / "litellm-1.108.7" / "v1-models.json").read_bytes()) == ("tiny",)
    assert parse_version((VLLM / "version.json").read_bytes()) == "0.32.0"


def test_ollama_ps_from_a_real_answer() -> None:
    text = (SAMPLES / "ollama-api-ps-2025-08-nirmato-issue13.txt").read_text()
    body = text[text.index("{") : text.index("# Also")]
    (model,) = parse_ollama_ps(body)
    assert model.name == "gemma3:latest"
    assert model.partial_offload is False
    assert model.context_length is None  # this server predates context_length
    assert model.quantization == "Q4_K_M"


def test_ollama_partial_offload_is_flagged() -> None:
    (model,) = parse_ollama_ps(b'{"models":[{"name":"big","size":100,"size_vram":60,"context_length":8192}]}')
    assert model.partial_offload is True and model.context_length == 8192


def test_litellm_health_endpoints() -> None:
    lit = REAL / "litellm-1.108.7"
    assert parse_litellm_liveliness((lit / "health-liveliness.json").read_bytes())
    assert parse_litellm_readiness((lit / "health-readiness.json").read_bytes())["status"] == "healthy"
    health = parse_litellm_health((lit / "health.json").read_bytes())
    assert len(health["healthy"]) == 1 and not health["unhealthy"]
    down = parse_litellm_health((lit / "health-backend-down.json").read_bytes())
    assert len(down["unhealthy"]) == 1 and down["unhealthy"][0]["error"]


def test_slots_say_what_the_requests_in_progress_generated() -> None:
    assert parse_slots((LLAMA / "slots-after-requests.json").read_bytes()).decoded is None  # nothing in progress
    busy = parse_slots(
        b'[{"id":0,"n_ctx":1000,"is_processing":true,"next_token":[{"n_decoded":150}]},'
        b'{"id":1,"n_ctx":1000,"is_processing":true,"next_token":[{"n_decoded":40}]},'
        b'{"id":2,"n_ctx":1000,"is_processing":false,"next_token":[{"n_decoded":900}]}]'
    )
    assert busy.decoded == 190  # a finished request's count is in tokens_predicted_total already


def test_live_generation_adds_the_requests_in_progress() -> None:
    live = LiveGeneration()
    assert live.count(100, 50) == 150  # 100 counted by the engine at the requests' ends, 50 in progress
    assert live.count(100, 80) == 180
    # the request ended between the two reads: its 80 left /slots before /metrics counted them
    assert live.count(100, 0) == 180
    assert live.count(185, 0) == 185  # counted now, and 5 more
    assert live.count(185, 30) == 215
    # ... or ended between them the other way round (its 35 in /slots, its 40 in the counter): counted
    # twice for one poll, then held until the engine's count passes it, so no fall reads as a restart
    assert live.count(225, 35) == 260
    assert live.count(225, 0) == 260
    assert live.count(270, 0) == 270
    assert live.count(10, 5) == 15  # the engine's own counter went back: a restart, passed on as a fall


def test_live_generation_starts_over_when_the_engine_restarts_before_any_request_ended() -> None:
    live = LiveGeneration()
    assert live.count(0, 300, "1000") == 300  # nothing ended yet: all in progress
    # restarted: its counter is 0 as before, which alone cannot tell; its start time can
    assert live.count(0, 20, "2000") == 20
    assert live.count(0, 40, "2000") == 40


def test_llama_cpp_speed_gauges_are_not_a_first_poll_rate() -> None:
    """llama.cpp's prompt/predicted_tokens_seconds are request speeds (prefill runs at thousands of tok/s),
    not throughput: one poll has no rate yet (n/a); SGLang's gen_throughput is a throughput and stands in."""
    from poolconsole.config.models import EngineKind
    from poolconsole.model.snapshots import EngineSnapshot, EngineState
    from poolconsole.model.view import engine_view

    def one_poll(kind: str, page: str, spec: MetricSpec) -> EngineSnapshot:
        metrics, _, _ = parse_metrics(page, spec)
        return EngineSnapshot(
            "e", EngineKind(kind), "http://x", None, 0.0, 0.0, EngineState.OK, None, "", None, None, (), metrics,
        )  # fmt: skip

    llama = one_poll("llamacpp", (LLAMA / "metrics-after-requests.txt").read_text(), specs.LLAMACPP)
    assert llama.metrics is not None and (llama.metrics.get("prompt_tokens_per_s_gauge") or 0) > 0  # a speed
    view = engine_view([llama])
    assert view.prompt_tokens_per_s is None and view.generation_tokens_per_s is None
    sglang = one_poll("sglang", (SAMPLES / "sglang-metrics-v0.5.1-issue13485.txt").read_text(), specs.SGLANG)
    assert engine_view([sglang]).generation_tokens_per_s == sglang.metrics.get("generation_tokens_per_s_gauge")  # type: ignore[union-attr]
