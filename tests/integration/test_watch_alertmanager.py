"""`poolconsole watch` against a real Alertmanager (Debian's prometheus-alertmanager 0.25, started here on
loopback, its receiver a webhook the test runs): a stopped engine process shows as a firing `down` in
Alertmanager's `/api/v2/alerts` with the watcher's labels, Alertmanager's own webhook delivers it, and the
engine's return resolves it there (endsAt = when it cleared)."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from poolconsole.config import parse_config
from tests.helpers.rawhttp import free_port
from tests.helpers.receivers import Receiver, until
from tests.helpers.tiny_engine import TinyEngine
from tests.integration.test_watch import ENGINE, Watcher, config_text, notify


def alertmanager_binary() -> str:
    found = (
        os.environ.get("POOLCONSOLE_ALERTMANAGER")
        or shutil.which("prometheus-alertmanager")
        or "/usr/bin/prometheus-alertmanager"
    )
    if not Path(found).exists():
        pytest.fail(
            "no alertmanager binary: install Debian's package (`apt-get install -y prometheus-alertmanager`; "
            "scripts/test.sh does it as root) or set POOLCONSOLE_ALERTMANAGER"
        )
    return found


@pytest.fixture
def engine() -> Iterator[TinyEngine]:
    tiny = TinyEngine(free_port())
    tiny.start()
    yield tiny
    tiny.stop()


@pytest.fixture
async def hook() -> AsyncIterator[Receiver]:
    r = await Receiver().start()
    yield r
    await r.stop()


@pytest.fixture
async def alertmanager(tmp_path: Path, hook: Receiver) -> AsyncIterator[str]:
    port = free_port()
    config = tmp_path / "alertmanager.yml"
    config.write_text(
        "route: {receiver: hook, group_by: [alertname], group_wait: 1s, group_interval: 1s, repeat_interval: 1h}\n"
        "receivers:\n- name: hook\n"
        f'  webhook_configs: [{{url: "{hook.url}/am", send_resolved: true}}]\n'
    )
    log = (tmp_path / "alertmanager.log").open("wb")
    argv = [
        alertmanager_binary(),
        f"--config.file={config}",
        f"--storage.path={tmp_path / 'am-data'}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--cluster.listen-address=",
    ]
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient() as client:

            async def ready() -> bool:
                assert proc.poll() is None, (tmp_path / "alertmanager.log").read_text()[-3000:]
                try:
                    return (await client.get(f"{url}/-/ready")).status_code == 200
                except httpx.TransportError:
                    return False

            for _ in range(600):
                if await ready():
                    break
                await asyncio.sleep(0.1)
            else:
                raise AssertionError("alertmanager not ready in 60 s")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


async def test_a_stopped_engine_is_a_firing_down_in_alertmanager_which_delivers_it_and_resolves_it(
    engine: TinyEngine, hook: Receiver, alertmanager: str, tmp_path: Path
) -> None:
    config = parse_config(config_text(engine, notify("alertmanager", alertmanager)), "hosts.toml")
    alerts: list[dict[str, Any]] = []
    async with httpx.AsyncClient() as client, Watcher(config, tmp_path / "history.sqlite3"):

        async def active() -> list[dict[str, Any]]:
            doc: list[dict[str, Any]] = (await client.get(f"{alertmanager}/api/v2/alerts")).json()
            return [a for a in doc if a["labels"].get("alertname") == "down" and a["status"]["state"] == "active"]

        engine.stop()
        for _ in range(600):
            alerts = await active()
            if alerts:
                break
            await asyncio.sleep(0.1)
        assert alerts, "no down alert in Alertmanager's /api/v2/alerts"
        assert alerts[0]["labels"] == {"alertname": "down", "severity": "critical", "engine": ENGINE, "host": "box"}
        assert alerts[0]["annotations"]["summary"].startswith(f"{ENGINE}: down")

        await until(lambda: hook.webhooks("firing", "down"), 60, "Alertmanager's webhook with the firing down")
        delivered = hook.webhooks("firing", "down")[0]
        assert delivered["receiver"] == "hook" and delivered["alerts"][0]["labels"]["engine"] == ENGINE

        engine.start()
        await until(lambda: hook.webhooks("resolved", "down"), 60, "Alertmanager's webhook with the resolve")
        for _ in range(300):
            if not await active():
                break
            await asyncio.sleep(0.1)
        assert not await active(), "the down alert is still active in Alertmanager after the resolve"
