"""The demo pool's simulated LiteLLM gateway serves its own accounting on `/metrics/` in LiteLLM 1.108.7's
format (issue 15 item 1): a proxied request counted with the tokens of its response's usage, the team's
requests counted per caller key, and a recorded demo whose `ledger --json` has a gateway section."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from poolconsole import cli
from poolconsole.collect.engines import litellm_usage
from poolconsole.sim.demo import SimPool
from tests.helpers.demo_serve import served_demo, start_record

RECORD_S = 15.0


@pytest.fixture
async def pool() -> AsyncIterator[SimPool]:
    sim = SimPool(seed=3)
    await sim.start()
    try:
        await sim.wait_ready()
        yield sim
    finally:
        await sim.stop()


async def test_the_gateway_counts_what_it_proxies_in_litellm_format(pool: SimPool) -> None:
    gateway = pool.engines["gateway"].url
    async with httpx.AsyncClient(timeout=30, trust_env=False) as client:
        moved = await client.get(gateway + "/metrics")
        assert moved.status_code == 307 and moved.headers["location"] == "/metrics/"
        before = litellm_usage.parse_usage((await client.get(gateway + litellm_usage.METRICS_PATH)).content)
        body = {"model": "qwen3-30b-a3b", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8}
        answer = (await client.post(gateway + "/v1/chat/completions", json=body)).json()
        stream = {**body, "stream": True, "stream_options": {"include_usage": True}}
        async with client.stream("POST", gateway + "/v1/chat/completions", json=stream) as resp:
            events = [line async for line in resp.aiter_lines() if line.startswith("data: {")]
        streamed = json.loads(events[-1][6:])["usage"]
        page = (await client.get(gateway + litellm_usage.METRICS_PATH)).text
    after = litellm_usage.parse_usage(page)

    def row(doc: dict[str, object]) -> dict[str, float]:
        found = [c for c in doc["callers"] if c["route"] == "qwen3-30b-a3b" and c["caller"] == "no key"]  # type: ignore[attr-defined]
        return found[0] if found else {"requests": 0, "prompt_tokens": 0, "output_tokens": 0}

    grew = {k: row(after)[k] - row(before)[k] for k in ("requests", "prompt_tokens", "output_tokens")}
    assert grew == {
        "requests": 2,
        "prompt_tokens": answer["usage"]["prompt_tokens"] + streamed["prompt_tokens"],
        "output_tokens": answer["usage"]["completion_tokens"] + streamed["completion_tokens"],
    }
    # only the samples the name[] filter asks for, in LiteLLM's label set
    assert all(line.startswith(("#", *litellm_usage.WANTED)) for line in page.splitlines() if line)
    assert 'requested_model="qwen3-30b-a3b"' in page and 'hashed_api_key="None"' in page


def test_a_recorded_demo_ledger_has_gateway_accounting(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "history.sqlite3"
    with served_demo(tmp_path) as config:
        record, _ = start_record(config, store)
        time.sleep(RECORD_S)
        record.send_signal(signal.SIGTERM)
        assert record.wait(30) == 0
    capsys.readouterr()
    assert cli.main(["ledger", "--store", str(store), "--config", str(config), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    gateway = doc["gateway"]
    assert gateway, doc.get("gateway_unknown") or doc.keys()
    assert sum(g["requests"] for g in gateway) > 0 and sum(g["output_tokens"] for g in gateway) > 0
    callers = {g["caller"] for g in gateway}
    assert callers <= {"team-app", "ide-agents", "batch-eval"} and callers, callers
    assert all(g["key"] and len(g["key"]) == 12 for g in gateway)  # a hash prefix, never a key
    routes = {g["route"] for g in gateway}
    beside = [b for b in doc["gateway_vs_engines"] if b.get("engines")]
    assert beside and {r for b in beside for r in b["routes"]} == routes  # each route reached its engine
    capsys.readouterr()
    assert cli.main(["ledger", "--store", str(store), "--config", str(config)]) == 0
    assert "no gateway accounting" not in capsys.readouterr().out
