"""The simulated LiteLLM gateway's API: its deep /health over the engines behind it, its accounting on
/metrics/ (sim.litellm_metrics), and the proxy that forwards each request to the engine serving its model."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING

import httpx
from aiohttp import web

from poolconsole.sim.responses import JSON, openai_error

if TYPE_CHECKING:
    from poolconsole.sim.server import SimEngine


class GatewayRoutes:
    """The handlers, on one engine."""

    def __init__(self, engine: SimEngine) -> None:
        self.engine = engine

    async def health(self, request: web.Request) -> web.Response:
        healthy: list[dict[str, str]] = []
        unhealthy: list[dict[str, str]] = []
        client = self._client()
        for model, base in self.engine.backends.items():
            try:
                answer = await client.get(base + "/v1/models", timeout=2.0, headers=self._backend_headers())
                ok = answer.status_code == 200
                error = ""
            except httpx.HTTPError as exc:
                ok, error = False, f"litellm.APIConnectionError: {type(exc).__name__}"
            entry = {"api_base": base + "/v1", "model": f"openai/{model}"}
            (healthy if ok else unhealthy).append(entry if ok else {**entry, "error": error})
        return web.json_response(
            {
                "healthy_endpoints": healthy,
                "unhealthy_endpoints": unhealthy,
                "healthy_count": len(healthy),
                "unhealthy_count": len(unhealthy),
            }
        )

    def _backend_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.engine.backend_key}"} if self.engine.backend_key else {}

    def _client(self) -> httpx.AsyncClient:
        if self.engine.client is None:
            self.engine.client = httpx.AsyncClient(timeout=httpx.Timeout(300.0, connect=5.0), trust_env=False)
        return self.engine.client

    async def metrics(self, request: web.Request) -> web.Response:
        assert self.engine.usage is not None
        return web.Response(
            text=self.engine.usage.render(request.query_string),
            headers={"Content-Type": "text/plain; version=1.0.0; charset=utf-8"},
        )

    async def proxy(self, request: web.Request) -> web.StreamResponse:
        assert self.engine.usage is not None
        self.engine.usage.in_flight += 1
        started = time.monotonic()
        try:
            return await self._proxy(request, started)
        finally:
            self.engine.usage.in_flight -= 1

    async def _proxy(self, request: web.Request, started: float) -> web.StreamResponse:
        assert self.engine.usage is not None
        raw = await request.read()
        try:
            model = json.loads(raw).get("model")
        except (ValueError, AttributeError):
            return openai_error(400, "invalid JSON", "invalid_request_error", "400")
        base = self.engine.backends.get(str(model))
        if base is None:
            return openai_error(400, f"Invalid model name passed in model={model}", "invalid_request_error", "400")
        client = self._client()
        try:
            headers = {"Content-Type": JSON, **self._backend_headers()}
            upstream = client.build_request("POST", base + request.path, content=raw, headers=headers)
            resp = await client.send(upstream, stream=True)
        except httpx.HTTPError as exc:
            return openai_error(500, f"litellm.InternalServerError: Connection error. {exc}", None, "500")
        out = web.StreamResponse(
            status=resp.status_code, headers={"Content-Type": resp.headers.get("content-type", JSON)}
        )
        await out.prepare(request)
        tail = b""
        try:
            async for chunk in resp.aiter_raw():
                await out.write(chunk)
                tail = (tail + chunk)[-8192:]  # the usage is in the last chunk (or the whole small body)
        finally:
            await resp.aclose()
        await out.write_eof()
        if resp.status_code == 200:
            self.engine.usage.proxied(
                str(model), str(model), self.engine.api_key is not None, tail, time.monotonic() - started
            )
        return out
