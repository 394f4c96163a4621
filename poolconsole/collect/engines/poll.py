"""One poll of one engine: concurrent GETs of its endpoints, parsed into an EngineSnapshot.

A collector never raises: refused, timeout, 401/403, 404, 5xx, HTML, garbage, oversized bodies all
become a state and an error in words.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from types import MappingProxyType
from typing import Any

from poolconsole.collect.engines import jsonparse
from poolconsole.collect.engines.kinds import adapter, adapters
from poolconsole.collect.engines.live_generation import LiveGeneration
from poolconsole.collect.engines.mapping import MetricSpec
from poolconsole.collect.engines.page_memo import PageMemo
from poolconsole.collect.engines.scratch import Scratch, failure_state
from poolconsole.collect.http import Failure, Fetched, PollClient, fetch
from poolconsole.collect.prom import ParseError
from poolconsole.config.models import Engine, EngineKind, Settings
from poolconsole.model.snapshots import EngineSnapshot, EngineState

SPEC: dict[EngineKind, MetricSpec] = {a.kind: a.spec for a in adapters() if a.spec is not None}
"""The metric spec of each kind that has one (the Prometheus source reads these)."""


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
        self.adapter = adapter(engine.kind)

    @property
    def shared(self) -> None:
        """Its own endpoints: no batch shared with others (EngineSource)."""
        return None

    async def aclose(self) -> None:
        await self.client.aclose()

    # -- plumbing the kind adapters use --------------------------------------------------------------
    def headers(self, poll: Scratch) -> dict[str, str] | None:
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

    async def gather(self, paths: list[str], headers: dict[str, str] | None) -> dict[str, Fetched]:
        if len(paths) == 1:  # the steady state: no task and gathering future for one GET
            return {paths[0]: await self._get(paths[0], headers)}
        results = await asyncio.gather(*(self._get(p, headers) for p in paths))
        return dict(zip(paths, results, strict=True))

    @staticmethod
    def failed(fetched: Fetched) -> EngineState:
        """The state a failed GET puts the engine in."""
        return failure_state(fetched)

    def read_models(self, poll: Scratch, fetched: Fetched) -> None:
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

    # -- entry point ------------------------------------------------------------------------------
    async def poll(self) -> EngineSnapshot:
        poll = Scratch()
        kind = self.engine.kind
        try:
            await self.adapter.poll(self, poll)
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
            kind=kind,
            url=self.engine.url,
            host=self.engine.host,
            fetched_at=self.clock() - (now - sampled),  # on the injected clock, as of the request
            monotonic=sampled,
            state=poll.state,
            error="; ".join(dict.fromkeys(poll.errors)) or None,
            source="GET " + ", ".join(poll.sources) if poll.sources else "",
            residency_read=poll.residency_read,
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

    async def deep_health(self) -> dict[str, Any]:
        """LiteLLM `/health`: makes a real call to every deployment (spends tokens), so only on demand."""
        poll = Scratch()
        headers = self.headers(poll)
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
