"""`poolconsole smoke` against bad servers (each failure a clear reason, never a hang) and against the
simulated pool (every check, the JSON contract, stored runs and --compare)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from poolconsole.config import parse_config
from poolconsole.ops.smoke.runner import SmokeOptions, run_smoke
from poolconsole.sim.demo import SimPool
from tests.conftest import REAL
from tests.helpers.rawhttp import RawHTTPServer, Reply

LLAMA = REAL / "llamacpp-b1-0c1e570"
VLLM = REAL / "vllm-0.32.0-cpu"
RESULT_KEYS = {
    "target",
    "model",
    "check",
    "passed",
    "reason",
    "concurrency",
    "requests",
    "ttft_s",
    "connect_s",
    "itl_s",
    "output_tokens_per_s",
}


def sse_reply(body: bytes, **kw: Any) -> Reply:
    return Reply(200, body, {"Content-Type": "text/event-stream"}, **kw)


def routes(stream: Reply, chat: Reply | None = None) -> dict[str, Reply]:
    return {
        "/v1/models": Reply.file(LLAMA / "v1-models.json", "application/json"),
        "/v1/chat/completions": chat or Reply.file(LLAMA / "v1-chat-completions.json", "application/json"),
        "/v1/chat/completions#stream": stream,
        "/v1/completions": Reply.file(LLAMA / "v1-completions.json", "application/json"),
    }


def config_for(url: str, **smoke: Any) -> Any:
    extra = "".join(f"{k} = {json.dumps(v)}\n" for k, v in smoke.items())
    return parse_config(
        f'[[engines]]\nname = "bad"\nkind = "llamacpp"\nurl = "{url}"\n'
        + (f"[engines.smoke]\n{extra}" if extra else "")
    )


async def smoke(server: RawHTTPServer, **smoke_settings: Any) -> list[Any]:
    results, _ = await run_smoke(
        config_for(server.url, **smoke_settings), SmokeOptions(requests=1, seed=1, stall_s=1.0, total_s=5.0)
    )
    return results


def by_check(results: list[Any]) -> dict[str, Any]:
    return {r.check: r for r in results}


@pytest.fixture
async def server() -> AsyncIterator[RawHTTPServer]:
    srv = await RawHTTPServer().start()
    yield srv
    await srv.stop()


async def test_real_llamacpp_sse_capture_passes(server: RawHTTPServer) -> None:
    server.routes = routes(sse_reply((LLAMA / "v1-chat-completions-stream-usage.sse").read_bytes()))
    stream = by_check(await smoke(server))["chat_stream"]
    assert stream.passed, stream.reason
    assert stream.output_tokens == 4 and stream.ttft_s["p50"] is not None  # usage chunk: 4 completion tokens


async def test_real_vllm_sse_capture_passes(server: RawHTTPServer) -> None:
    server.routes = routes(sse_reply((VLLM / "chat.stream.sse.txt").read_bytes()))
    stream = by_check(await smoke(server))["chat_stream"]
    assert stream.passed, stream.reason
    assert stream.output_tokens is not None and stream.output_tokens > 0


async def test_stream_that_stalls_halfway(server: RawHTTPServer) -> None:
    server.routes = routes(sse_reply((VLLM / "chat.stream.sse.txt").read_bytes(), mode="stall"))
    stream = by_check(await smoke(server))["chat_stream"]
    assert not stream.passed and "stalled" in stream.reason


async def test_malformed_sse(server: RawHTTPServer) -> None:
    server.routes = routes(sse_reply(b'data: {"choices":[{"delta":{"content":"hi"}}]}\n\ndata: {not json\n\n'))
    stream = by_check(await smoke(server))["chat_stream"]
    assert not stream.passed and "malformed SSE" in stream.reason


async def test_stream_cut_before_done(server: RawHTTPServer) -> None:
    server.routes = routes(sse_reply((LLAMA / "v1-chat-completions-stream.sse").read_bytes(), mode="truncate"))
    stream = by_check(await smoke(server))["chat_stream"]
    assert not stream.passed and ("without [DONE]" in stream.reason or "Error" in stream.reason)


async def test_http_500(server: RawHTTPServer) -> None:
    body = (VLLM / "enginedead.completions.500.json").read_bytes()
    error = Reply(500, body, {"Content-Type": "application/json"})
    server.routes = routes(error, error)
    checks = by_check(await smoke(server))
    assert not checks["chat_stream"].passed and "HTTP 500" in checks["chat_stream"].reason
    assert not checks["chat"].passed and "500" in checks["chat"].reason


async def test_missing_usage_is_said(server: RawHTTPServer) -> None:
    server.routes = routes(sse_reply((LLAMA / "v1-chat-completions-stream.sse").read_bytes()))
    checks = by_check(await smoke(server))
    assert checks["chat_stream"].passed and "usage missing" in checks["chat_stream"].reason


async def test_malformed_tool_call(server: RawHTTPServer) -> None:
    server.routes = routes(
        sse_reply((LLAMA / "v1-chat-completions-stream-usage.sse").read_bytes()),
        Reply.file(VLLM / "chat.toolcall.named.json", "application/json"),
    )
    checks = by_check(await smoke(server, tools=True))
    assert (not checks["tool_call"].passed and "not valid JSON" in checks["tool_call"].reason) or "malformed" in checks[
        "tool_call"
    ].reason


async def test_a_refused_url_is_named_with_the_cause_status_gives() -> None:
    import socket

    from poolconsole.collect.http import PollClient, fetch

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    poll = PollClient()
    try:
        status = await fetch(poll, url + "/v1/models", timeout_s=5, max_bytes=1024)
    finally:
        await poll.aclose()
    assert status.error and "connection refused" in status.error
    results, _ = await run_smoke(config_for(url), SmokeOptions(requests=1, seed=1, stall_s=1.0, total_s=5.0))
    assert [(r.check, r.passed) for r in results] == [("models", False)]
    assert results[0].reason == f"{url}/v1/models: {status.error}"


async def test_correctness_probe(server: RawHTTPServer) -> None:
    server.routes = routes(sse_reply((LLAMA / "v1-chat-completions-stream-usage.sse").read_bytes()))
    checks = by_check(await smoke(server, probe_prompt="What is 2+2?", probe_expect=r"\b4\b"))
    assert not checks["chat"].passed and "correctness probe failed" in checks["chat"].reason


# -- the whole pool, through the CLI --------------------------------------------------------------


@pytest.fixture
async def sim() -> AsyncIterator[SimPool]:
    pool = SimPool(seed=5)
    await pool.start()
    await pool.wait_ready()
    yield pool
    await pool.stop()


def run_cli(config: Path, db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "poolconsole", "smoke", "--config", str(config), "--db", str(db), *args],
        capture_output=True,
        text=True,
        timeout=300,
    )


async def test_smoke_cli_on_the_demo_pool(sim: SimPool, tmp_path: Path) -> None:
    import asyncio

    text = sim.config_toml()
    config = tmp_path / "pool.toml"
    config.write_text(text + "\n")
    cfg = parse_config(text)
    assert {"qwen3-next-80b", "embeddings", "gateway"} <= {e.name for e in cfg.engines}
    db = tmp_path / "smoke.sqlite3"
    proc = await asyncio.to_thread(
        run_cli, config, db, "qwen3-next-80b", "embeddings", "--json", "--concurrency", "1,4", "--requests", "4"
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    doc = json.loads(proc.stdout)
    assert doc["passed"] is True and doc["run_id"] >= 1
    for r in doc["results"]:
        assert set(r) >= RESULT_KEYS
    checks = {(r["target"], r["check"], r["concurrency"]) for r in doc["results"]}
    assert ("qwen3-next-80b", "chat_stream", 1) in checks and ("qwen3-next-80b", "chat_stream", 4) in checks
    assert ("embeddings", "embeddings", None) in checks and ("qwen3-next-80b", "completions", None) in checks
    c4 = next(r for r in doc["results"] if r["check"] == "chat_stream" and r["concurrency"] == 4)
    assert c4["requests"] == 4 and c4["ttft_s"]["p95"] >= c4["ttft_s"]["p50"] > 0
    assert c4["output_tokens_per_s"]["aggregate"] > c4["output_tokens_per_s"]["per_stream"] > 0
    import sqlite3

    with sqlite3.connect(db) as stored:  # the conditions each figure was measured on
        kind, version, profile, quantization = stored.execute(
            "SELECT engine_kind, engine_version, profile, quantization FROM results WHERE target = ? LIMIT 1",
            ("qwen3-next-80b",),
        ).fetchone()
    engine = next(e for e in cfg.engines if e.name == "qwen3-next-80b")
    assert kind == "vllm" and version == "0.11.2" and profile == engine.profile
    assert quantization is None  # the demo config declares no [[engines.profiles]]: unknown, not guessed
    again = await asyncio.to_thread(run_cli, config, db, "qwen3-next-80b", "--json", "--compare")
    doc2 = json.loads(again.stdout)
    assert doc2["run_id"] == doc["run_id"] + 1 and doc2["comparison"], again.stdout[-2000:]
    assert {c["figure"] for c in doc2["comparison"]} >= {"ttft_p95", "tps_per_stream"}
    # the plain output gives the figures too, not only the JSON
    plain = await asyncio.to_thread(run_cli, config, db, "qwen3-next-80b", "--concurrency", "2", "--requests", "2")
    assert plain.returncode == 0, plain.stdout[-2000:]
    (line,) = [x for x in plain.stdout.splitlines() if "chat_stream" in x]
    time = r"(\d+\.\d ms|\d+\.\d\d s)"  # milliseconds under a second, as the console's table
    assert re.search(rf"TTFT p50 {time}, p95 {time}; ITL p95 [\d.]+ ms; [\d.]+ tok/s per stream, ", line), line
    # and --compare in text: each figure in the console's units (it printed bare seconds: '0.0796 -> 0.135')
    compared = await asyncio.to_thread(run_cli, config, db, "qwen3-next-80b", "--compare")
    ttft = [x for x in compared.stdout.splitlines() if " ttft_p95: " in x]
    assert ttft and all(re.search(r" ttft_p95: [\d.]+ ms -> [\d.]+ ms \([+-]\d+\.\d%\)$", x) for x in ttft), ttft


async def test_smoke_exit_codes(sim: SimPool, tmp_path: Path) -> None:
    import asyncio

    # an impossible SLO on one engine: exit 1 (into the engine's own [engines.smoke] table, which the demo writes)
    text = sim.config_toml()
    start = text.index('name = "qwen3-next-80b"')
    end = text.index("[engines.smoke]\n", start) + len("[engines.smoke]\n")
    assert end < text.index("[[engines]]", start)
    text = text[:end] + "slo_min_tokens_per_s = 100000\n" + text[end:]
    config = tmp_path / "pool.toml"
    config.write_text(text)
    proc = await asyncio.to_thread(run_cli, config, tmp_path / "db.sqlite3", "qwen3-next-80b", "--json")
    assert proc.returncode == 1, proc.stdout[-2000:]
    doc = json.loads(proc.stdout)
    stream = next(r for r in doc["results"] if r["check"] == "chat_stream")
    assert not stream["passed"] and "SLO" in stream["reason"]
    bad = tmp_path / "bad.toml"
    bad.write_text('[[engines]]\nname = "x"\nkind = "vllm"\nurl = "http://127.0.0.1:1"\n[engines.smoke]\nslo = 1\n')
    proc = await asyncio.to_thread(run_cli, bad, tmp_path / "db.sqlite3", "--json")
    assert proc.returncode == 2 and "slo" in proc.stderr
