"""A real Prometheus (Debian's package) on loopback with a temporary config and data directory, and the
waits the tests around it need."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers.rawhttp import free_port


def prometheus_binary() -> str:
    found = os.environ.get("POOLCONSOLE_PROMETHEUS") or shutil.which("prometheus") or "/usr/bin/prometheus"
    if not Path(found).exists():
        pytest.fail(
            "no prometheus binary: install Debian's package (`apt-get install -y prometheus`; scripts/test.sh "
            "does it as root) or set POOLCONSOLE_PROMETHEUS"
        )
    return found


def promtool() -> str:
    """Debian's promtool (the prometheus package brings it): a missing one fails the test, never skips it."""
    found = shutil.which("promtool") or "/usr/bin/promtool"
    if not Path(found).exists():
        pytest.fail("no promtool: install Debian's prometheus package (scripts/test.sh does it as root)")
    return found


class Prometheus:
    def __init__(self, url: str, client: httpx.AsyncClient) -> None:
        self.url = url
        self.client = client

    async def api(self, path: str, **params: Any) -> Any:
        response = await self.client.get(f"{self.url}/api/v1/{path}", params=params)
        doc = response.json()
        assert doc["status"] == "success", doc
        return doc["data"]

    async def query(self, expr: str, at: float | None = None) -> list[dict[str, Any]]:
        data = await self.api("query", query=expr, time=f"{time.time() if at is None else at:.3f}")
        result: list[dict[str, Any]] = data["result"]
        return result


async def until_ready(prom: Prometheus, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 90
    while True:
        assert proc.poll() is None, f"prometheus exited:\n{log.read_text()[-3000:]}"
        try:
            if (await prom.client.get(f"{prom.url}/-/ready")).status_code == 200:
                return
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, f"prometheus not ready:\n{log.read_text()[-3000:]}"
        await asyncio.sleep(0.3)


async def eventually(check: Callable[[], Any], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not await check():
        assert time.monotonic() < deadline, f"timed out after {timeout_s:.0f} s waiting for {what}"
        await asyncio.sleep(0.5)


@asynccontextmanager
async def running_prometheus(directory: Path, scrape_configs: str, interval: str = "1s") -> AsyncIterator[Prometheus]:
    """Prometheus on 127.0.0.1 scraping `scrape_configs` (the YAML list under `scrape_configs:`, each line
    indented by two spaces) every `interval`; stopped (and waited for) on exit."""
    port = free_port()
    config = directory / "prometheus.yml"
    config.write_text(
        f"global: {{scrape_interval: {interval}, scrape_timeout: {interval}}}\nscrape_configs:\n{scrape_configs}"
    )
    log_path = directory / "prometheus.log"
    log = log_path.open("w")
    proc = subprocess.Popen(
        [
            prometheus_binary(),
            f"--config.file={config}",
            f"--storage.tsdb.path={directory / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        async with httpx.AsyncClient(trust_env=False, timeout=30) as client:
            prom = Prometheus(f"http://127.0.0.1:{port}", client)
            await until_ready(prom, proc, log_path)
            yield prom
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


async def status_json(*args: str) -> dict[str, Any]:
    """`poolconsole status --json ARGS` in a subprocess, as an operator runs it: its document."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "poolconsole",
        "status",
        "--json",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 90)
    assert proc.returncode in (0, 1), err.decode()
    doc: dict[str, Any] = json.loads(out)
    return doc
