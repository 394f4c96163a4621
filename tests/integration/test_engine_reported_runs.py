"""The profile really active, as the engine itself reports it (issue 15 item 6), stored with each smoke run
as `engine_reported` beside the profile hosts.toml names, and `runs --compare` saying where the engine
disagrees: SGLang's `/server_info` on the demo pool's simulated SGLang, llama.cpp's `/props` on a real
llama-server."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from poolconsole import cli
from poolconsole.sim.demo import SimPool
from tests.helpers.engines import llama_server, model_path

SGLANG = "gemma3-27b-nvfp4"


@pytest.fixture
async def demo(tmp_path: Path) -> AsyncIterator[Path]:
    pool = SimPool(seed=3)
    await pool.start()
    try:
        await pool.wait_ready()
        text = pool.config_toml()
        marker = f'name = "{SGLANG}"'
        block = text.index(marker)
        end = text.index("[[engines]]", block)
        profile = (
            '\n[[engines.profiles]]\nname = "nvfp4-fp8kv-eagle"\nformat = "NVFP4"\nmax_model_len = 65536\n'
            'max_num_seqs = 24\ntp_size = 2\nkv_dtype = "fp8"\n\n'
        )
        path = tmp_path / "demo.toml"
        path.write_text(text[:end] + profile + text[end:])
        yield path
    finally:
        await pool.stop()


async def smoke(capsys: pytest.CaptureFixture[str], config: Path, db: Path, target: str, audit: Path) -> int:
    argv = ["smoke", target, "--config", str(config), "--db", str(db), "--audit-db", str(audit)]
    capsys.readouterr()
    code = await asyncio.to_thread(cli.main, [*argv, "--workload", "chat", "--requests", "1", "--json"])
    capsys.readouterr()
    return code


def runs(capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
    capsys.readouterr()
    assert cli.main(["runs", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


async def test_sglang_server_info_is_stored_and_compare_names_the_disagreement(
    demo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, audit = tmp_path / "smoke.db", tmp_path / "audit.db"
    assert await smoke(capsys, demo, db, SGLANG, audit) == 0
    assert await smoke(capsys, demo, db, SGLANG, audit) == 0
    second, first = runs(capsys, "--db", str(db))
    told = first["conditions"][SGLANG]["engine_reported"]
    assert told["source"] == ["/server_info"]
    assert told["max_context"] == 32768 and told["max_num_seqs"] == 24 and told["tp_size"] == 2
    assert told["kv_dtype"] == "fp8_e4m3" and told["spec_decoding"] == "EAGLE"
    # the profile declares 65536: the engine serves 32768. fp8 = fp8_e4m3, 24 = 24, 2 = 2: no disagreement
    expected = [{"field": "max_model_len", "profile": 65536, "engine": 32768}]
    assert first["conditions"][SGLANG]["engine_disagrees"] == expected
    diff = runs(capsys, "--db", str(db), "--compare", str(first["run_id"]), str(second["run_id"]))
    assert [(d["run"], d["field"], d["profile"], d["engine"]) for d in diff["engine_disagrees"]] == [
        (first["run_id"], "max_model_len", 65536, 32768),
        (second["run_id"], "max_model_len", 65536, 32768),
    ]
    capsys.readouterr()
    assert cli.main(["runs", "--db", str(db), "--compare", str(first["run_id"]), str(second["run_id"])]) == 0
    text = capsys.readouterr().out
    assert (
        f"run {first['run_id']} {SGLANG}: the engine reports max_model_len 32768, "
        "profile nvfp4-fp8kv-eagle in hosts.toml says 65536"
    ) in text


@pytest.mark.engine
async def test_llama_server_props_are_stored_with_the_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with llama_server(tmp_path, model_path("tiny"), "-c", "2048", "-np", "2") as url:
        config = tmp_path / "pool.toml"
        # a common slip: -c is the whole cache, split over -np slots; the profile says 2048 per request
        config.write_text(
            f'[[engines]]\nname = "tiny"\nkind = "llamacpp"\nurl = "{url}"\nprofile = "q"\n\n'
            '[[engines.profiles]]\nname = "q"\nformat = "GGUF F32"\nmax_model_len = 2048\nmax_num_seqs = 2\n'
        )
        db = tmp_path / "smoke.db"
        assert await smoke(capsys, config, db, "tiny", tmp_path / "audit.db") == 0
    (run,) = runs(capsys, "--db", str(db))
    told = run["conditions"]["tiny"]["engine_reported"]
    assert told["source"] == ["/props"]
    assert told["max_context"] == 1024 and told["max_num_seqs"] == 2 and told["kv_cache_tokens"] == 2048
    assert told["quantization"] == "all F32" and told["spec_decoding"] == "off"
    expected = [{"field": "max_model_len", "profile": 2048, "engine": 1024}]
    assert run["conditions"]["tiny"]["engine_disagrees"] == expected
