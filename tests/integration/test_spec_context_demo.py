"""Speculative decoding per workload and the servable context (issue 15 items 4-5) on the demo pool: its
speculative vLLM engine (gpt-oss-120b-spark, the real vLLM spec_decode counters) accepts code drafts far
more often than chat drafts, and a run says so per workload and stores it with the run's conditions; the
context probe finds qwen3-30b-a3b's cliff at 8 concurrent (its KV cache holds 220k tokens: 8 x 16k fit,
8 x 30k queue)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from poolconsole import cli
from poolconsole.sim.demo import SimPool

SPEC_ENGINE = "gpt-oss-120b-spark"
CLIFF_ENGINE = "qwen3-30b-a3b"


@pytest.fixture
async def demo(tmp_path: Path) -> AsyncIterator[Path]:
    pool = SimPool(seed=3)
    await pool.start()
    try:
        await pool.wait_ready()
        path = tmp_path / "demo.toml"
        path.write_text(pool.config_toml())
        yield path
    finally:
        await pool.stop()


async def smoke_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any]:
    capsys.readouterr()
    code = await asyncio.to_thread(cli.main, ["smoke", *argv, "--json"])  # its own loop; the pool serves from this
    return code, json.loads(capsys.readouterr().out)


def runs_json(capsys: pytest.CaptureFixture[str], db: Path) -> Any:
    capsys.readouterr()
    assert cli.main(["runs", "--db", str(db), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


async def test_workloads_on_the_speculative_engine_differ_in_acceptance_and_are_stored(
    demo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "smoke.db"
    argv = [SPEC_ENGINE, "--config", str(demo), "--db", str(db), "--audit-db", str(tmp_path / "audit.db")]
    code, doc = await smoke_json(capsys, *argv, "--workload", "code,chat", "--concurrency", "4", "--requests", "4")
    assert code == 0, doc
    by = {r["workload"]: r for r in doc["results"] if "workload" in r}
    assert set(by) == {"code", "chat"}
    code_rate, chat_rate = by["code"]["spec_decode_acceptance_rate"], by["chat"]["spec_decode_acceptance_rate"]
    assert code_rate is not None and chat_rate is not None
    assert code_rate > 0.6 and chat_rate < 0.45 and code_rate - chat_rate > 0.2, (code_rate, chat_rate)
    spec = by["code"]["details"]["spec_decode"]
    assert spec["draft_tokens"] > 0 and spec["mean_accepted_length"] > 2.5  # 1 + accepted / drafts
    (summary,) = doc["spec_decode"]
    assert summary["verdict"].startswith(f"keep speculative decoding for: code (acceptance {code_rate:.2f})")
    assert f"not for: chat ({chat_rate:.2f})" in summary["verdict"]

    (run,) = runs_json(capsys, db)
    stored = run["conditions"][SPEC_ENGINE]
    assert stored["kind"] == "vllm" and stored["profile"] == "fp8-131k"  # with the run's conditions
    assert stored["workloads"][0]["verdict"] == summary["verdict"]
    rates = {r["workload"]: r["spec_decode_acceptance_rate"] for r in run["results"] if "workload" in r}
    assert rates == {"code": code_rate, "chat": chat_rate}


async def test_an_engine_without_speculative_decoding_reads_null_with_the_reason(
    demo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [CLIFF_ENGINE, "--config", str(demo), "--db", str(tmp_path / "s.db"), "--audit-db", str(tmp_path / "a")]
    code, doc = await smoke_json(capsys, *argv, "--workload", "json", "--requests", "1")
    assert code == 0
    (result,) = [r for r in doc["results"] if "workload" in r]
    assert result["spec_decode_acceptance_rate"] is None
    assert (
        result["unknown"]["spec_decode_acceptance_rate"]
        == "no speculative decoding: vllm /metrics has no spec_decode counters"
    )


async def test_the_context_probe_finds_the_demo_cliff(
    demo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "smoke.db"
    argv = [CLIFF_ENGINE, "--config", str(demo), "--db", str(db), "--audit-db", str(tmp_path / "audit.db")]
    code, doc = await smoke_json(capsys, *argv, "--context", "1k,16k,30k", "--concurrency", "8")
    assert code == 1  # a length queued
    lengths = {r["check"]: r for r in doc["results"] if r["check"].startswith("context:")}
    assert [lengths[k]["passed"] for k in ("context:1k", "context:16k", "context:30k")] == [True, True, False]
    queued = lengths["context:30k"]["details"]
    assert queued["outcome"] == "queues" and queued["waiting_max"] >= 1 and queued["kv_usage_max"] > 0.9
    served = lengths["context:16k"]
    assert served["details"]["token_counts"] == "the engine's /tokenize"
    assert 16384 - 32 - 90 <= served["prompt_tokens"] <= 16384 - 32  # sized by the engine's tokenizer
    assert served["ttft_s"]["p50"] > 16000 / 4000 * 0.8  # its prefill (4000 tok/s in the demo)
    assert 0.5 < served["details"]["kv_usage_max"] < 0.9
    (summary,) = doc["context"]
    assert summary["verdict"] == "advertised 32768, served 16384 at 8 concurrent; 30720 queues"
    (run,) = runs_json(capsys, db)
    assert run["conditions"][CLIFF_ENGINE]["context"][0]["verdict"] == summary["verdict"]
