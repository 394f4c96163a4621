"""`--scenario wedge` (issue 37): the demo's WEDGE_ENGINE keeps answering /health and /metrics with requests
running while its generation counter stops and its completions hang; the runtime (LivePool, as `watch` runs
it) fires `stalled` for it within stall_s and a poll or two, and a `docker restart` on its simulated host
clears the wedge and the alert. (stall_s is 3 s here to keep the test short: an engine prefilling a 40k-token
prompt for longer also reads as stalled then, so only the wedged engine's alert is asserted.)"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from poolconsole.collect.prom import parse_exposition
from poolconsole.config import parse_config
from poolconsole.model.alerts import AlertEvent
from poolconsole.runtime.live import LivePool, Update
from poolconsole.sim.demo import SCENARIOS, WEDGE_ENGINE, SimPool
from tests.helpers.receivers import until
from tests.helpers.simpools import answering

STALL_S = 3.0


@pytest.fixture
async def wedged(tmp_path: Path) -> AsyncIterator[SimPool]:
    pool = SimPool("wedge", seed=5)
    pool.wedge_after_s = 1.0
    async with answering(pool, tmp_path / "keys"):
        yield pool


def sample(text: str, name: str) -> float:
    return next(s.value for s in parse_exposition(text).samples if s.name == name)


async def test_the_wedged_engine_answers_health_and_metrics_but_generates_nothing(wedged: SimPool) -> None:
    assert "wedge" in SCENARIOS
    engine = wedged.engines[WEDGE_ENGINE]
    await until(lambda: engine.wedged, 30, "the wedge")
    async with httpx.AsyncClient(trust_env=False, timeout=5.0) as client:
        first = (await client.get(engine.url + "/metrics")).text
        await asyncio.sleep(1.0)
        assert (await client.get(engine.url + "/health")).status_code == 200
        second = (await client.get(engine.url + "/metrics")).text
        assert sample(second, "vllm:num_requests_running") > 0
        assert sample(first, "vllm:generation_tokens_total") == sample(second, "vllm:generation_tokens_total")
        body = {"model": engine.spec.models[0], "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
        with pytest.raises(httpx.ReadTimeout):  # the completion hangs
            await client.post(engine.url + "/v1/chat/completions", json=body, timeout=1.5)
    other = wedged.engines["qwen3-next-80b"]
    assert not other.wedged


async def test_watch_fires_stalled_for_the_wedged_engine_and_a_docker_restart_clears_it(wedged: SimPool) -> None:
    text = wedged.config_toml().replace("poll_interval_s = 1.0", "poll_interval_s = 0.5")
    config = parse_config(text + f"\n[alerts]\nstall_s = {STALL_S}\n", "hosts.toml")
    live = LivePool(config)
    heard: list[AlertEvent] = []

    def listen(update: Update) -> None:
        heard.extend(e for e in update.events if e.rule == "stalled")

    live.subscribe(listen)
    live.start(settle_gc=False)
    try:
        await until(lambda: wedged.engines[WEDGE_ENGINE].wedged, 30, "the wedge")
        # stall_s + a poll or two; the timeout is generous (a shared, slow machine), no clock is asserted
        await until(lambda: any(e.fired and e.target == WEDGE_ENGINE for e in heard), 60, "stalled to fire")
        fired = next(e for e in heard if e.fired and e.target == WEDGE_ENGINE)
        assert re.search(r"[1-9][0-9]* running", fired.message) and (WEDGE_ENGINE, "stalled") in live.alerts.active

        host = wedged.sim_hosts[wedged.engines[WEDGE_ENGINE].spec.host]
        out, _, code = host.answer(f"docker restart {WEDGE_ENGINE}")
        assert code == 0 and out.strip() == WEDGE_ENGINE
        assert not wedged.engines[WEDGE_ENGINE].wedged
        await until(
            lambda: any(not e.fired and e.target == WEDGE_ENGINE for e in heard),
            60,
            "stalled to clear after the restart",
        )
        assert (WEDGE_ENGINE, "stalled") not in live.alerts.active
        assert [e.fired for e in heard if e.target == WEDGE_ENGINE] == [True, False]  # fired once, cleared once
    finally:
        await live.stop()
