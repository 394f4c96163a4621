"""The canary (issue 37): the watcher sends a one-token completion to an engine idle for canary_interval_s;
a completion that hangs past canary_timeout_s pages `canary` (critical) to a webhook, one that answers
again resolves it, and a busy engine (requests running) is never probed. The engine is vLLM 0.32's real
pages served on 127.0.0.1 by the test, its completions answered (the real capture) or held."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from poolconsole.config import parse_config
from poolconsole.runtime.alerts_canary import canary, cost
from poolconsole.runtime.notifier import Notifier
from poolconsole.runtime.watch import watch
from tests.conftest import REAL
from tests.helpers.rawhttp import free_port
from tests.helpers.receivers import Receiver, until

VLLM = REAL / "vllm-0.32.0-cpu"


class HangingEngine:
    """vLLM's /health, /metrics (idle, or under load), /v1/models; /v1/completions answered or held."""

    def __init__(self) -> None:
        self.port = free_port()
        self.answering = asyncio.Event()
        self.answering.set()
        self.busy = False
        self.completions: list[dict[str, Any]] = []
        self._runner: web.AppRunner | None = None

    async def _metrics(self, _: web.Request) -> web.Response:
        page = VLLM / ("metrics.load.txt" if self.busy else "metrics.idle.txt")
        return web.Response(body=page.read_bytes(), content_type="text/plain")

    async def _health(self, _: web.Request) -> web.Response:
        return web.Response(body=b"")

    async def _models(self, _: web.Request) -> web.Response:
        return web.Response(body=(VLLM / "v1_models.json").read_bytes(), content_type="application/json")

    async def _complete(self, request: web.Request) -> web.Response:
        self.completions.append(await request.json())
        await self.answering.wait()  # a wedged engine: the request is taken and never answered
        return web.Response(body=(VLLM / "completions.nonstream.json").read_bytes(), content_type="application/json")

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/health", self._health)
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/v1/models", self._models)
        app.router.add_post("/v1/completions", self._complete)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()

    async def stop(self) -> None:
        self.answering.set()
        if self._runner is not None:
            await self._runner.cleanup()


@pytest.fixture
async def engine() -> AsyncIterator[HangingEngine]:
    e = HangingEngine()
    await e.start()
    yield e
    await e.stop()


async def test_a_completion_that_hangs_on_an_idle_engine_pages_canary_and_its_answer_resolves(
    engine: HangingEngine, tmp_path: Path
) -> None:
    hook = await Receiver().start()
    text = f"""
[settings]
poll_interval_s = 0.3
http_timeout_s = 1.0

[alerts]
canary_interval_s = 1
canary_timeout_s = 1

[[engines]]
name = "e"
kind = "vllm"
url = "http://127.0.0.1:{engine.port}"
host = "box"

[[notify]]
kind = "webhook"
url = "{hook.url}/hook"
"""
    config = parse_config(text, "hosts.toml")
    stop = asyncio.Event()
    task: asyncio.Task[Notifier] = asyncio.create_task(
        watch(config, tmp_path / "h.sqlite3", stop, gather_s=0.2, settle_gc=False, companions=[canary])
    )
    try:
        await until(lambda: len(engine.completions) >= 2, 60, "two probes of the idle engine")
        body = engine.completions[0]
        assert body["max_tokens"] == 1 and body["model"] == "tiny"  # one token, of the model it lists
        assert hook.received == []  # it answered: nothing to say

        engine.answering.clear()
        await until(lambda: hook.webhooks("firing", "canary"), 60, "the canary's page")
        alert = next(a for a in hook.webhooks("firing", "canary")[0]["alerts"] if a["labels"]["alertname"] == "canary")
        assert alert["labels"] == {"alertname": "canary", "severity": "critical", "engine": "e", "host": "box"}
        assert "no answer within 1 s" in alert["annotations"]["summary"]

        engine.answering.set()
        await until(lambda: hook.webhooks("resolved", "canary"), 60, "the resolve once it answers")
        assert len(hook.webhooks("firing", "canary")) == 1

        engine.busy = True  # requests running: never probed
        await asyncio.sleep(1.0)  # the polls see it busy
        probes = len(engine.completions)
        await asyncio.sleep(3.0)
        assert len(engine.completions) == probes
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)
        await hook.stop()
    assert not any(json.dumps(r.json()).count("Traceback") for r in hook.received)


def test_the_cost_is_said_in_tokens_and_probes_a_day() -> None:
    said = cost(300, 30)
    assert "1-token completion (about 2 prompt + 1 generated tokens)" in said
    assert "idle for 300 s, at most 288 a day per engine" in said and "within 30 s" in said


async def test_a_probe_that_cannot_connect_is_a_failure_in_words() -> None:
    import httpx

    from poolconsole.config.models import Engine, EngineKind
    from poolconsole.runtime.alerts_canary import probe

    engine = Engine(name="e", kind=EngineKind.VLLM, url=f"http://127.0.0.1:{free_port()}")
    async with httpx.AsyncClient(trust_env=False) as client:
        said = await probe(client, engine, "tiny", 5.0)
    assert said is not None and said.startswith(f"POST {engine.url}/v1/completions: ConnectError"), said
