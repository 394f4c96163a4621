"""One poll of one engine: concurrent GETs of its endpoints, parsed into an EngineSnapshot.

A collector never raises: refused, timeout, 401/403, 404, 5xx, HTML, garbage, oversized bodies all
become a state and an error in words.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from poolconsole.collect.engines import jsonparse, litellm_usage, specs
from poolconsole.collect.engines.live_generation import LiveGeneration
from poolconsole.collect.engines.mapping import MetricSpec, parse_metrics
from poolconsole.collect.engines.page_memo import PageMemo
from poolconsole.collect.fetch import Failure, Fetched, fetch
from poolconsole.collect.poll_client import PollClient
from poolconsole.collect.prom import ParseError, check_whole, decode
from poolconsole.config.models import Engine, EngineKind, Settings
from poolconsole.model.snapshots import (
    COUNTERS,
    GAUGES,
    HISTOGRAMS,
    EngineMetrics,
    EngineSnapshot,
    EngineState,
    OllamaModel,
    SlotsInfo,
)

_SEVERITY = {EngineState.OK: 0, EngineState.DEGRADED: 1, EngineState.AUTH_FAILED: 2, EngineState.DOWN: 3}
ALL_METRICS = (*GAUGES, *COUNTERS, *HISTOGRAMS)

SPEC: dict[EngineKind, MetricSpec] = {
    EngineKind.VLLM: specs.VLLM,
    EngineKind.SGLANG: specs.SGLANG,
    EngineKind.LLAMACPP: specs.LLAMACPP,
}
MODELS_EVERY = 30
VERSION_PATH = {EngineKind.VLLM: "/version", EngineKind.SGLANG: "/server_info", EngineKind.LLAMACPP: "/props"}
METRICS_HINT = {
    EngineKind.SGLANG: "start SGLang with --enable-metrics",
    EngineKind.LLAMACPP: "start llama-server with --metrics",
    EngineKind.VLLM: "vLLM always mounts /metrics: is this really vLLM?",
}


@dataclass
class _Poll:
    """Mutable scratch of one poll; frozen into an EngineSnapshot at the end."""

    state: EngineState = EngineState.OK
    errors: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    missing: dict[str, str] = field(default_factory=dict)
    metrics: EngineMetrics | None = None
    models: tuple[str, ...] = ()
    slots: SlotsInfo | None = None
    ollama: tuple[OllamaModel, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)
    restart_marker: str | None = None
    latency_s: float | None = None
    sampled: float | None = None
    """time.monotonic() when the /metrics page arrived: the snapshot's time (rates divide by its steps)."""

    def worse(self, state: EngineState, error: str) -> None:
        if _SEVERITY[state] > _SEVERITY[self.state]:
            self.state = state
        self.errors.append(error)

    def answered(self, fetched: Fetched, path: str) -> None:
        self.sources.append(path)
        if self.latency_s is None or fetched.elapsed_s > self.latency_s:
            self.latency_s = fetched.elapsed_s

    def all_missing(self, reason: str) -> None:
        present = set(self.metrics.values) | set(self.metrics.histograms) if self.metrics else set()
        for name in ALL_METRICS:
            if name not in present:
                self.missing.setdefault(name, reason)


def _failure_state(fetched: Fetched) -> EngineState:
    if fetched.failure is Failure.AUTH:
        return EngineState.AUTH_FAILED
    if fetched.failure in (Failure.REFUSED, Failure.TIMEOUT, Failure.SERVER_ERROR):
        return EngineState.DOWN
    return EngineState.DEGRADED


def _set_value(poll: _Poll, name: str, value: float) -> None:
    """The poll's metrics with one value replaced (EngineMetrics is frozen and may be the page memo's)."""
    assert poll.metrics is not None
    values = dict(poll.metrics.values)
    values[name] = value
    poll.metrics = EngineMetrics(
        MappingProxyType(values),
        poll.metrics.histograms,
        poll.metrics.ranks,
        poll.metrics.model_names,
        poll.metrics.series,
    )


class EnginePoller:
    """Polls one engine. Keeps what carries from poll to poll: version, models, restart marker, the last
    page's layout, and its own keep-alive connections (closed with `aclose`)."""

    def __init__(
        self,
        engine: Engine,
        client: PollClient | None = None,
        settings: Settings | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.engine = engine
        self.client = client or PollClient()
        self.settings = settings or Settings()
        self.clock = clock
        self.version: str | None = None
        self.models: tuple[str, ...] | None = None
        self.restart_marker: str | None = None
        self.polls = 0
        self.page = PageMemo()
        self.generation = LiveGeneration()

    async def aclose(self) -> None:
        await self.client.aclose()

    # -- plumbing ---------------------------------------------------------------------------------
    def _headers(self, poll: _Poll) -> dict[str, str] | None:
        env = self.engine.api_key_env
        if env is None:
            return None
        key = os.environ.get(env)
        if not key:
            poll.errors.append(f"environment variable {env} (api_key_env) is not set")
            return None
        return {"Authorization": f"Bearer {key}"}

    async def _get(self, path: str, headers: dict[str, str] | None) -> Fetched:
        return await fetch(
            self.client,
            self.engine.url + path,
            timeout_s=self.settings.http_timeout_s,
            max_bytes=self.settings.max_body_bytes,
            headers=headers,
        )

    async def _gather(self, paths: list[str], headers: dict[str, str] | None) -> dict[str, Fetched]:
        if len(paths) == 1:  # the steady state: no task and gathering future for one GET
            return {paths[0]: await self._get(paths[0], headers)}
        results = await asyncio.gather(*(self._get(p, headers) for p in paths))
        return dict(zip(paths, results, strict=True))

    # -- entry point ------------------------------------------------------------------------------
    async def poll(self) -> EngineSnapshot:
        poll = _Poll()
        kind = self.engine.kind
        handler: dict[EngineKind, Callable[[_Poll], Awaitable[None]]] = {
            EngineKind.VLLM: self._poll_prometheus_engine,
            EngineKind.SGLANG: self._poll_prometheus_engine,
            EngineKind.LLAMACPP: self._poll_prometheus_engine,
            EngineKind.OLLAMA: self._poll_ollama,
            EngineKind.LITELLM: self._poll_litellm,
            EngineKind.OPENAI: self._poll_openai,
        }
        try:
            await handler[kind](poll)
        except Exception as exc:  # a collector must never take the console down
            poll.worse(EngineState.DEGRADED, f"internal error while reading this engine: {type(exc).__name__}: {exc}")
        if poll.state is not EngineState.OK:
            poll.all_missing(f"engine {poll.state.value}")
        # Stamped when the /metrics request went out, not now: a late stamp (a poll resumed late on a busy
        # loop, or the first one, which also waits for /v1/models and /version) skews the time steps.
        now = time.monotonic()
        sampled = now if poll.sampled is None else poll.sampled
        return EngineSnapshot(
            name=self.engine.name,
            kind=kind.value,
            url=self.engine.url,
            host=self.engine.host,
            fetched_at=self.clock() - (now - sampled),  # on the injected clock, as of the request
            monotonic=sampled,
            state=poll.state,
            error="; ".join(dict.fromkeys(poll.errors)) or None,
            source="GET " + ", ".join(poll.sources) if poll.sources else "",
            latency_s=poll.latency_s,
            version=self.version,
            models=poll.models,
            metrics=poll.metrics,
            restart_marker=poll.restart_marker,
            missing=MappingProxyType(poll.missing),
            slots=poll.slots,
            ollama_models=poll.ollama,
            extra=MappingProxyType(poll.extra),
        )

    # -- vLLM, SGLang, llama.cpp ------------------------------------------------------------------
    async def _poll_prometheus_engine(self, poll: _Poll) -> None:
        """One request per poll in the steady state: /metrics (and llama.cpp's /slots). Models and version
        are read on the first poll, every MODELS_EVERY polls and after a restart; /health only when
        /metrics fails, to tell a dead engine from one that only hides its metrics."""
        kind = self.engine.kind
        headers = self._headers(poll)
        paths = ["/metrics"]
        if kind is EngineKind.LLAMACPP:
            paths.append("/slots")
        refresh = self.models is None or self.polls % MODELS_EVERY == 0
        if refresh:
            paths.append("/v1/models")
        if self.version is None:
            paths.append(VERSION_PATH[kind])
        self.polls += 1
        got = await self._gather(paths, headers)
        metrics = got["/metrics"]
        if metrics.failure in (Failure.REFUSED, Failure.TIMEOUT):
            poll.worse(EngineState.DOWN, metrics.error or "unreachable")
            # its own words, not the failure's kind ("refused" was said of a name that does not resolve)
            poll.all_missing(f"engine down: {(metrics.error or 'unreachable').split(' (')[0]}")
            self.models = None
            return
        if not metrics.ok:
            health = (await self._gather(["/health"], headers))["/health"]
            if health.status == 503:
                loading = kind is EngineKind.LLAMACPP
                poll.worse(
                    EngineState.DEGRADED if loading else EngineState.DOWN,
                    "loading model (/health answers 503)" if loading else "engine not healthy: /health answers 503",
                )
                poll.all_missing("loading model" if loading else "engine not healthy")
                self.models = None
                return
        self._read_metrics(poll, metrics)
        if poll.restart_marker != self.restart_marker and self.restart_marker is not None and not refresh:
            self.models = None  # a restart may serve other models (a profile switch): read them next poll
        self.restart_marker = poll.restart_marker or self.restart_marker
        if "/v1/models" in got:
            self._read_models(poll, got["/v1/models"])
        else:
            poll.models = self.models or ()
        if "/slots" in got:
            self._read_slots(poll, got["/slots"])
        if kind is EngineKind.LLAMACPP:
            self._live_generation(poll)
        for path in ("/version", "/server_info", "/props"):
            if path in got and got[path].ok:
                self._read_version(path, got[path])

    def _read_metrics(self, poll: _Poll, fetched: Fetched) -> None:
        kind = self.engine.kind
        spec = SPEC[kind]
        if not fetched.ok:
            if fetched.failure is Failure.NOT_FOUND:
                poll.worse(EngineState.DEGRADED, f"/metrics not exposed (HTTP 404): {METRICS_HINT[kind]}")
                poll.all_missing("metrics disabled on this engine (/metrics answers 404)")
            elif fetched.failure is Failure.AUTH:
                poll.worse(EngineState.AUTH_FAILED, f"/metrics: {fetched.error}")
                poll.all_missing("auth required: set api_key_env")
            else:
                poll.worse(_failure_state(fetched), f"/metrics: {fetched.error}")
                poll.all_missing(f"/metrics failed: {fetched.failure}")
            return
        try:
            page = decode(fetched.body)
            check_whole(page)  # a cut page is a failed poll, not a page with fewer samples
            metrics, missing, exposition = parse_metrics(page, spec, self.page)
        except ParseError as exc:
            poll.worse(EngineState.DEGRADED, f"/metrics: {exc}")
            poll.all_missing("/metrics body could not be parsed")
            return
        poll.answered(fetched, "/metrics")
        poll.sampled = fetched.sampled_monotonic
        if exposition.bad_lines:
            poll.worse(
                EngineState.DEGRADED,
                f"/metrics: {exposition.bad_lines} line(s) could not be parsed and "
                f"were dropped (first: {exposition.first_bad!r})",
            )
        if metrics.series == 0:
            hint = "the engine runs with --disable-log-stats" if kind is EngineKind.VLLM else METRICS_HINT[kind]
            poll.worse(EngineState.DEGRADED, f"/metrics has no {spec.prefix}* series ({hint})")
            poll.all_missing(f"no {spec.prefix}* series in /metrics")
            return
        if kind is EngineKind.LLAMACPP:
            metrics, missing = _llamacpp_cache_queries(metrics, missing)
        poll.metrics = metrics
        poll.missing.update(missing)
        start = metrics.get("process_start_time")
        if start is not None:
            poll.restart_marker = f"{start:.3f}"
        header = fetched.headers.get("process-start-time-unix")
        if header:
            poll.restart_marker = header

    def _read_models(self, poll: _Poll, fetched: Fetched) -> None:
        if not fetched.ok:
            state = EngineState.AUTH_FAILED if fetched.failure is Failure.AUTH else EngineState.DEGRADED
            poll.worse(state, f"/v1/models: {fetched.error}")
            return
        try:
            poll.models = jsonparse.parse_models(fetched.body)
            self.models = poll.models
            poll.answered(fetched, "/v1/models")
        except ParseError as exc:
            poll.worse(EngineState.DEGRADED, str(exc))

    def _read_slots(self, poll: _Poll, fetched: Fetched) -> None:
        if not fetched.ok:
            if fetched.failure is not Failure.NOT_FOUND:
                poll.errors.append(f"/slots: {fetched.error}")
            poll.missing.setdefault("kv_cache_usage", "llama.cpp has no KV metric and /slots is unavailable")
            return
        try:
            poll.slots = jsonparse.parse_slots(fetched.body)
        except ParseError as exc:
            poll.worse(EngineState.DEGRADED, str(exc))
            return
        poll.answered(fetched, "/slots")
        fill = poll.slots.kv_fill
        if poll.metrics is not None and fill is not None and poll.metrics.get("kv_cache_usage") is None:
            _set_value(poll, "kv_cache_usage", fill)
            poll.missing.pop("kv_cache_usage", None)
            poll.extra["kv_cache_usage_source"] = "estimated from /slots (tokens held / slot context)"

    def _live_generation(self, poll: _Poll) -> None:
        """llama.cpp counts a request's generated tokens when it ends; the requests in progress are added
        from /slots (collect.engines.live_generation)."""
        counted = poll.metrics.get("generation_tokens_total") if poll.metrics is not None else None
        if counted is None:
            return
        decoding = poll.slots.decoded if poll.slots is not None else None
        live = self.generation.count(counted, decoding or 0, poll.restart_marker)
        _set_value(poll, "generation_tokens_total", live)
        if decoding:
            poll.extra["generation_tokens_source"] = (
                "llamacpp:tokens_predicted_total and the requests in progress (/slots n_decoded)"
            )

    def _read_version(self, path: str, fetched: Fetched) -> None:
        try:
            if path == "/props":
                self.version = jsonparse.parse_props_build(fetched.body)
            else:
                self.version = jsonparse.parse_version(fetched.body)
        except ParseError:
            pass

    # -- Ollama -------------------------------------------------------------------------------------
    async def _poll_ollama(self, poll: _Poll) -> None:
        paths = ["/api/ps", "/api/tags"] + (["/api/version"] if self.version is None else [])
        got = await self._gather(paths, self._headers(poll))
        ps = got["/api/ps"]
        if not ps.ok:
            poll.worse(_failure_state(ps), f"/api/ps: {ps.error}")
        else:
            try:
                poll.ollama = jsonparse.parse_ollama_ps(ps.body)
                poll.answered(ps, "/api/ps")
            except ParseError as exc:
                poll.worse(EngineState.DEGRADED, str(exc))
        tags = got["/api/tags"]
        if tags.ok:
            try:
                poll.models = jsonparse.parse_ollama_tags(tags.body)
                poll.answered(tags, "/api/tags")
            except ParseError as exc:
                poll.worse(EngineState.DEGRADED, str(exc))
        else:
            poll.worse(_failure_state(tags), f"/api/tags: {tags.error}")
        if "/api/version" in got and got["/api/version"].ok:
            self._read_version("/api/version", got["/api/version"])
        offloaded = [m.name for m in poll.ollama if m.partial_offload]
        if offloaded:
            poll.extra["partial_offload"] = offloaded
        poll.all_missing("Ollama has no metrics endpoint")

    # -- LiteLLM ------------------------------------------------------------------------------------
    async def _poll_litellm(self, poll: _Poll) -> None:
        headers = self._headers(poll)
        paths = ["/health/liveliness", "/health/readiness", "/v1/models", litellm_usage.METRICS_PATH]
        got = await self._gather(paths, headers)
        self._read_gateway_usage(poll, got[litellm_usage.METRICS_PATH])
        live = got["/health/liveliness"]
        if not live.ok:
            poll.worse(_failure_state(live), f"/health/liveliness: {live.error}")
        else:
            try:
                alive = jsonparse.parse_litellm_liveliness(live.body)
                poll.answered(live, "/health/liveliness")
                if not alive:
                    poll.worse(EngineState.DEGRADED, "/health/liveliness did not say it is alive")
            except ParseError as exc:
                poll.worse(EngineState.DEGRADED, str(exc))
        ready = got["/health/readiness"]
        if ready.ok:
            try:
                readiness = jsonparse.parse_litellm_readiness(ready.body)
                poll.extra["readiness"] = readiness
                poll.answered(ready, "/health/readiness")
                if readiness.get("status") != "healthy":
                    poll.worse(EngineState.DEGRADED, f"readiness: {readiness.get('status')}")
            except ParseError as exc:
                poll.worse(EngineState.DEGRADED, str(exc))
        else:
            poll.worse(_failure_state(ready), f"/health/readiness: {ready.error}")
        models = got["/v1/models"]
        if headers or models.ok:
            self._read_models(poll, models)
        else:
            # A proxy with a master key refuses anonymous calls (LiteLLM 1.108 answers 500 or 400 without a DB).
            poll.extra["models_unknown"] = f"set api_key_env to list the gateway's models ({models.error})"
        poll.all_missing("LiteLLM is a gateway: per-engine metrics come from the engines")

    @staticmethod
    def _read_gateway_usage(poll: _Poll, fetched: Fetched) -> None:
        """The gateway's own per-route, per-caller counters (its `prometheus` callback), for the ledger; a
        gateway without them is still a healthy gateway, so a failure here is a reason, not a state."""
        if not fetched.ok:
            if fetched.failure is Failure.NOT_FOUND:
                why = 'no /metrics: add `callbacks: ["prometheus"]` to the proxy\'s litellm_settings'
            elif fetched.failure is Failure.AUTH:
                why = f"/metrics refused ({fetched.error}): set api_key_env to the proxy's master key"
            else:
                why = f"/metrics: {fetched.error}"
            poll.extra["gateway_usage_unknown"] = why
            return
        try:
            poll.extra["gateway_usage"] = litellm_usage.parse_usage(fetched.body)
        except ParseError as exc:
            poll.extra["gateway_usage_unknown"] = f"/metrics: {exc}"

    async def deep_health(self) -> dict[str, Any]:
        """LiteLLM `/health`: makes a real call to every deployment (spends tokens), so only on demand."""
        poll = _Poll()
        headers = self._headers(poll)
        fetched = await fetch(
            self.client,
            self.engine.url + "/health",
            timeout_s=max(self.settings.http_timeout_s, 30.0),
            max_bytes=self.settings.max_body_bytes,
            headers=headers,
        )
        if not fetched.ok and fetched.status != 503:
            return {"error": fetched.error}
        try:
            return jsonparse.parse_litellm_health(fetched.body)
        except ParseError as exc:
            return {"error": str(exc)}

    # -- any OpenAI-compatible server ---------------------------------------------------------------
    async def _poll_openai(self, poll: _Poll) -> None:
        got = await self._gather(["/v1/models"], self._headers(poll))
        fetched = got["/v1/models"]
        if not fetched.ok:
            poll.worse(_failure_state(fetched), f"/v1/models: {fetched.error}")
        else:
            self._read_models(poll, fetched)
        poll.all_missing("a generic OpenAI-compatible server exposes no metrics")


def _llamacpp_cache_queries(metrics: EngineMetrics, missing: dict[str, str]) -> tuple[EngineMetrics, dict[str, str]]:
    """llama.cpp's prompt_tokens_total excludes cached tokens: queries = processed + cached."""
    cached = metrics.get("prefix_cache_hits_total")
    processed = metrics.get("prompt_tokens_total")
    if cached is None or processed is None:
        return metrics, missing
    values = dict(metrics.values)
    values["prefix_cache_queries_total"] = cached + processed
    missing = {k: v for k, v in missing.items() if k != "prefix_cache_queries_total"}
    return EngineMetrics(
        MappingProxyType(values), metrics.histograms, metrics.ranks, metrics.model_names, metrics.series
    ), missing
