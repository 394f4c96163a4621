"""The simulated pool speaks its real engines' formats and moves like a real pool."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import IO, cast

import httpx
import pytest

from poolconsole.collect.prom import parse_exposition
from poolconsole.config import parse_config
from poolconsole.model.view import engine_view
from poolconsole.runtime.sampling import sample_engines
from poolconsole.sim.demo import SimPool
from poolconsole.sim.demo_pool import ENGINES
from poolconsole.sim.expose import render_llamacpp
from poolconsole.sim.load import EngineLoad
from tests.conftest import REAL


def families(text: str, prefix: str) -> dict[str, set[str]]:
    """Sample name -> label names, for one engine's prefix."""
    out: dict[str, set[str]] = {}
    for s in parse_exposition(text).samples:
        if s.name.startswith(prefix):
            out.setdefault(s.name, set()).update(k for k, _ in s.labels)
    return out


@pytest.fixture
async def sim() -> AsyncIterator[SimPool]:
    pool = SimPool(seed=3)
    await pool.start()
    await pool.wait_ready()
    yield pool
    await pool.stop()


async def get(url: str) -> httpx.Response:
    async with httpx.AsyncClient(trust_env=False, timeout=5) as c:
        return await c.get(url)


async def test_vllm_sim_has_the_real_families_labels_and_buckets(sim: SimPool) -> None:
    real = (REAL / "vllm-0.32.0-cpu" / "metrics.load.txt").read_text()
    simulated = (await get(sim.engines["qwen3-next-80b"].url + "/metrics")).text
    assert families(simulated, "vllm:") == families(real, "vllm:")
    real_le = {
        s.label("le") for s in parse_exposition(real).samples if s.name == "vllm:time_to_first_token_seconds_bucket"
    }
    sim_le = {
        s.label("le")
        for s in parse_exposition(simulated).samples
        if s.name == "vllm:time_to_first_token_seconds_bucket"
    }
    assert real_le == sim_le


async def test_llamacpp_sim_matches_real_families_and_endpoints(sim: SimPool) -> None:
    engine = sim.engines["qwen2.5-coder-3090"]
    real = (REAL / "llamacpp-b1-0c1e570" / "metrics-after-requests.txt").read_text()
    response = await get(engine.url + "/metrics")
    assert families(response.text, "llamacpp:") == families(real, "llamacpp:")
    assert response.headers["Process-Start-Time-Unix"].isdigit()
    real_slot = json.loads((REAL / "llamacpp-b1-0c1e570" / "slots-after-requests.json").read_text())[0]
    slot = (await get(engine.url + "/slots")).json()[0]
    for key in ("id", "n_ctx", "is_processing", "n_prompt_tokens", "next_token"):
        assert key in slot and key in real_slot
    assert (await get(engine.url + "/health")).json() == {"status": "ok"}


async def test_sglang_sim_matches_the_real_capture_window(sim: SimPool) -> None:
    real = families((REAL / "issue-samples" / "sglang-metrics-v0.5.1-issue13485.txt").read_text(), "sglang:")
    simulated = families((await get(sim.engines["gemma3-27b-nvfp4"].url + "/metrics")).text, "sglang:")
    assert real, "the capture window has SGLang series"
    for name, labels in real.items():
        assert simulated.get(name) == labels, name


async def test_openai_chat_stream_tools_and_embeddings(sim: SimPool) -> None:
    url = sim.engines["qwen3-next-80b"].url
    async with httpx.AsyncClient(trust_env=False, timeout=30) as c:
        plain = (
            await c.post(
                url + "/v1/chat/completions",
                json={"model": "qwen3-next-80b", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8},
            )
        ).json()
        assert plain["usage"]["completion_tokens"] == 8 and plain["choices"][0]["message"]["content"]
        chunks = []
        async with c.stream(
            "POST",
            url + "/v1/chat/completions",
            json={
                "model": "qwen3-next-80b",
                "messages": [{"role": "user", "content": "hi"}],
                "max_tokens": 6,
                "stream": True,
                "stream_options": {"include_usage": True},
            },
        ) as r:
            async for line in r.aiter_lines():
                if line.startswith("data: "):
                    chunks.append(line[6:])
        assert chunks[-1] == "[DONE]"
        usage = json.loads(chunks[-2])
        assert usage["choices"] == [] and usage["usage"]["completion_tokens"] == 6
        assert sum(1 for ch in chunks[:-2] if json.loads(ch)["choices"][0]["delta"].get("content")) == 6
        tools = [
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
                },
            }
        ]
        call = (
            await c.post(
                url + "/v1/chat/completions",
                json={"model": "qwen3-next-80b", "messages": [{"role": "user", "content": "weather?"}], "tools": tools},
            )
        ).json()
        tool_call = call["choices"][0]["message"]["tool_calls"][0]
        assert tool_call["function"]["name"] == "get_weather"
        assert json.loads(tool_call["function"]["arguments"])["city"]
        bad = await c.post(url + "/v1/chat/completions", json={"model": "nope", "messages": []})
        assert bad.status_code == 404
        emb_url = sim.engines["embeddings"].url + "/v1/embeddings"
        a = (await c.post(emb_url, json={"model": "nomic-embed-text:latest", "input": "same"})).json()
        b = (await c.post(emb_url, json={"model": "nomic-embed-text:latest", "input": "same"})).json()
        assert a["data"][0]["embedding"] == b["data"][0]["embedding"] and len(a["data"][0]["embedding"]) == 768
        via = (
            await c.post(
                sim.engines["gateway"].url + "/v1/chat/completions",
                json={"model": "gemma-3-27b-it", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4},
            )
        ).json()
        assert via["model"] == "gemma-3-27b-it" and via["usage"]["completion_tokens"] == 4


async def test_status_reads_the_whole_demo_pool(sim: SimPool) -> None:
    config = parse_config(sim.config_toml())
    await asyncio.sleep(1.5)
    samples = await sample_engines(config, samples=2, interval_s=1.0)
    views = {name: engine_view(s) for name, s in samples.items()}
    assert all(v.state == "ok" for v in views.values()), {n: v.error for n, v in views.items()}
    assert views["gemma3-27b-nvfp4"].spec_decode_acceptance_rate == pytest.approx(0.72)
    assert views["gateway"].models and views["embeddings"].models


def test_load_model_speed_falls_with_concurrency_and_kv_queues() -> None:
    spec = next(e for e in ENGINES if e.name == "qwen3-next-80b")
    assert spec.load is not None
    load = EngineLoad(spec.load, 1, 0.0)
    one, five = load.per_user_tps(1), load.per_user_tps(5)
    assert 110 <= one <= 130 and five < one and 300 <= 4 * load.per_user_tps(4) <= 400
    for i in range(1, 2400):
        load.tick(i * 0.1, arrivals=6.0)
    assert load.kv_usage > 0.8 and len(load.waiting) > 0 and load.c.preemptions >= 0
    before = load.c.generation_tokens
    load.reset(240.0)
    assert before > 0 and load.c.generation_tokens == 0


def test_demo_serve_only_writes_config_and_stops_cleanly(tmp_path: Path) -> None:
    out = tmp_path / "pool.toml"
    proc = subprocess.Popen(
        [sys.executable, "-m", "poolconsole", "demo", "--serve-only", "--config-out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while not out.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)
        assert out.exists(), cast(IO[str], proc.stderr).read() if proc.poll() is not None else "no config written"
        config = parse_config(out.read_text())
        assert len(config.engines) == 8 and len(config.hosts) == 7
        status = subprocess.run(
            [sys.executable, "-m", "poolconsole", "status", "--config", str(out), "--json", "--samples", "1"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert status.returncode == 0, status.stdout[-2000:]
        doc = json.loads(status.stdout)
        assert {e["state"] for e in doc["engines"]} == {"ok"}
        hosts = {h["name"]: h for h in doc["hosts"]}
        assert {h["state"] for h in hosts.values()} == {"ok"}, [h["error"] for h in hosts.values()]
        assert len(hosts["tp4"]["gpus"]) == 4 and hosts["tp4"]["source"] == "nvidia-smi"
        assert hosts["spark"]["memory_kind"] == "unified" and hosts["studio"]["source"] == "macos"
        tp4 = hosts["tp4"]["gpus"][0]
        assert 0.5 < tp4["memory_used_bytes"] / tp4["memory_total_bytes"] < 1  # weights + KV per TP shard
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=15) == 0
    assert not out.with_name(out.name + ".ssh").exists()  # throwaway keys removed
    urls = [e.url for e in config.engines]
    for url in urls:
        with pytest.raises(httpx.ConnectError):
            httpx.get(url, timeout=1, trust_env=False)
    assert os.path.exists(out)


async def test_restart_resets_counters_and_node_down_is_reported(tmp_path: Path) -> None:
    from poolconsole.collect.hosts.sampling import sample_hosts

    pool = SimPool(seed=4)
    await pool.start(tmp_path / "keys")
    try:
        await pool.wait_ready()
        config = parse_config(pool.config_toml())
        await asyncio.sleep(2.0)  # let the team generate some tokens

        async def restart_soon() -> None:
            await asyncio.sleep(0.6)
            pool.engines["qwen2.5-coder-3090"].restart(loading_s=0.2)  # llama.cpp style: 503 while loading
            await pool.restart("qwen3-next-80b", refuse_s=0.3)  # vLLM style: refused until ready

        task = asyncio.create_task(restart_soon())
        samples = await sample_engines(config, samples=2, interval_s=1.5)
        await task
        for name in ("qwen2.5-coder-3090", "qwen3-next-80b"):
            view = engine_view(samples[name])
            assert view.state == "ok" and view.counter_resets == 1, (name, view.error)
            assert view.generation_tokens_per_s is None or view.generation_tokens_per_s >= 0

        await pool.host_down("ws48")
        views = {n: engine_view(s) for n, s in (await sample_engines(config, 1, 0)).items()}
        assert views["qwen3-30b-a3b"].state == "down" and "refused" in (views["qwen3-30b-a3b"].error or "")
        assert views["qwen3-next-80b"].state == "ok"
        hosts = {h.name: h for h in await sample_hosts(config)}
        assert hosts["ws48"].state.value == "unreachable" and hosts["tp4"].state.value == "ok"
    finally:
        await pool.stop()


def test_llamacpp_sim_counters_never_go_back_between_restarts() -> None:
    """Every *_total the simulated llama-server serves only grows while it runs (a reset is a restart): its
    tokens_predicted_total was the float total less the whole tokens in flight, and went 2381 -> 2380."""
    spec = next(e for e in ENGINES if e.kind == "llamacpp" and e.load is not None)
    assert spec.load is not None
    load = EngineLoad(spec.load, 7, 0.0)
    last: dict[str, float] = {}
    grew = set()
    for i in range(1, 3000):
        load.tick(i * 0.037, arrivals=3.0)  # ticks that do not divide a token evenly
        for sample in parse_exposition(render_llamacpp(load, 0.0, 0.0)).samples:
            if sample.name.endswith("_total"):
                previous = last.get(sample.name, 0.0)
                assert sample.value >= previous, (sample.name, previous, sample.value, i)
                grew |= {sample.name} if sample.value > previous else set()
                last[sample.name] = sample.value
    assert {"llamacpp:tokens_predicted_total", "llamacpp:tokens_predicted_seconds_total"} <= grew
    assert last["llamacpp:tokens_predicted_total"] <= load.c.generation_tokens  # in flight: not counted yet
