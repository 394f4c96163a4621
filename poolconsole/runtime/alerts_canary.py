"""The canary (issue 37): a one-token completion sent by the watcher to an engine that has been idle for
`[alerts] canary_interval_s`, which must answer within `canary_timeout_s`. It catches what the counters
cannot: an idle engine shows no requests and no progress whether it serves or is wedged, and `stalled` only
sees a wedge once a request is stuck in it.

- Off by default. Only vLLM, SGLang and llama.cpp engines, the self-hosted ones: an Ollama probe would load a
  model that was let go, and a gateway (LiteLLM) or an `openai` endpoint may bill an upstream.
- A busy engine is never probed: one with requests running or waiting, or whose generation or prompt counter
  moved, starts its idle time again. The probe itself moves the counters, so an idle engine is probed once per
  interval.
- Cost per probe: a one-word prompt (about 2 prompt tokens) and 1 generated token (an embedding model: one
  embedding of one word). At most 86400 / canary_interval_s probes per engine a day.
- The outcome is an alert event of the rules (`Alerts.canary`), told to the pool's event log and the
  notifier like any other; a probe runs as its own task under the timeout, never inside a poll."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

import httpx

from poolconsole.collect.auth import auth_headers
from poolconsole.collect.engines.kinds import adapters
from poolconsole.config.models import Engine
from poolconsole.model.alerts import AlertEvent
from poolconsole.model.snapshots import EngineState
from poolconsole.model.view import EngineView
from poolconsole.runtime.live import LivePool, Update
from poolconsole.runtime.notifier import Notifier, NotifyState

PROBED = frozenset(a.kind for a in adapters() if a.canary)
"""The kinds the canary probes: those whose adapter says a probe costs nothing upstream (vLLM, SGLang, llama.cpp)."""
PROMPT = "Hi"


def cost(interval_s: float, timeout_s: float) -> str:
    """What the canary costs, in the words the watcher's start line and the docs use."""
    per_day = 86400 / interval_s
    return (
        f"canary: one 1-token completion (about 2 prompt + 1 generated tokens) to each vLLM, SGLang or llama.cpp "
        f"engine idle for {interval_s:g} s, at most {per_day:.0f} a day per engine; it must answer within "
        f"{timeout_s:g} s"
    )


def is_embedding(engine: Engine, model: str) -> bool:
    chosen = engine.smoke.embedding_models
    return model in chosen if chosen is not None else "embed" in model.lower()


async def probe(client: httpx.AsyncClient, engine: Engine, model: str, timeout_s: float) -> str | None:
    """One completion of one token (an embedding for an embedding model): None when it answered, else what
    went wrong in words (never a key)."""
    body: dict[str, Any]
    if is_embedding(engine, model):
        url, body = engine.url + "/v1/embeddings", {"model": model, "input": PROMPT}
    else:
        url = engine.url + "/v1/completions"
        body = {"model": model, "prompt": PROMPT, "max_tokens": 1, "temperature": 0}
    try:
        async with asyncio.timeout(timeout_s):
            answer = await client.post(url, json=body, headers=auth_headers(engine), timeout=timeout_s)
    except TimeoutError:
        return f"no answer within {timeout_s:g} s (POST {url})"
    except httpx.TimeoutException:
        return f"no answer within {timeout_s:g} s (POST {url})"
    except (httpx.HTTPError, httpx.InvalidURL, OSError, ValueError) as exc:  # in words, never a traceback
        return f"POST {url}: {type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}".rstrip(": ")
    if answer.status_code != 200:
        text = " ".join(answer.text.split())[:160]
        return f"POST {url}: HTTP {answer.status_code}" + (f": {text}" if text else "")
    try:
        doc = answer.json()
    except ValueError:
        return f"POST {url}: an answer that is not JSON"
    if not isinstance(doc, dict) or not (doc.get("choices") or doc.get("data")):
        return f"POST {url}: the answer holds no completion"
    return None


class Canary:
    """The watcher's companion: hears each engine poll, probes the engines idle for the interval."""

    def __init__(self, pool: LivePool, tell: Callable[[Update], None]) -> None:
        settings = pool.config.alerts
        assert settings.canary_interval_s is not None
        self.pool = pool
        self.tell = tell
        self.interval_s = settings.canary_interval_s
        self.timeout_s = settings.canary_timeout_s
        self.engines = {e.name: e for e in pool.config.engines if e.kind in PROBED}
        self.counters: dict[str, tuple[float | None, float | None]] = {}
        """engine -> its generation and prompt counters at the last poll."""
        self.idle_since: dict[str, float] = {}
        """engine -> since when it has been idle (nothing running or waiting, its counters still)."""
        self.probed_at: dict[str, float] = {}
        self.probes = 0
        self._running: dict[str, asyncio.Task[None]] = {}
        self._client: httpx.AsyncClient | None = None
        self._unsubscribe: Callable[[], None] | None = None

    async def start(self) -> None:
        self._client = httpx.AsyncClient(trust_env=False)
        self._unsubscribe = self.pool.subscribe(self.heard)

    async def stop(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
        for task in list(self._running.values()):
            task.cancel()
        for task in list(self._running.values()):
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._client is not None:
            await self._client.aclose()

    def heard(self, update: Update) -> None:
        if update.kind != "engine" or update.target not in self.engines:
            return
        track = self.pool.state.engines.get(update.target)
        if track is None or track.view is None:
            return
        model = self.due(track.view, self.pool.state.clock())
        if model is not None and update.target not in self._running:
            task = asyncio.get_running_loop().create_task(self._probe(self.engines[update.target], model))
            self._running[update.target] = task

    def due(self, view: EngineView, now: float) -> str | None:
        """The model to probe when the engine has been idle for the interval and was not probed within it;
        None otherwise. A busy engine, or counters that moved, start its idle time again (and clear a canary
        alert: it generated)."""
        name = view.name
        counters = (view.generation_tokens_total, view.prompt_tokens_total)
        before = self.counters.get(name)
        self.counters[name] = counters
        moved = before is not None and before != counters
        if moved and name not in self._running:
            self._told(self.pool.alerts.canary_progress(name, now))
        running, waiting = view.requests_running, view.requests_waiting
        busy = running is None or waiting is None or running + waiting > 0
        if view.state != EngineState.OK or busy or counters[0] is None:
            self.idle_since.pop(name, None)
            return None
        if moved or name not in self.idle_since:
            self.idle_since[name] = now
        last = self.probed_at.get(name)
        if now - self.idle_since[name] < self.interval_s or (last is not None and now - last < self.interval_s):
            return None
        return view.models[0] if view.models else None

    async def _probe(self, engine: Engine, model: str) -> None:
        try:
            assert self._client is not None
            self.probed_at[engine.name] = self.pool.state.clock()
            self.probes += 1
            failed = await probe(self._client, engine, model, self.timeout_s)
            now = self.pool.state.clock()
            self.probed_at[engine.name] = now
            self._told(self.pool.alerts.canary(engine.name, failed, now))
        finally:
            self._running.pop(engine.name, None)

    def _told(self, event: AlertEvent | None) -> None:
        if event is not None:
            self.tell(Update(event.target, "engine", (event,)))


def canary(pool: LivePool, _notifier: Notifier, _state: NotifyState | None) -> Canary:
    """The watcher's companion (runtime.watch's Companions): its events reach the pool's subscribers (the
    event log, the notifier, the remediation) as a poll's do, through the pool's one way to tell them."""
    return Canary(pool, pool._tell)
