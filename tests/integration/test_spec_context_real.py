"""Speculative decoding per workload and the servable context (issue 15 items 4, 5, 7) against the real
llama-server: a target GGUF with a draft GGUF (two tiny generated models: the same seeded weights in f32
and f16, so the draft is usually right), its llamacpp:spec_decode_* counters read around each workload;
and the context probe against a small `-c`, where a length errors."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from poolconsole import cli
from poolconsole.collect.engines.spec_window import parse_window
from tests.helpers.engines import llama_server, model_path

pytestmark = pytest.mark.engine


def config(tmp_path: Path, url: str) -> Path:
    path = tmp_path / "pool.toml"
    path.write_text(f'[[engines]]\nname = "tiny"\nkind = "llamacpp"\nurl = "{url}"\n')
    return path


async def smoke_json(capsys: pytest.CaptureFixture[str], tmp_path: Path, *argv: str) -> tuple[int, Any]:
    capsys.readouterr()
    store = ["--db", str(tmp_path / "smoke.db"), "--audit-db", str(tmp_path / "audit.db"), "--json"]
    code = await asyncio.to_thread(cli.main, ["smoke", "tiny", *argv, *store])
    return code, json.loads(capsys.readouterr().out)


async def test_draft_model_counters_are_read_per_workload(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target, draft = model_path("tiny", seed=1), model_path("tiny-f16", f16=True, seed=1)
    spec = ("--spec-type", "draft-simple", "--spec-draft-model", str(draft), "-c", "2048", "-np", "1")
    with llama_server(tmp_path, target, *spec) as url:
        before = parse_window("llamacpp", httpx.get(url + "/metrics", trust_env=False).text)
        code, doc = await smoke_json(
            capsys, tmp_path, "--config", str(config(tmp_path, url)), "--workload", "code,chat", "--requests", "2"
        )
        after = parse_window("llamacpp", httpx.get(url + "/metrics", trust_env=False).text)
    assert code == 0, [(r["check"], r.get("reason")) for r in doc["results"] if not r["passed"]]
    by = {r["workload"]: r for r in doc["results"] if "workload" in r}
    assert set(by) == {"code", "chat"}
    drafted = 0.0
    for name, result in by.items():
        figures = result["details"]["spec_decode"]
        assert figures["source"].startswith("llamacpp spec_decode counters"), name
        assert figures["draft_tokens"] > 0 and figures["drafts"] > 0, figures
        assert result["spec_decode_acceptance_rate"] == pytest.approx(
            figures["accepted_tokens"] / figures["draft_tokens"]
        )
        assert result["spec_decode_acceptance_rate"] > 0.5  # the f16 copy of the target drafts well
        assert result["details"]["shared_window"] is None  # nothing else was sent
        drafted += figures["draft_tokens"]
    # the per-workload windows add up to what the engine counted over the whole run
    assert drafted == (after.get("draft_tokens") or 0) - (before.get("draft_tokens") or 0)
    assert doc["spec_decode"][0]["verdict"].startswith("keep speculative decoding for: ")


async def test_the_context_probe_finds_the_length_a_small_context_refuses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with llama_server(tmp_path, model_path("tiny"), "-c", "2048", "-np", "1") as url:
        code, doc = await smoke_json(
            capsys, tmp_path, "--config", str(config(tmp_path, url)), "--context", "512,1k,max,3k"
        )
    assert code == 1
    lengths = {r["check"]: r for r in doc["results"] if r["check"].startswith("context:")}
    assert list(lengths) == ["context:512", "context:1k", "context:max", "context:3k"]
    assert [r["passed"] for r in lengths.values()] == [True, True, True, False]
    refused = lengths["context:3k"]["details"]
    assert refused["outcome"] == "errors" and "exceed_context_size_error" in refused["errors"][0]
    one_k = lengths["context:1k"]
    assert one_k["details"]["token_counts"] == "the engine's /tokenize"
    assert 1024 - 32 - 8 <= one_k["details"]["prompt_tokens_sent"][0] <= 1024 - 32  # sized by llama.cpp's tokenizer
    assert one_k["ttft_s"]["p50"] is not None and one_k["output_tokens_per_s"]["per_stream"] is not None
    assert doc["context"][0]["verdict"] == "advertised 2048, served 2048 at 1 concurrent; 3072 errors"
    assert doc["context"][0]["advertised_from"] == "/props n_ctx (per slot)"
