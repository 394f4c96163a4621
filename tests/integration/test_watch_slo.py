"""slo_burn in the watcher (issue 37): the hour before it started is read from the samples kept beside the
history store (a burn of 30% slow requests against a 99% objective), the engine it polls keeps serving 40%
of its requests over the threshold (vLLM 0.32's real page, its TTFT buckets growing per scrape), and the
page reaches a webhook as alertname slo_burn, critical. Without that hour the same minute of slow requests
pages nothing: an hour's burn needs the hour."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from poolconsole.config import parse_config
from poolconsole.model import slo as rule
from poolconsole.runtime import alerts_slo
from poolconsole.runtime.alerts_slo import SloSamples, slo_burn
from poolconsole.runtime.notifier import Notifier, state_path
from poolconsole.runtime.watch import watch
from tests.helpers.rawhttp import free_port
from tests.helpers.receivers import Receiver, until
from tests.unit.test_slo_burn import page


class SlowEngine:
    """vLLM's pages; each /metrics scrape counts 10 more requests, 4 of them over 1 s."""

    def __init__(self) -> None:
        self.port = free_port()
        self.fast = self.slow = 0.0
        self._runner: web.AppRunner | None = None

    async def _metrics(self, _: web.Request) -> web.Response:
        self.fast += 6
        self.slow += 4
        return web.Response(text=page(self.fast, self.slow), content_type="text/plain")

    async def _ok(self, _: web.Request) -> web.Response:
        return web.Response(text="")

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/health", self._ok)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


@pytest.fixture
async def engine() -> AsyncIterator[SlowEngine]:
    e = SlowEngine()
    await e.start()
    yield e
    await e.stop()


def seed(store: Path, minutes: float, slow_share: float) -> None:
    """The samples a watcher kept over the last `minutes`, every 10 s, 5 requests a second."""
    now = time.time()
    samples = []
    good = total = 0.0
    for i in range(int(minutes * 6)):
        at = now - minutes * 60 + i * 10
        total += 50
        good += 50 * (1 - slow_share)
        samples.append(("e", rule.Sample(at, good, total)))
    kept = SloSamples(state_path(store))
    kept.write(samples, before=now - rule.KEEP_S)
    kept.close()


async def run_watch(engine: SlowEngine, store: Path, hook: Receiver, seconds: float) -> None:
    text = f"""
[settings]
poll_interval_s = 0.3
http_timeout_s = 1.0

[[slo]]
engine = "e"
ttft_s = 1.0
objective = 0.99

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
        watch(config, store, stop, gather_s=0.2, settle_gc=False, companions=[slo_burn])
    )
    try:
        if seconds:
            await asyncio.sleep(seconds)
        else:
            await until(lambda: hook.webhooks("firing", "slo_burn"), 60, "the slo_burn page")
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)


async def test_the_hour_kept_beside_the_store_and_the_live_polls_page_slo_burn(
    engine: SlowEngine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(alerts_slo, "SAMPLE_EVERY_S", 0.5)
    hook = await Receiver().start()
    try:
        fresh = tmp_path / "fresh" / "history.sqlite3"
        fresh.parent.mkdir()
        await run_watch(engine, fresh, hook, 5.0)  # a minute of slow requests and no history: no page
        assert hook.received == []

        store = tmp_path / "history.sqlite3"
        seed(store, 60, 0.30)
        await run_watch(engine, store, hook, 0)
        doc = hook.webhooks("firing", "slo_burn")[0]
        alert = doc["alerts"][0]
        assert alert["labels"] == {"alertname": "slo_burn", "severity": "critical", "engine": "e", "host": "box"}
        summary = alert["annotations"]["summary"]
        assert summary.startswith("e: slo burn: TTFT over 1 s") and "over 1 h" in summary, summary
    finally:
        await hook.stop()
