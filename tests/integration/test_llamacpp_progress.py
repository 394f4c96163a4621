"""A real llama-server with `--no-slots` (issues 35/37): while one long answer (1,200 tokens) is generated its
tokens_predicted_total stays put (llama.cpp counts a request's tokens when it ends) and n_decode_total, the
view's progress_total, moves, so the stalled rule calls it no wedge; the same polls without progress_total
would have fired."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import httpx
import pytest

from poolconsole.collect.engines.poll import EnginePoller
from poolconsole.collect.http import PollClient
from poolconsole.config.models import AlertSettings, Engine, EngineKind, Settings
from poolconsole.model.alerts import Alerts
from poolconsole.model.snapshots import EngineSnapshot, EngineState
from poolconsole.model.view import EngineView, engine_view
from tests.helpers.engines import llama_server, model_path

pytestmark = pytest.mark.engine
STALL_S = 0.75
ANSWER = 1200
"""Tokens in the long answer: about 5 s on CI's fast machine (400 took 1.3 s of polls there, too close to
2 * STALL_S), 33 s on a busy one, and well inside the 4,096-token context."""


def stalled(views: list[tuple[float, EngineView]]) -> list[bool]:
    alerts = Alerts(AlertSettings(stall_s=STALL_S))
    return [e.fired for at, v in views for e in alerts.engine(v, at) if e.rule == "stalled"]


async def test_without_slots_n_decode_total_moves_while_tokens_predicted_total_stays(tmp_path: Path) -> None:
    model = model_path("medium", layers=8, embd=512, heads=8, kv_heads=8, ff=1376, ctx=4096)
    client, poll_client = httpx.AsyncClient(timeout=120, trust_env=False), PollClient()
    try:
        with llama_server(tmp_path, model, "-c", "4096", "-np", "1", "--no-slots") as url:
            llama = Engine(name="llama", kind=EngineKind.LLAMACPP, url=url)
            poller = EnginePoller(llama, poll_client, Settings(http_timeout_s=15))
            idle = await poller.poll()
            assert idle.state is EngineState.OK and idle.slots is None, idle.error
            body = {"model": "tiny", "prompt": "the pool", "max_tokens": ANSWER, "ignore_eos": True, "temperature": 0}
            request = asyncio.create_task(client.post(url + "/v1/completions", json=body))
            during: list[EngineSnapshot] = []
            while not request.done():
                during.append(await poller.poll())
                await asyncio.sleep(0.25)
            assert request.result().status_code == 200, request.result().text[:300]
            after = engine_view([await poller.poll()])
    finally:
        await client.aclose()
        await poll_client.aclose()
    before = engine_view([idle])
    busy = [(s.fetched_at, engine_view([s])) for s in during]
    busy = [(at, v) for at, v in busy if v.state is EngineState.OK and (v.requests_running or 0) >= 1]
    assert len(busy) >= 4, [(v.requests_running, v.progress_total) for _, v in busy]
    assert busy[-1][0] - busy[0][0] > 2 * STALL_S  # long enough that a still counter would fire
    # tokens_predicted_total stays put for the whole answer; n_decode_total moves and never falls
    assert {v.generation_tokens_total for _, v in busy} == {before.generation_tokens_total}
    decodes = [v.progress_total if v.progress_total is not None else -1.0 for _, v in busy]
    assert min(decodes) >= 0 and decodes == sorted(decodes) and decodes[-1] > decodes[0], decodes
    assert after.generation_tokens_total == (before.generation_tokens_total or 0) + ANSWER
    assert after.progress_total is not None and after.progress_total >= ANSWER + (before.progress_total or 0)
    assert stalled(busy) == []
    # the counterfactual, on the same polls: without the progress counter it reads as a wedge
    assert stalled([(at, replace(v, progress_total=None)) for at, v in busy])[:1] == [True]
