"""The simulated engines' OpenAI-compatible API (vLLM, SGLang, llama.cpp): chat and completions, JSON and
SSE, at the engine's current per-user speed and counted in its load model; tokenize; requests over the
context refused in the engine's own words."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import TYPE_CHECKING, Any

from aiohttp import web

from poolconsole.sim.load import Req
from poolconsole.sim.openai_api import (
    draft_acceptance,
    json_content_for,
    max_tokens,
    prompt_tokens,
    sse,
    tool_call_for,
    words,
)
from poolconsole.sim.responses import error

if TYPE_CHECKING:
    from poolconsole.sim.server import SimEngine


class OpenAIRoutes:
    """The handlers, on one engine."""

    def __init__(self, engine: SimEngine) -> None:
        self.engine = engine

    async def _admit(self, body: dict[str, Any]) -> tuple[Req, int]:
        assert self.engine.load is not None
        n_out = max_tokens(body)
        req = self.engine.load.add_external(prompt_tokens(body), n_out, time.monotonic(), draft_acceptance(body))
        while req.first_token is None:
            await asyncio.sleep(0.01)
        return req, n_out

    async def _body(self, request: web.Request) -> dict[str, Any] | web.Response:
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            status = 500 if self.engine.spec.kind == "llamacpp" else 400
            return error(self.engine.spec.kind, status, "invalid JSON body", "BadRequestError")
        if not isinstance(body, dict):
            return error(self.engine.spec.kind, 400, "body must be a JSON object", "BadRequestError")
        model = body.get("model")
        if self.engine.spec.kind == "vllm" and model not in self.engine.spec.models:
            return error("vllm", 404, f"The model `{model}` does not exist.", "NotFoundError")
        too_long = self._over_context(prompt_tokens(body), max_tokens(body))
        return too_long or body

    def _over_context(self, prompt: int, output: int) -> web.Response | None:
        """A request longer than the context, refused in the engine's own words (vLLM 0.32's two messages,
        llama.cpp's exceed_context_size_error)."""
        limit = self.engine.context
        if self.engine.spec.kind == "llamacpp":
            if prompt < limit:
                return None
            return web.json_response(
                {
                    "error": {
                        "code": 400,
                        "message": f"request ({prompt} tokens) exceeds the available context size ({limit} tokens), "
                        "try increasing it",
                        "type": "exceed_context_size_error",
                        "n_prompt_tokens": prompt,
                        "n_ctx": limit,
                    }
                },
                status=400,
            )
        if prompt > limit:
            message = (
                f"This model's maximum context length is {limit} tokens. However, your prompt contains at least "
                f"{prompt} input tokens, which exceeds this limit even without any output tokens. Please reduce "
                f"the length of the input prompt. (parameter=input_tokens, value={prompt})"
            )
            return error(self.engine.spec.kind, 400, message, "BadRequestError")
        if prompt + output > limit:
            message = (
                f"'max_tokens' or 'max_completion_tokens' is too large: {output}. This model's maximum context "
                f"length is {limit} tokens and your request has {prompt} input tokens ({output} > {limit} - "
                f"{prompt}). (parameter=max_tokens, value={output})"
            )
            return error(self.engine.spec.kind, 400, message, "BadRequestError")
        return None

    async def tokenize(self, request: web.Request) -> web.Response:
        """vLLM `POST /tokenize {"model", "prompt"}` -> {"count", "max_model_len", "tokens"}; llama.cpp
        `{"content"}` -> {"tokens"}. Counted as the completions endpoint counts a prompt."""
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            return error(self.engine.spec.kind, 400, "invalid JSON body", "BadRequestError")
        text = body.get("prompt", body.get("content", "")) if isinstance(body, dict) else ""
        count = prompt_tokens({"prompt": text})
        tokens = [(i * 7919) % 32000 for i in range(count)]
        if self.engine.spec.kind == "llamacpp":
            return web.json_response({"tokens": tokens})
        return web.json_response(
            {"count": count, "max_model_len": self.engine.context, "tokens": tokens, "token_strs": None}
        )

    async def chat(self, request: web.Request) -> web.StreamResponse:
        body = await self._body(request)
        if isinstance(body, web.Response):
            return body
        assert self.engine.load is not None
        style = self.engine.style
        model = str(body.get("model") or self.engine.spec.models[0])
        req, n_out = await self._admit(body)
        tool = tool_call_for(body) if self.engine.spec.tools else None
        structured = json_content_for(body) if self.engine.spec.tools and tool is None else None
        text = words(f"{self.engine.spec.name}-{req.arrived}", n_out)
        finish = "length"
        if tool is not None:  # the arguments, a few characters a token
            args = tool["function"]["arguments"]
            text = [args[i : i + 6] for i in range(0, len(args), 6)]
            n_out, finish = len(text), "tool_calls"
        elif structured is not None:  # guided decoding: the JSON, whole, then a stop
            text = [structured[i : i + 4] for i in range(0, len(structured), 4)]
            n_out, finish = len(text), "stop"
        try:
            if not body.get("stream"):
                await self._generate(req, n_out, None)
                return web.json_response(style.completion(model, "".join(text), req.prompt, n_out, finish, tool))
            response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
            await response.prepare(request)
            cid, created = f"chatcmpl-{uuid.uuid4().hex[:16]}", int(time.time())
            await response.write(sse(style.chunk(cid, model, created, {"role": "assistant", "content": ""})))
            if tool is not None:
                await response.write(sse(style.chunk(cid, model, created, style.tool_call_start(tool))))
                pieces = [style.chunk(cid, model, created, style.tool_call_delta({"arguments": p})) for p in text]
            else:
                pieces = [style.chunk(cid, model, created, {"content": w}) for w in text]
            await self._generate(req, n_out, response, pieces=pieces)
            await response.write(sse(style.chunk(cid, model, created, {}, finish)))
            if (body.get("stream_options") or {}).get("include_usage"):
                await response.write(sse(style.usage_chunk(cid, model, created, req.prompt, n_out)))
            await response.write(sse("[DONE]"))
            await response.write_eof()
            return response
        finally:
            req.generated = max(req.generated, req.output)

    async def completions(self, request: web.Request) -> web.StreamResponse:
        body = await self._body(request)
        if isinstance(body, web.Response):
            return body
        model = str(body.get("model") or self.engine.spec.models[0])
        req, n_out = await self._admit(body)
        text = words(f"{self.engine.spec.name}-{req.arrived}", n_out)
        try:
            if not body.get("stream"):
                await self._generate(req, n_out, None)
                return web.json_response(
                    self.engine.style.text_completion(model, "".join(text), req.prompt, n_out, "length")
                )
            response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await response.prepare(request)
            cid, created = f"cmpl-{uuid.uuid4().hex[:16]}", int(time.time())
            chunks = [
                {
                    "id": cid,
                    "object": "text_completion",
                    "created": created,
                    "model": model,
                    "choices": [{"index": 0, "text": w, "logprobs": None, "finish_reason": None}],
                }
                for w in text
            ]
            await self._generate(req, n_out, response, pieces=chunks)
            await response.write(
                sse(
                    {
                        "id": cid,
                        "object": "text_completion",
                        "created": created,
                        "model": model,
                        "choices": [{"index": 0, "text": "", "logprobs": None, "finish_reason": "length"}],
                    }
                )
            )
            await response.write(sse("[DONE]"))
            await response.write_eof()
            return response
        finally:
            req.generated = max(req.generated, req.output)

    async def _generate(
        self, req: Req, n: int, response: web.StreamResponse | None, pieces: list[dict[str, Any]] | None = None
    ) -> None:
        """Emit n tokens at the engine's current per-user speed, counting them in the load model."""
        assert self.engine.load is not None
        due = time.monotonic()
        for i in range(n):
            if self.engine.wedged:  # it hangs: no token until a restart, which cuts this connection
                await self.engine.unwedged.wait()
                raise web.HTTPServiceUnavailable(text="the engine restarted while this request hung")
            speed = self.engine.load.per_user_tps() * self.engine.load.spec_gain(req)
            if i:
                due += 1.0 / speed
                delay = due - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
            self.engine.load.emit(req, 1.0, speed)
            if response is not None and pieces is not None:
                await response.write(sse(pieces[i]))
