"""Speculative decoding per workload and the servable context (issue 15 items 4-5), without a network:
the window counters read from real /metrics captures, the acceptance and "other traffic" arithmetic, the
verdicts in words, the --workload / --context arguments."""

from __future__ import annotations

from pathlib import Path

import pytest

from poolconsole.collect.engines.spec_window import Reading, parse_window, shared_window, spec_figures
from poolconsole.model.smoke import CheckResult
from poolconsole.ops.smoke.context import LengthError, context_verdict, parse_lengths
from poolconsole.ops.smoke.workloads import WorkloadError, parse_workloads, verdict
from poolconsole.sim.vllm_dp import dp_payload

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "real"  # verbatim copies (real/PROVENANCE.md)
LLAMA = FIXTURES / "llamacpp-b1-0c1e570" / "metrics-after-requests.txt"
VLLM = FIXTURES / "vllm-0.32.0-cpu" / "metrics.after.txt"


def reading(kind: str, **values: float) -> Reading:
    from types import MappingProxyType

    return Reading(kind, MappingProxyType(values))


def test_llamacpp_capture_has_its_draft_counters_at_zero_which_is_no_speculative_decoding() -> None:
    page = parse_window("llamacpp", LLAMA.read_text())
    assert page.error is None
    assert (page.get("draft_tokens"), page.get("accepted_tokens"), page.get("drafts")) == (0, 0, 0)
    assert page.get("generation_tokens") == 81  # llamacpp:tokens_predicted_total of the capture
    figures = spec_figures(page, page)
    assert figures["acceptance_rate"] is None and "no draft token" in figures["reason"]


def test_vllm_without_speculative_config_has_no_counters_and_says_so() -> None:
    page = parse_window("vllm", VLLM.read_text())
    assert page.get("draft_tokens") is None and page.get("requests") == 23
    assert "no spec_decode counters" in spec_figures(page, page)["reason"]


def test_vllm_spec_counters_summed_over_data_parallel_ranks_give_rate_and_mean_length() -> None:
    before = parse_window("vllm", dp_payload(VLLM.read_text(), 2))  # 2 ranks x (250 drafts, 1000, 700)
    assert before.get("draft_tokens") == 2000 and before.get("drafts") == 500
    after = reading("vllm", draft_tokens=2300, accepted_tokens=1610, drafts=600)
    figures = spec_figures(before, after)
    assert figures["acceptance_rate"] == pytest.approx(210 / 300)  # deltas, not lifetime totals (0.70 either way)
    after = reading("vllm", draft_tokens=2300, accepted_tokens=1430, drafts=600)
    figures = spec_figures(before, after)
    assert figures["acceptance_rate"] == pytest.approx(30 / 300)  # the lifetime ratio would read 0.62
    assert figures["mean_accepted_length"] == pytest.approx(1 + 30 / 100)


def test_a_counter_that_went_back_is_a_restart_not_a_rate() -> None:
    before = reading("vllm", draft_tokens=900, accepted_tokens=600, drafts=300)
    after = reading("vllm", draft_tokens=30, accepted_tokens=20, drafts=10)
    assert spec_figures(before, after)["acceptance_rate"] is None


def test_sglang_reads_its_gauges_after_the_run() -> None:
    before = reading("sglang", accept_rate=0.9, accept_length=3.7)
    after = reading("sglang", accept_rate=0.31, accept_length=1.93)
    figures = spec_figures(before, after)
    assert (figures["acceptance_rate"], figures["mean_accepted_length"]) == (0.31, 1.93)
    assert "absent or 0" in spec_figures(before, reading("sglang", accept_rate=0.0))["reason"]


def test_other_traffic_in_the_window_is_said() -> None:
    before = reading("vllm", requests=10, generation_tokens=1000)
    assert shared_window(before, reading("vllm", requests=14, generation_tokens=1512), 4, 512) is None
    moved = shared_window(before, reading("vllm", requests=19, generation_tokens=2000), 4, 512)
    assert moved is not None and "finished 9 requests, the run sent 4" in moved
    # llama.cpp counts no requests: generated tokens tell
    llama = shared_window(reading("llamacpp", generation_tokens=0), reading("llamacpp", generation_tokens=900), 4, 512)
    assert llama is not None and "generated 900 tokens" in llama


def result(workload: str, rate: float | None, tps: float, reason: str | None = None) -> CheckResult:
    return CheckResult(
        "spark",
        "gpt-oss-120b",
        f"workload:{workload}",
        True,
        "",
        concurrency=4,
        output_tokens_per_s={"per_stream": tps, "aggregate": tps * 4},
        details={"spec_decode": {"reason": reason, "mean_accepted_length": None}},
        workload=workload,
        spec_decode_acceptance_rate=rate,
    )


def test_verdict_in_words_with_and_without_an_ab_measurement() -> None:
    spec = [result("code", 0.71, 69.0), result("chat", 0.22, 47.0)]
    without = {"code": result("code", None, 50.0), "chat": result("chat", None, 50.0)}
    words = verdict(spec, without)["verdict"]
    assert words.startswith(
        "keep speculative decoding for: code (acceptance 0.71, +38 % tok/s); not for: chat (0.22, -6 %)"
    )
    by_acceptance = verdict(spec)
    assert by_acceptance["verdict"].startswith(
        "keep speculative decoding for: code (acceptance 0.71); not for: chat (0.22)"
    )
    assert [row["keep"] for row in by_acceptance["workloads"]] == [True, False]
    none = verdict([result("code", None, 50.0, "no speculative decoding: vllm /metrics has no spec_decode counters")])
    assert none["verdict"] == "no speculative decoding: vllm /metrics has no spec_decode counters"


def test_a_workload_result_carries_workload_and_a_null_rate_with_its_reason() -> None:
    doc = result("chat", None, 40.0, "no speculative decoding: no draft token was proposed during the run").to_json()
    assert doc["workload"] == "chat" and doc["spec_decode_acceptance_rate"] is None
    assert doc["unknown"] == {
        "spec_decode_acceptance_rate": "no speculative decoding: no draft token was proposed during the run"
    }
    plain = CheckResult("t", "m", "chat", True, "answered").to_json()
    assert "workload" not in plain and "spec_decode_acceptance_rate" not in plain


def test_workload_names_and_jsonl_prompt_sets(tmp_path: Path) -> None:
    assert [w.name for w in parse_workloads("code,chat,summarize,json")] == ["code", "chat", "summarize", "json"]
    good = tmp_path / "support.jsonl"
    good.write_text(
        '{"prompt": "reset my password"}\n\n{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 16}\n'
    )
    (loaded,) = parse_workloads(str(good))
    assert loaded.name == "support" and len(loaded.prompts) == 2 and loaded.prompts[1]["max_tokens"] == 16
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "ok"}\nnot json\n{"text": "x"}\n')
    with pytest.raises(WorkloadError) as raised:
        parse_workloads(f"code,poetry,{bad}")
    message = str(raised.value)
    assert "'poetry' is neither a built-in workload" in message
    assert f"{bad}:2: not JSON" in message and f'{bad}:3: needs "prompt"' in message


def test_context_lengths() -> None:
    assert parse_lengths("128k,1k,8k,32k,max,8k") == (1024, 8192, 32768, 131072, None)
    assert parse_lengths("3000") == (3000,)
    for bad in ("lots", "1k,abc", "", "8"):
        with pytest.raises(LengthError):
            parse_lengths(bad)


def length(tokens: int, passed: bool, outcome: str = "served") -> CheckResult:
    return CheckResult("spark", "m", "context", passed, "", details={"context_tokens": tokens, "outcome": outcome})


def test_context_verdict_names_the_largest_served_before_the_first_failure() -> None:
    runs = [length(1024, True), length(65536, True), length(131072, False, "queues"), length(262144, True)]
    got = context_verdict(runs, 4, 131072, "/v1/models max_model_len", 131072)
    assert (
        got["verdict"]
        == "advertised 131072 (profile max_model_len 131072), served 65536 at 4 concurrent; 131072 queues"
    )
    assert (got["served"], got["first_failing"], got["first_failing_outcome"]) == (65536, 131072, "queues")
    clean = context_verdict([length(1024, True), length(2048, True)], 1, 2048, "/props n_ctx (per slot)", None)
    assert clean["verdict"] == "advertised 2048, served 2048 at 1 concurrent (every length tried)"
    none = context_verdict([length(1024, False, "errors")], 2, None, None, None)
    assert (
        none["verdict"] == "advertised context unknown, served none of the lengths tried at 2 concurrent; 1024 errors"
    )
