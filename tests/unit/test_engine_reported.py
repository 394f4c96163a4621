"""What an engine reports of its own configuration (collect.engines.reported), parsed from real captures:
vLLM 0.32.0's `vllm:cache_config_info` and `/v1/models`, llama.cpp b1-0c1e570's `/props`, SGLang's
`/server_info`; and where it disagrees with the profile hosts.toml names."""

from __future__ import annotations

from pathlib import Path

import pytest

from poolconsole.collect.engines.reported import (
    disagreements,
    parse_llamacpp_props,
    parse_sglang_server_info,
    parse_vllm_metrics,
    parse_vllm_models,
)
from poolconsole.collect.prom import ParseError

FIX = Path(__file__).resolve().parents[1] / "fixtures"
VLLM = FIX / "real" / "vllm-0.32.0-cpu"
LLAMA = FIX / "real" / "llamacpp-b1-0c1e570"


def test_vllm_cache_config_info_labels() -> None:
    got = parse_vllm_metrics((VLLM / "metrics.kvcachemetrics.after.txt").read_bytes())
    assert got["kv_dtype"] == "auto"
    assert got["gpu_memory_utilization"] == 0.92
    assert got["kv_cache_tokens"] == 4096  # kv_cache_size_tokens (128 blocks x 32)
    assert got["prefix_caching"] is True
    assert got["spec_decoding"] == "off"  # no vllm:spec_decode_* counters on this server
    assert got["max_context"] is None  # /metrics does not say it: /v1/models does
    assert parse_vllm_models((VLLM / "v1_models.json").read_bytes()) == 1024


def test_vllm_speculative_counters_mean_speculative_decoding_is_on() -> None:
    page = (VLLM / "metrics.idle.txt").read_text()
    page += '# TYPE vllm:spec_decode_num_drafts_total counter\nvllm:spec_decode_num_drafts_total{engine="0"} 0.0\n'
    assert parse_vllm_metrics(page)["spec_decoding"] == "on"


def test_llamacpp_props() -> None:
    got = parse_llamacpp_props((LLAMA / "props.json").read_bytes())
    assert got["max_context"] == 1024  # one slot's n_ctx
    assert got["max_num_seqs"] == 2 and got["kv_cache_tokens"] == 2048
    assert got["quantization"] == "all F32"
    assert got["spec_decoding"] == "off"  # "speculative.types": "none"
    assert got["kv_dtype"] is None  # /props does not say


def test_sglang_server_info() -> None:
    got = parse_sglang_server_info((FIX / "sglang-server-info" / "server_info.json").read_bytes())
    assert got["max_context"] is None  # context_length null: not given, the model's own (/v1/models says)
    assert got["max_num_seqs"] == 128 and got["tp_size"] == 1
    assert got["kv_dtype"] == "auto" and got["quantization"] is None
    assert got["kv_cache_tokens"] == 20480 and got["gpu_memory_utilization"] == 0.907
    assert got["spec_decoding"] == "off" and got["spec_draft_tokens"] is None
    assert got["prefix_caching"] is True


@pytest.mark.parametrize(
    ("parse", "body"),
    [(parse_sglang_server_info, b"<html>"), (parse_llamacpp_props, b"[1, 2]"), (parse_vllm_models, b"{")],
)
def test_bad_bodies_are_parse_errors(parse: object, body: bytes) -> None:
    with pytest.raises(ParseError):
        parse(body)  # type: ignore[operator]


PROFILE = {"max_model_len": 32768, "max_num_seqs": 16, "tp_size": 2, "kv_dtype": "fp8", "format": "GGUF Q4_K_M"}


def test_only_declared_figures_the_engine_reports_are_compared() -> None:
    reported = {"max_context": 16384, "max_num_seqs": 16, "tp_size": None, "kv_dtype": "auto", "quantization": None}
    got = disagreements(PROFILE, {"max_model_len", "max_num_seqs", "tp_size", "kv_dtype"}, reported)
    assert got == [
        {"field": "max_model_len", "profile": 32768, "engine": 16384},
        {"field": "kv_dtype", "profile": "fp8", "engine": "auto"},  # auto is never a quantized KV cache
    ]
    assert disagreements(PROFILE, set(), reported) == []  # defaults hosts.toml never set are not claims


def test_kv_dtype_and_quantization_names_are_normalized() -> None:
    same = {"kv_dtype": "fp8_e4m3", "quantization": "Q4_K - Medium"}
    assert disagreements(PROFILE, {"kv_dtype"}, same) == []
    other = {"kv_dtype": "bfloat16", "quantization": "Q8_0"}
    assert [d["field"] for d in disagreements(PROFILE, {"kv_dtype"}, other)] == ["kv_dtype", "quantization"]
