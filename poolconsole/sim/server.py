"""HTTP servers of the simulated engines (aiohttp), one per engine on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import math
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
from aiohttp import web

from poolconsole.sim import expose
from poolconsole.sim.demo_pool import EngineSpec
from poolconsole.sim.litellm_metrics import GatewayUsage
from poolconsole.sim.load import EngineLoad, Req
from poolconsole.sim.logs import ContainerLog, startup_lines
from poolconsole.sim.ollama import OllamaResidency
from poolconsole.sim.openai_api import (
    Style,
    draft_acceptance,
    embedding,
    json_content_for,
    max_tokens,
    prompt_tokens,
    sse,
    tool_call_for,
    words,
)

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


def _redirect(to: str) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def handler(request: web.Request) -> web.Response:
        raise web.HTTPTemporaryRedirect(to + (f"?{request.query_string}" if request.query_string else ""))

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
        self._relisten: asyncio.Task[None] | None = None
        """vLLM / SGLang loading after a restart: listening again once the model is loaded."""
        self.restarts = 0
        """How many times the engine restarted (its container's RestartCount)."""
        self.port = 0
        self.url = ""
        self.runner: web.AppRunner | None = None
        self.site: web.TCPSite | None = None
        self.backends = backends or {}
        self._last_scrape = (now, 0.0, 0.0)
        self._last_spec = (0.0, 0.0, 0.0)
        """Draft steps, draft tokens and accepted tokens at the previous scrape (SGLang's gauges cover the
        interval since)."""
        self.style = Style(
            spec.kind, {"vllm": f"vllm-{spec.version}-sim", "llamacpp": spec.version}.get(spec.kind, spec.version)
        )
        self.client: httpx.AsyncClient | None = None
        self.log = ContainerLog()
        """What `docker logs` prints for its container (every run, as across a real restart)."""
        self.api_key: str | None = None
        """The key it was started with (`--api-key`, LiteLLM's master key): requests without it are refused
        the way the real engine refuses them. None: it answers everyone. Ollama has no keys."""
        self.listens_on = "127.0.0.1"
        """The address its host's `ss -ltnH` shows it bound to (the demo's socket is on loopback whatever
        this says)."""
        self.backend_key: str | None = None
        """LiteLLM: the key it sends to the engines behind it (its model list's `api_key`)."""
        self.ollama: OllamaResidency | None = OllamaResidency(spec.embedding_dims) if spec.kind == "ollama" else None
        self.usage: GatewayUsage | None = GatewayUsage(time.time) if spec.kind == "litellm" else None
        """LiteLLM: its own accounting, served on /metrics/ (sim.litellm_metrics)."""
        self.unwedged = asyncio.Event()
        """Clear while the engine is wedged (`--scenario wedge`): it answers /health and /metrics with its
        requests running, generates nothing and its completions hang, until it restarts."""
        self.unwedged.set()

    # -- lifecycle ------------------------------------------------------------------------------------
    async def start(self, port: int = 0) -> None:
        self.runner = web.AppRunner(self.app(), access_log=None, handler_cancellation=True)
        await self.runner.setup()
        await self._listen(port)
        self._log_startup()

    def _log_startup(self) -> None:
        if self.ollama is not None:
            self.log.write(self.ollama.config_line(f"{self.listens_on}:{self.port}"))
        model = self.spec.models[0] if self.spec.models else self.spec.name
        self.log.write(*startup_lines(self.spec.kind, self.spec.version, model, self.port, self.listens_on))

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
        if self._relisten is not None:
            self._relisten.cancel()
        if self.client is not None:
            await self.client.aclose()
        if self.runner is not None:
            await self.runner.cleanup()

    @property
    def wedged(self) -> bool:
        return not self.unwedged.is_set()

    def wedge(self) -> None:
        """The wedge `/health` hides (vllm-project/vllm#36451): the engine keeps answering `/health` and
        `/metrics`, its requests stay running (one is admitted if none runs, so requests_running > 0), its
        generation counter stops and its completions hang, until a restart clears it."""
        if self.load is not None and not self.load.running:
            self.load.add_request(16, 256, time.monotonic())
        self.unwedged.clear()

    def restart(self, loading_s: float = 3.0) -> None:
        """A restart: counters reset, a new process start time, `loading_s` loading the model. Meanwhile
        the engine answers as its own server does: vLLM and SGLang have not called listen() yet (vLLM binds
        its port first, to hold it, but listens only once the model is loaded), so connections are refused;
        llama-server listens at once and answers every request 503 "Loading model" (its pre-routing
        middleware_server_state)."""
        now = time.monotonic()
        self.restarts += 1
        self.unwedged.set()  # a new process: the wedge is gone (its hung requests went with the old one)
        if self.load is not None:
            self.load.reset(now)
        self.wall_start = time.time()
        self.boot_ms = int(now * 1000)
        self.loading_until = now + loading_s
        self._log_startup()
        if self.spec.kind in ("vllm", "sglang") and loading_s > 0:
            if self._relisten is not None:
                self._relisten.cancel()
            self._relisten = asyncio.get_running_loop().create_task(self._refuse_while_loading(loading_s))

    async def _refuse_while_loading(self, seconds: float) -> None:
        await self.stop_listening()
        await asyncio.sleep(seconds)
        await self.resume_listening()

    @property
    def loading(self) -> bool:
        return time.monotonic() < self.loading_until

    @web.middleware
    async def _loading_state(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        """llama-server while it loads: every request (its web UI's files aside) is answered 503."""
        if self.loading and self.spec.kind == "llamacpp":
            body = {"error": {"message": "Loading model", "type": "unavailable_error", "code": 503}}
            return web.json_response(body, status=503)
        return await handler(request)

    # -- routes ---------------------------------------------------------------------------------------
    def app(self) -> web.Application:
        app = web.Application(client_max_size=4 * 1024 * 1024, middlewares=[self._auth, self._loading_state])
        kind = self.spec.kind
        r = app.router
        if kind in ("vllm", "sglang", "llamacpp"):
            r.add_get("/health", self.health)
            r.add_get("/metrics", self.metrics)
            r.add_get("/v1/models", self.models)
            r.add_post("/v1/chat/completions", self.chat)
            r.add_post("/v1/completions", self.completions)
        if kind in ("vllm", "llamacpp"):
            r.add_post("/tokenize", self.tokenize)
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
            r.add_post("/api/generate", self.ollama_generate)
            r.add_get("/api/tags", self.ollama_tags)
            r.add_post("/api/embed", self.ollama_embed)
            r.add_post("/v1/embeddings", self.embeddings)
            r.add_get("/v1/models", self.models)
        if kind == "litellm":
            r.add_get("/health/liveliness", _static("I'm alive!"))
            r.add_get("/health/liveness", _static("I'm alive!"))
            r.add_get("/health/readiness", _static({"status": "healthy", "db": "Not connected"}))
            r.add_get("/health", self.litellm_health)
            r.add_get("/metrics", _redirect("/metrics/"))  # LiteLLM mounts its Prometheus app at /metrics/
            r.add_get("/metrics/", self.litellm_metrics)
            r.add_get("/v1/models", self.models)
            r.add_post("/v1/chat/completions", self.litellm_proxy)
            r.add_post("/v1/completions", self.litellm_proxy)
            r.add_post("/v1/embeddings", self.litellm_proxy)
        return app

    @web.middleware
    async def _auth(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        """The real engines' key checks: vLLM guards /v1 only; SGLang all but /health* and /metrics; llama.cpp
        all but health and the models list; LiteLLM all but its liveness and readiness probes."""
        key = self.api_key
        if key is None or request.headers.get("Authorization") == f"Bearer {key}" or request.method == "OPTIONS":
            return await handler(request)
        path, kind = request.path, self.spec.kind
        if kind == "vllm" and not path.startswith("/v1"):
            return await handler(request)
        if kind == "sglang" and (path.startswith("/health") or path.startswith("/metrics")):
            return await handler(request)
        if kind == "llamacpp" and path in ("/health", "/v1/health", "/models", "/v1/models", "/api/tags"):
            return await handler(request)
        if kind == "litellm" and path in ("/health/liveliness", "/health/liveness", "/health/readiness"):
            return await handler(request)
        if kind == "llamacpp":
            body: Any = {"error": {"code": 401, "message": "Invalid API Key", "type": "authentication_error"}}
        elif kind == "litellm":
            message = "Authentication Error, No api key passed in."
            body = {"error": {"message": message, "type": "auth_error", "param": "None", "code": "401"}}
        else:
            body = {"error": "Unauthorized"}
        return web.json_response(body, status=401)

    async def health(self, request: web.Request) -> web.Response:
        """Only reached once the model is loaded (before: refused, or llama.cpp's 503 from _loading_state)."""
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

    def _spec_window(self) -> tuple[float, float] | None:
        """SGLang's spec_accept_rate / spec_accept_length over the interval since the previous scrape (its
        log interval), None when no draft was proposed in it (the gauges then keep the profile's mix)."""
        assert self.load is not None
        c = self.load.c
        steps, drafted, accepted = (
            c.spec_drafts - self._last_spec[0],
            c.spec_draft_tokens - self._last_spec[1],
            c.spec_accepted - self._last_spec[2],
        )
        self._last_spec = (c.spec_drafts, c.spec_draft_tokens, c.spec_accepted)
        if drafted <= 0 or steps <= 0:
            return None
        return accepted / drafted, 1 + accepted / steps

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
                body=expose.render_sglang(self.load, self.spec.models[0], gen, self._spec_window()),
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
        busy = expose.in_slots(self.load)
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
                            "n_decoded": math.floor(req.generated) if req else 0,
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
        """SGLang's `/server_info`: its ServerArgs (dataclasses.asdict; the fields read here), the scheduler's
        figures and the internal states, as sglang.srt.entrypoints.http_server serves them."""
        assert self.load is not None
        p = self.load.profile
        drafting = self.load.spec_on
        return web.json_response(
            {
                "model_path": f"/models/{self.spec.models[0]}",
                "served_model_name": self.spec.models[0],
                "context_length": self.spec.context,
                "quantization": None,
                "kv_cache_dtype": "fp8_e4m3" if "FP8 KV" in self.spec.description else "auto",
                "max_running_requests": p.max_seqs,
                "tp_size": max(1, len(self.spec.gpus)),
                "mem_fraction_static": 0.88,
                "disable_radix_cache": False,
                "speculative_algorithm": "EAGLE" if drafting else None,
                "speculative_num_draft_tokens": 4 if drafting else None,
                "max_total_num_tokens": p.kv_tokens,
                "max_req_input_len": self.spec.context - 5,
                "version": self.spec.version,
                "startup_time": self.wall_start,
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
        req = self.load.add_external(prompt_tokens(body), n_out, time.monotonic(), draft_acceptance(body))
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
        model = body.get("model")
        if self.spec.kind == "vllm" and model not in self.spec.models:
            return _error("vllm", 404, f"The model `{model}` does not exist.", "NotFoundError")
        too_long = self._over_context(prompt_tokens(body), max_tokens(body))
        return too_long or body

    @property
    def context(self) -> int:
        """The context one request may use: the model's, on llama.cpp its slot's (n_ctx / slots)."""
        if self.spec.kind == "llamacpp" and self.load is not None:
            return self.spec.context // self.load.profile.max_seqs
        return self.spec.context

    def _over_context(self, prompt: int, output: int) -> web.Response | None:
        """A request longer than the context, refused in the engine's own words (vLLM 0.32's two messages,
        llama.cpp's exceed_context_size_error)."""
        limit = self.context
        if self.spec.kind == "llamacpp":
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
            return _error(self.spec.kind, 400, message, "BadRequestError")
        if prompt + output > limit:
            message = (
                f"'max_tokens' or 'max_completion_tokens' is too large: {output}. This model's maximum context "
                f"length is {limit} tokens and your request has {prompt} input tokens ({output} > {limit} - "
                f"{prompt}). (parameter=max_tokens, value={output})"
            )
            return _error(self.spec.kind, 400, message, "BadRequestError")
        return None

    async def tokenize(self, request: web.Request) -> web.Response:
        """vLLM `POST /tokenize {"model", "prompt"}` -> {"count", "max_model_len", "tokens"}; llama.cpp
        `{"content"}` -> {"tokens"}. Counted as the completions endpoint counts a prompt."""
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            return _error(self.spec.kind, 400, "invalid JSON body", "BadRequestError")
        text = body.get("prompt", body.get("content", "")) if isinstance(body, dict) else ""
        count = prompt_tokens({"prompt": text})
        tokens = [(i * 7919) % 32000 for i in range(count)]
        if self.spec.kind == "llamacpp":
            return web.json_response({"tokens": tokens})
        return web.json_response({"count": count, "max_model_len": self.context, "tokens": tokens, "token_strs": None})

    async def chat(self, request: web.Request) -> web.StreamResponse:
        body = await self._body(request)
        if isinstance(body, web.Response):
            return body
        assert self.load is not None
        model = str(body.get("model") or self.spec.models[0])
        req, n_out = await self._admit(body)
        tool = tool_call_for(body) if self.spec.tools else None
        structured = json_content_for(body) if self.spec.tools and tool is None else None
        text = words(f"{self.spec.name}-{req.arrived}", n_out)
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
                return web.json_response(self.style.completion(model, "".join(text), req.prompt, n_out, finish, tool))
            response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
            await response.prepare(request)
            cid, created = f"chatcmpl-{uuid.uuid4().hex[:16]}", int(time.time())
            await response.write(sse(self.style.chunk(cid, model, created, {"role": "assistant", "content": ""})))
            if tool is not None:
                await response.write(sse(self.style.chunk(cid, model, created, self.style.tool_call_start(tool))))
                pieces = [
                    self.style.chunk(cid, model, created, self.style.tool_call_delta({"arguments": p})) for p in text
                ]
            else:
                pieces = [self.style.chunk(cid, model, created, {"content": w}) for w in text]
            await self._generate(req, n_out, response, pieces=pieces)
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
            if self.wedged:  # it hangs: no token until a restart, which cuts this connection
                await self.unwedged.wait()
                raise web.HTTPServiceUnavailable(text="the engine restarted while this request hung")
            speed = self.load.per_user_tps() * self.load.spec_gain(req)
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
        assert self.ollama is not None
        return web.json_response(self.ollama.ps())

    async def ollama_generate(self, request: web.Request) -> web.Response:
        """Only what changes residency: load (an empty prompt) and unload (`keep_alive: 0`); the demo's
        Ollama serves embedding models, which do not generate."""
        assert self.ollama is not None
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            return web.json_response({"error": "invalid character in request body"}, status=400)
        if not isinstance(body, dict):
            return web.json_response({"error": "json: cannot unmarshal the body"}, status=400)
        status, answer = self.ollama.generate(body)
        return web.json_response(answer, status=status, dumps=lambda o: json.dumps(o, separators=(",", ":")))  # Go's

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

    def _embed(self, model: str, inputs: Any, keep_alive: Any = None) -> list[list[float]] | None:
        dims = self.spec.embedding_dims.get(model)
        if dims is None:
            return None
        if self.ollama is not None:
            self.ollama.used(model, keep_alive=keep_alive)
        items = inputs if isinstance(inputs, list) else [inputs]
        return [embedding(f"{model}:{x}", dims) for x in items]

    async def ollama_embed(self, request: web.Request) -> web.Response:
        """Ollama's /api/embed: no input loads the model (no embeddings), keep_alive as given."""
        body = await request.json()
        vectors = self._embed(str(body.get("model")), body.get("input", []), body.get("keep_alive"))
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
        return {"Authorization": f"Bearer {self.backend_key}"} if self.backend_key else {}

    def _client(self) -> httpx.AsyncClient:
        if self.client is None:
            self.client = httpx.AsyncClient(timeout=httpx.Timeout(300.0, connect=5.0), trust_env=False)
        return self.client

    async def litellm_metrics(self, request: web.Request) -> web.Response:
        assert self.usage is not None
        return web.Response(
            text=self.usage.render(request.query_string),
            headers={"Content-Type": "text/plain; version=1.0.0; charset=utf-8"},
        )

    async def litellm_proxy(self, request: web.Request) -> web.StreamResponse:
        assert self.usage is not None
        self.usage.in_flight += 1
        started = time.monotonic()
        try:
            return await self._litellm_proxy(request, started)
        finally:
            self.usage.in_flight -= 1

    async def _litellm_proxy(self, request: web.Request, started: float) -> web.StreamResponse:
        assert self.usage is not None
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
            headers = {"Content-Type": JSON, **self._backend_headers()}
            upstream = client.build_request("POST", base + request.path, content=raw, headers=headers)
            resp = await client.send(upstream, stream=True)
        except httpx.HTTPError as exc:
            return _openai_error(500, f"litellm.InternalServerError: Connection error. {exc}", None, "500")
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
            self.usage.proxied(str(model), str(model), self.api_key is not None, tail, time.monotonic() - started)
        return out
