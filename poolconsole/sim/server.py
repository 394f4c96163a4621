"""HTTP servers of the simulated engines (aiohttp), one per engine on 127.0.0.1: the engine (its load,
lifecycle, restart and wedge switches, auth, health, metrics and each kind's own info routes). The APIs
that serve requests live beside it: openai_routes (chat, completions, tokenize), ollama_api, gateway_api
(LiteLLM's proxy and accounting)."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
from aiohttp import web

from poolconsole.sim import expose
from poolconsole.sim.demo_pool import EngineSpec
from poolconsole.sim.gateway_api import GatewayRoutes
from poolconsole.sim.litellm_metrics import GatewayUsage
from poolconsole.sim.load import EngineLoad
from poolconsole.sim.logs import ContainerLog, startup_lines
from poolconsole.sim.ollama import OllamaResidency
from poolconsole.sim.ollama_api import OllamaRoutes
from poolconsole.sim.openai_api import Style
from poolconsole.sim.openai_routes import OpenAIRoutes
from poolconsole.sim.responses import redirect, static, static_text


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

    def hang(self) -> None:
        """Idle and serving nothing (what a canary catches): its requests dropped, nothing admitted, its
        counters still (the demo holds a wedged engine's load) and its completions hang, until a restart."""
        if self.load is not None:
            self.load.running.clear()
            self.load.waiting.clear()
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

    @property
    def context(self) -> int:
        """The context one request may use: the model's, on llama.cpp its slot's (n_ctx / slots)."""
        if self.spec.kind == "llamacpp" and self.load is not None:
            return self.spec.context // self.load.profile.max_seqs
        return self.spec.context

    # -- routes ---------------------------------------------------------------------------------------
    def app(self) -> web.Application:
        app = web.Application(client_max_size=4 * 1024 * 1024, middlewares=[self._auth, self._loading_state])
        kind = self.spec.kind
        r = app.router
        openai, ollama, gateway = OpenAIRoutes(self), OllamaRoutes(self), GatewayRoutes(self)
        if kind in ("vllm", "sglang", "llamacpp"):
            r.add_get("/health", self.health)
            r.add_get("/metrics", self.metrics)
            r.add_get("/v1/models", self.models)
            r.add_post("/v1/chat/completions", openai.chat)
            r.add_post("/v1/completions", openai.completions)
        if kind in ("vllm", "llamacpp"):
            r.add_post("/tokenize", openai.tokenize)
        if kind == "vllm":
            r.add_get("/version", static({"version": self.spec.version}))
            r.add_get("/ping", self.health)
            r.add_get("/load", static({"server_load": 0}))
        if kind == "sglang":
            r.add_get("/server_info", self.sglang_server_info)
            r.add_get("/model_info", self.sglang_model_info)
            r.add_get("/health_generate", self.health)
        if kind == "llamacpp":
            r.add_get("/v1/health", self.health)
            r.add_get("/slots", self.slots)
            r.add_get("/props", self.props)
        if kind == "ollama":
            r.add_get("/", static_text("Ollama is running"))
            r.add_get("/api/version", static({"version": self.spec.version}))
            r.add_get("/api/ps", ollama.ps)
            r.add_post("/api/generate", ollama.generate)
            r.add_get("/api/tags", ollama.tags)
            r.add_post("/api/embed", ollama.embed)
            r.add_post("/v1/embeddings", ollama.embeddings)
            r.add_get("/v1/models", self.models)
        if kind == "litellm":
            r.add_get("/health/liveliness", static("I'm alive!"))
            r.add_get("/health/liveness", static("I'm alive!"))
            r.add_get("/health/readiness", static({"status": "healthy", "db": "Not connected"}))
            r.add_get("/health", gateway.health)
            r.add_get("/metrics", redirect("/metrics/"))  # LiteLLM mounts its Prometheus app at /metrics/
            r.add_get("/metrics/", gateway.metrics)
            r.add_get("/v1/models", self.models)
            r.add_post("/v1/chat/completions", gateway.proxy)
            r.add_post("/v1/completions", gateway.proxy)
            r.add_post("/v1/embeddings", gateway.proxy)
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
