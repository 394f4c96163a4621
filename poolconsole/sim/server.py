"""HTTP servers of the simulated engines (aiohttp), one per engine on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
from aiohttp import web

from poolconsole.sim import expose
from poolconsole.sim.demo_pool import EngineSpec
from poolconsole.sim.load import EngineLoad, Req
from poolconsole.sim.openai_api import Style, embedding, max_tokens, prompt_tokens, sse, tool_call_for, words

JSON = "application/json"


def _openai_error(status: int, message: str, etype: str | None, code: int | str | None) -> web.Response:
    """The OpenAI error body (vLLM puts the status in `code`, LiteLLM the status as a string, Ollama null)."""
    body = {"error": {"message": message, "type": etype, "param": None, "code": code}}
    return web.json_response(body, status=status)


def _error(kind: str, status: int, message: str, etype: str) -> web.Response:
    if kind == "vllm":
        return _openai_error(status, message, etype, status)
    return web.json_response({"error": {"code": status, "message": message, "type": etype}}, status=status)


def _static(payload: Any) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def handler(request: web.Request) -> web.Response:
        return web.json_response(payload() if callable(payload) else payload)

    return handler


def _static_text(text: str) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def handler(request: web.Request) -> web.Response:
        return web.Response(text=text)

    return handler


class SimEngine:
    """One simulated engine: its load model, its HTTP app, restart and down switches."""

    def __init__(self, spec: EngineSpec, seed: int, backends: dict[str, str] | None = None) -> None:
        self.spec = spec
        now = time.monotonic()
        self.load = EngineLoad(spec.load, seed, now) if spec.load else None
        self.wall_start = time.time()
        self.boot_ms = int(now * 1000)
        self.loading_until = 0.0
        self.restarts = 0
        """How many times the engine restarted (its container's RestartCount)."""
        self.port = 0
        self.url = ""
        self.runner: web.AppRunner | None = None
        self.site: web.TCPSite | None = None
        self.backends = backends or {}
        self._last_scrape = (now, 0.0, 0.0)
        self.style = Style(
            spec.kind, {"vllm": f"vllm-{spec.version}-sim", "llamacpp": spec.version}.get(spec.kind, spec.version)
        )
        self.client: httpx.AsyncClient | None = None

    # -- lifecycle ------------------------------------------------------------------------------------
    async def start(self, port: int = 0) -> None:
        self.runner = web.AppRunner(self.app(), access_log=None, handler_cancellation=True)
        await self.runner.setup()
        await self._listen(port)

    async def _listen(self, port: int) -> None:
        assert self.runner is not None
        self.site = web.TCPSite(self.runner, "127.0.0.1", port, reuse_address=True)
        await self.site.start()
        self.port = int(self.runner.addresses[0][1])  # one site per runner: its bound (host, port)
        self.url = f"http://127.0.0.1:{self.port}"

    async def stop_listening(self) -> None:
        """The engine's process is gone: connections are refused."""
        if self.site is not None:
            await self.site.stop()
            self.site = None
        server = self.runner.server if self.runner is not None else None
        for handler in list(server.connections) if server is not None else []:
            handler.force_close()  # a dead process keeps no keep-alive connection open

    async def resume_listening(self) -> None:
        if self.site is None:
            await self._listen(self.port)

    async def close(self) -> None:
        if self.client is not None:
            await self.client.aclose()
        if self.runner is not None:
            await self.runner.cleanup()

    def restart(self, loading_s: float = 3.0) -> None:
        """A restart: counters reset, a new process start time, a few seconds loading the model."""
        now = time.monotonic()
        self.restarts += 1
        if self.load is not None:
            self.load.reset(now)
        self.wall_start = time.time()
        self.boot_ms = int(now * 1000)
        self.loading_until = now + loading_s

    @property
    def loading(self) -> bool:
        return time.monotonic() < self.loading_until

    # -- routes ---------------------------------------------------------------------------------------
    def app(self) -> web.Application:
        app = web.Application(client_max_size=4 * 1024 * 1024)
        kind = self.spec.kind
        r = app.router
        if kind in ("vllm", "sglang", "llamacpp"):
            r.add_get("/health", self.health)
            r.add_get("/metrics", self.metrics)
            r.add_get("/v1/models", self.models)
            r.add_post("/v1/chat/completions", self.chat)
            r.add_post("/v1/completions", self.completions)
        if kind == "vllm":
            r.add_get("/version", _static({"version": self.spec.version}))
            r.add_get("/ping", self.health)
            r.add_get("/load", _static({"server_load": 0}))
        if kind == "sglang":
            r.add_get("/server_info", self.sglang_server_info)
            r.add_get("/model_info", self.sglang_model_info)
            r.add_get("/health_generate", self.health)
        if kind == "llamacpp":
            r.add_get("/v1/health", self.health)
            r.add_get("/slots", self.slots)
            r.add_get("/props", self.props)
        if kind == "ollama":
            r.add_get("/", _static_text("Ollama is running"))
            r.add_get("/api/version", _static({"version": self.spec.version}))
            r.add_get("/api/ps", self.ollama_ps)
            r.add_get("/api/tags", self.ollama_tags)
            r.add_post("/api/embed", self.ollama_embed)
            r.add_post("/v1/embeddings", self.embeddings)
            r.add_get("/v1/models", self.models)
        if kind == "litellm":
            r.add_get("/health/liveliness", _static("I'm alive!"))
            r.add_get("/health/liveness", _static("I'm alive!"))
            r.add_get("/health/readiness", _static({"status": "healthy", "db": "Not connected"}))
            r.add_get("/health", self.litellm_health)
            r.add_get("/v1/models", self.models)
            r.add_post("/v1/chat/completions", self.litellm_proxy)
            r.add_post("/v1/completions", self.litellm_proxy)
            r.add_post("/v1/embeddings", self.litellm_proxy)
        return app

    async def health(self, request: web.Request) -> web.Response:
        if self.loading:
            if self.spec.kind == "llamacpp":
                return web.json_response(
                    {"error": {"message": "Loading model", "type": "unavailable_error", "code": 503}}, status=503
                )
            return web.Response(status=503)
        if self.spec.kind == "llamacpp":
            return web.json_response({"status": "ok"})
        return web.Response(status=200)

    def _window_rates(self) -> tuple[float, float]:
        """llama.cpp and SGLang report throughput gauges averaged since the previous scrape."""
        assert self.load is not None
        now = time.monotonic()
        then, gen, prompt = self._last_scrape
        c = self.load.c
        dt = max(now - then, 1e-6)
        rates = (max(0.0, c.generation_tokens - gen) / dt, max(0.0, c.prompt_tokens - prompt) / dt)
        self._last_scrape = (now, c.generation_tokens, c.prompt_tokens)
        return rates

    async def metrics(self, request: web.Request) -> web.Response:
        if self.load is None:
            return web.Response(status=404)
        kind = self.spec.kind
        if kind == "vllm":
            return web.Response(
                text=expose.render_vllm(self.load, self.spec.models[0], self.wall_start),
                headers={"Content-Type": "text/plain; version=1.0.0; charset=utf-8"},
            )
        gen, prompt = self._window_rates()
        if kind == "sglang":
            return web.Response(
                body=expose.render_sglang(self.load, self.spec.models[0], gen),
                headers={"Content-Type": "text/plain; version=1.0.0; charset=utf-8"},
            )
        return web.Response(
            text=expose.render_llamacpp(self.load, gen, prompt),
            headers={"Content-Type": "text/plain; version=0.0.4", "Process-Start-Time-Unix": str(self.boot_ms)},
        )

    async def models(self, request: web.Request) -> web.Response:
        created = int(self.wall_start)
        names = self.spec.models if self.spec.kind != "litellm" else tuple(self.backends)
        owner = {"vllm": "vllm", "sglang": "sglang", "llamacpp": "llamacpp", "ollama": "library"}.get(
            self.spec.kind, "openai"
        )
        data = []
        for name in names:
            card: dict[str, Any] = {"id": name, "object": "model", "created": created, "owned_by": owner}
            if self.spec.kind in ("vllm", "sglang"):
                card.update(root=f"/models/{name}", parent=None, max_model_len=self.spec.context)
            data.append(card)
        return web.json_response({"object": "list", "data": data})

    async def slots(self, request: web.Request) -> web.Response:
        assert self.load is not None
        busy = list(self.load.running)
        n_slots = self.load.profile.max_seqs
        n_ctx = self.spec.context // n_slots
        out = []
        for i in range(n_slots):
            req = busy[i] if i < len(busy) else None
            out.append(
                {
                    "id": i,
                    "n_ctx": n_ctx,
                    "speculative": False,
                    "is_processing": req is not None,
                    "id_task": i,
                    "n_prompt_tokens": req.prompt if req else 0,
                    "n_prompt_tokens_processed": req.prompt if req else 0,
                    "n_prompt_tokens_cache": 0,
                    "params": {"n_predict": req.output if req else -1},
                    "next_token": [
                        {
                            "has_next_token": req is not None,
                            "has_new_line": False,
                            "n_remain": int(req.output - req.generated) if req else -1,
                            "n_decoded": int(req.generated) if req else 0,
                        }
                    ],
                }
            )
        return web.json_response(out)

    async def props(self, request: web.Request) -> web.Response:
        return web.json_response(
            {
                "build_info": self.spec.version,
                "total_slots": self.load.profile.max_seqs if self.load else 1,
                "model_path": f"/models/{self.spec.models[0]}.gguf",
                "is_sleeping": False,
                "modalities": {"vision": False},
            }
        )

    async def sglang_server_info(self, request: web.Request) -> web.Response:
        assert self.load is not None
        return web.json_response(
            {
                "version": self.spec.version,
                "startup_time": self.wall_start,
                "served_model_name": self.spec.models[0],
                "frontend": "python",
                "internal_states": [
                    {"last_gen_throughput": self.load.per_user_tps(), "avg_spec_accept_length": 1 + 3 * 0.72}
                ],
            }
        )

    async def sglang_model_info(self, request: web.Request) -> web.Response:
        return web.json_response(
            {
                "model_path": f"/models/{self.spec.models[0]}",
                "served_model_name": self.spec.models[0],
                "is_generation": True,
            }
        )

    # -- OpenAI API -----------------------------------------------------------------------------------
    async def _admit(self, body: dict[str, Any]) -> tuple[Req, int]:
        assert self.load is not None
        n_out = max_tokens(body)
        req = self.load.add_external(prompt_tokens(body), n_out, time.monotonic())
        while req.first_token is None:
            await asyncio.sleep(0.01)
        return req, n_out

    async def _body(self, request: web.Request) -> dict[str, Any] | web.Response:
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            status = 500 if self.spec.kind == "llamacpp" else 400
            return _error(self.spec.kind, status, "invalid JSON body", "BadRequestError")
        if not isinstance(body, dict):
            return _error(self.spec.kind, 400, "body must be a JSON object", "BadRequestError")
        if self.loading:
            return _error(self.spec.kind, 503, "Loading model", "unavailable_error")
        model = body.get("model")
        if self.spec.kind == "vllm" and model not in self.spec.models:
            return _error("vllm", 404, f"The model `{model}` does not exist.", "NotFoundError")
        return body

    async def chat(self, request: web.Request) -> web.StreamResponse:
        body = await self._body(request)
        if isinstance(body, web.Response):
            return body
        assert self.load is not None
        model = str(body.get("model") or self.spec.models[0])
        req, n_out = await self._admit(body)
        tool = tool_call_for(body) if self.spec.tools else None
        text = words(f"{self.spec.name}-{req.arrived}", n_out)
        try:
            if not body.get("stream"):
                await self._generate(req, n_out, None)
                return web.json_response(self.style.completion(model, "".join(text), req.prompt, n_out, "length", tool))
            response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
            await response.prepare(request)
            cid, created = f"chatcmpl-{uuid.uuid4().hex[:16]}", int(time.time())
            await response.write(sse(self.style.chunk(cid, model, created, {"role": "assistant", "content": ""})))
            if tool is not None:
                args = tool["function"]["arguments"]
                first = {
                    "tool_calls": [
                        {
                            "id": tool["id"],
                            "type": "function",
                            "index": 0,
                            "function": {"name": tool["function"]["name"], "arguments": ""},
                        }
                    ]
                }
                await response.write(sse(self.style.chunk(cid, model, created, first)))
                pieces = [args[i : i + 6] for i in range(0, len(args), 6)]
                await self._generate(
                    req,
                    len(pieces),
                    response,
                    pieces=[
                        self.style.chunk(
                            cid, model, created, {"tool_calls": [{"index": 0, "function": {"arguments": p}}]}
                        )
                        for p in pieces
                    ],
                )
                finish = "tool_calls"
            else:
                await self._generate(
                    req, n_out, response, pieces=[self.style.chunk(cid, model, created, {"content": w}) for w in text]
                )
                finish = "length"
            await response.write(sse(self.style.chunk(cid, model, created, {}, finish)))
            if (body.get("stream_options") or {}).get("include_usage"):
                await response.write(sse(self.style.usage_chunk(cid, model, created, req.prompt, n_out)))
            await response.write(sse("[DONE]"))
            await response.write_eof()
            return response
        finally:
            req.generated = max(req.generated, req.output)

    async def completions(self, request: web.Request) -> web.StreamResponse:
        body = await self._body(request)
        if isinstance(body, web.Response):
            return body
        model = str(body.get("model") or self.spec.models[0])
        req, n_out = await self._admit(body)
        text = words(f"{self.spec.name}-{req.arrived}", n_out)
        try:
            if not body.get("stream"):
                await self._generate(req, n_out, None)
                return web.json_response(self.style.text_completion(model, "".join(text), req.prompt, n_out, "length"))
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
        assert self.load is not None
        due = time.monotonic()
        for i in range(n):
            speed = self.load.per_user_tps()
            if i:
                due += 1.0 / speed
                delay = due - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
            self.load.emit(req, 1.0, speed)
            if response is not None and pieces is not None:
                await response.write(sse(pieces[i]))

    # -- Ollama ---------------------------------------------------------------------------------------
    async def ollama_ps(self, request: web.Request) -> web.Response:
        expires = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(time.time() + 300)) + ".000000000Z"
        models = []
        for name, dims in list(self.spec.embedding_dims.items())[:3]:
            size = dims * 700_000
            models.append(
                {
                    "name": name,
                    "model": name,
                    "size": size,
                    "digest": uuid.uuid5(uuid.NAMESPACE_DNS, name).hex,
                    "details": {
                        "parent_model": "",
                        "format": "gguf",
                        "family": "bert",
                        "families": ["bert"],
                        "parameter_size": "137M",
                        "quantization_level": "F16",
                    },
                    "expires_at": expires,
                    "size_vram": size,
                    "context_length": 8192,
                }
            )
        return web.json_response({"models": models})

    async def ollama_tags(self, request: web.Request) -> web.Response:
        return web.json_response(
            {
                "models": [
                    {
                        "name": n,
                        "model": n,
                        "modified_at": "2026-11-01T10:00:00Z",
                        "size": d * 700_000,
                        "digest": uuid.uuid5(uuid.NAMESPACE_DNS, n).hex,
                        "details": {
                            "format": "gguf",
                            "family": "bert",
                            "parameter_size": "137M",
                            "quantization_level": "F16",
                        },
                    }
                    for n, d in self.spec.embedding_dims.items()
                ]
            }
        )

    def _embed(self, model: str, inputs: Any) -> list[list[float]] | None:
        dims = self.spec.embedding_dims.get(model)
        if dims is None:
            return None
        items = inputs if isinstance(inputs, list) else [inputs]
        return [embedding(f"{model}:{x}", dims) for x in items]

    async def ollama_embed(self, request: web.Request) -> web.Response:
        body = await request.json()
        vectors = self._embed(str(body.get("model")), body.get("input", ""))
        if vectors is None:
            return web.json_response(
                {"error": f'model "{body.get("model")}" not found, try pulling it first'}, status=404
            )
        return web.json_response(
            {
                "model": body.get("model"),
                "embeddings": vectors,
                "total_duration": 14_000_000,
                "load_duration": 1_000_000,
                "prompt_eval_count": 8,
            }
        )

    async def embeddings(self, request: web.Request) -> web.Response:
        body = await request.json()
        vectors = self._embed(str(body.get("model")), body.get("input", ""))
        if vectors is None:
            return _openai_error(404, f'model "{body.get("model")}" not found', "api_error", None)
        return web.json_response(
            {
                "object": "list",
                "model": body.get("model"),
                "data": [{"object": "embedding", "embedding": v, "index": i} for i, v in enumerate(vectors)],
                "usage": {"prompt_tokens": 8, "total_tokens": 8},
            }
        )

    # -- LiteLLM --------------------------------------------------------------------------------------
    async def litellm_health(self, request: web.Request) -> web.Response:
        healthy: list[dict[str, str]] = []
        unhealthy: list[dict[str, str]] = []
        client = self._client()
        for model, base in self.backends.items():
            try:
                ok = (await client.get(base + "/v1/models", timeout=2.0)).status_code == 200
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

    def _client(self) -> httpx.AsyncClient:
        if self.client is None:
            self.client = httpx.AsyncClient(timeout=httpx.Timeout(300.0, connect=5.0), trust_env=False)
        return self.client

    async def litellm_proxy(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        try:
            model = json.loads(raw).get("model")
        except (ValueError, AttributeError):
            return _openai_error(400, "invalid JSON", "invalid_request_error", "400")
        base = self.backends.get(str(model))
        if base is None:
            return _openai_error(400, f"Invalid model name passed in model={model}", "invalid_request_error", "400")
        client = self._client()
        try:
            upstream = client.build_request("POST", base + request.path, content=raw, headers={"Content-Type": JSON})
            resp = await client.send(upstream, stream=True)
        except httpx.HTTPError as exc:
            return _openai_error(500, f"litellm.InternalServerError: Connection error. {exc}", None, "500")
        out = web.StreamResponse(
            status=resp.status_code, headers={"Content-Type": resp.headers.get("content-type", JSON)}
        )
        await out.prepare(request)
        try:
            async for chunk in resp.aiter_raw():
                await out.write(chunk)
        finally:
            await resp.aclose()
        await out.write_eof()
        return out
