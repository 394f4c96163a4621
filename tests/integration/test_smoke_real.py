"""Smoke tests against the real llama-server and the real LiteLLM proxy in front of it."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.engines import litellm_proxy, llama_server, model_path

pytestmark = pytest.mark.engine


def smoke(config: Path, tmp: Path, *args: str, key: str | None = None) -> subprocess.CompletedProcess[str]:
    import os

    env = {**os.environ, **({"TEST_GATEWAY_KEY": key} if key else {})}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "poolconsole",
            "smoke",
            "--config",
            str(config),
            "--db",
            str(tmp / "smoke.sqlite3"),
            "--json",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )


async def test_llama_server_directly_and_through_litellm(tmp_path: Path) -> None:
    model = model_path("tiny")
    with (
        llama_server(tmp_path, model, "-c", "4096", "-np", "4", "--threads-http", "16") as llama,
        litellm_proxy(tmp_path, {"tiny": llama}) as gateway,
    ):
        config = tmp_path / "pool.toml"
        config.write_text(
            f'[[engines]]\nname = "llama"\nkind = "llamacpp"\nurl = "{llama}"\n\n'
            f'[[engines]]\nname = "gw"\nkind = "litellm"\nurl = "{gateway}"\napi_key_env = "TEST_GATEWAY_KEY"\n'
        )
        proc = await asyncio.to_thread(
            smoke,
            config,
            tmp_path,
            "--via-gateway",
            "--concurrency",
            "1,4",
            "--requests",
            "4",
            key="sk-poolconsole-test",
        )
        doc = json.loads(proc.stdout)
        failed = [(r["target"], r["check"], r["reason"]) for r in doc["results"] if not r["passed"]]
        assert proc.returncode == 0 and doc["passed"], failed
        targets = {(r["target"], r["check"], r["concurrency"]) for r in doc["results"]}
        for target in ("llama", "gw"):
            assert (target, "chat", None) in targets and (target, "completions", None) in targets
            assert (target, "chat_stream", 1) in targets and (target, "chat_stream", 4) in targets
        direct = next(
            r
            for r in doc["results"]
            if r["target"] == "llama" and r["check"] == "chat_stream" and r["concurrency"] == 4
        )
        assert direct["output_tokens_per_s"]["per_stream"] > 0 and direct["ttft_s"]["mean"] > 0
        # the same gateway without its key: every check fails with the reason, exit 1
        proc = await asyncio.to_thread(smoke, config, tmp_path, "gw")
        doc = json.loads(proc.stdout)
        assert proc.returncode == 1 and not doc["passed"]
        assert all(not r["passed"] and r["reason"] for r in doc["results"])
