"""Responses the simulated engines share: their error bodies and the small fixed routes."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

JSON = "application/json"


def openai_error(status: int, message: str, etype: str | None, code: int | str | None) -> web.Response:
    """The OpenAI error body (vLLM puts the status in `code`, LiteLLM the status as a string, Ollama null)."""
    body = {"error": {"message": message, "type": etype, "param": None, "code": code}}
    return web.json_response(body, status=status)


def error(kind: str, status: int, message: str, etype: str) -> web.Response:
    if kind == "vllm":
        return openai_error(status, message, etype, status)
    return web.json_response({"error": {"code": status, "message": message, "type": etype}}, status=status)


def static(payload: Any) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def handler(request: web.Request) -> web.Response:
        return web.json_response(payload() if callable(payload) else payload)

    return handler


def redirect(to: str) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def handler(request: web.Request) -> web.Response:
        raise web.HTTPTemporaryRedirect(to + (f"?{request.query_string}" if request.query_string else ""))

    return handler


def static_text(text: str) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def handler(request: web.Request) -> web.Response:
        return web.Response(text=text)

    return handler
