"""A notification receiver on 127.0.0.1 that the test runs: it keeps every request (path, headers, body) and
can be stopped and started again on the same port (a receiver that is down, then back)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from tests.helpers.rawhttp import free_port


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class Receiver:
    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.received: list[Received] = []
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def _take(self, request: web.Request) -> web.Response:
        self.received.append(Received(request.path, dict(request.headers), await request.read()))
        return web.Response(text="ok")

    async def start(self) -> Receiver:
        app = web.Application()
        app.router.add_post("/{tail:.*}", self._take)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port, reuse_address=True).start()
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def webhooks(self, status: str | None = None, alertname: str | None = None) -> list[dict[str, Any]]:
        """The webhook bodies received (Alertmanager's format), those with `status` / an alert named so."""
        out = []
        for r in self.received:
            doc = r.json()
            if not isinstance(doc, dict) or "alerts" not in doc:
                continue
            if status is not None and doc["status"] != status:
                continue
            if alertname is not None and not any(a["labels"].get("alertname") == alertname for a in doc["alerts"]):
                continue
            out.append(doc)
        return out


async def until(condition: Callable[[], object], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        await asyncio.sleep(0.1)
