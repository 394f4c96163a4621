"""vLLM's CPU build (0.32.0) with n-gram speculation (`--speculative-config '{"method": "ngram", ...}'`,
issue 15 item 7): it serves, its `vllm:spec_decode_*` counters are read around each workload, and the stored
run's engine_reported says speculative decoding is on."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest

from poolconsole import cli
from poolconsole.collect.engines.spec_window import parse_window
from tests.helpers.engines import vllm_server

pytestmark = pytest.mark.engine

NGRAM = json.dumps({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3, "prompt_lookup_min": 1})


async def test_ngram_speculation_counters_are_read_per_workload(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with vllm_server(tmp_path, "--speculative-config", NGRAM) as url:
        config = tmp_path / "pool.toml"
        config.write_text(f'[[engines]]\nname = "tiny"\nkind = "vllm"\nurl = "{url}"\n')
        async with httpx.AsyncClient(trust_env=False, timeout=30) as client:
            before = parse_window("vllm", (await client.get(url + "/metrics")).content)
            argv = ["smoke", "tiny", "--config", str(config), "--db", str(tmp_path / "s.db")]
            argv += ["--audit-db", str(tmp_path / "a.db"), "--workload", "code,chat", "--requests", "2", "--json"]
            capsys.readouterr()
            code = await asyncio.to_thread(cli.main, argv)
            doc = json.loads(capsys.readouterr().out)
            after = parse_window("vllm", (await client.get(url + "/metrics")).content)
    assert code == 0, doc
    drafted = 0.0
    for result in (r for r in doc["results"] if r.get("workload")):
        figures = result["details"]["spec_decode"]
        assert figures["draft_tokens"] > 0 and figures["drafts"] > 0, figures
        assert result["spec_decode_acceptance_rate"] == pytest.approx(
            figures["accepted_tokens"] / figures["draft_tokens"]
        )
        drafted += figures["draft_tokens"]
    assert drafted == (after.get("draft_tokens") or 0) - (before.get("draft_tokens") or 0)
    capsys.readouterr()
    assert cli.main(["runs", "--db", str(tmp_path / "s.db"), "--json"]) == 0
    (run,) = json.loads(capsys.readouterr().out)
    assert run["conditions"]["tiny"]["engine_reported"]["spec_decoding"] == "on"
