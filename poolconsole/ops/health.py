"""After a restart or a rollover: is the engine serving? Healthy means all three, in order:
its health endpoint answers 200, the served model is listed on /v1/models, and a one-token completion
returns. An engine that is loading (503), listing nothing or failing to generate is waited for, until
the timeout; the timeout says how long it waited and what the engine answered last."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from poolconsole.collect.auth import auth_headers
from poolconsole.collect.engines.kinds import adapter
from poolconsole.config.models import Engine
from poolconsole.ops.smoke.stream import failed_request

Progress = Callable[[str], None]

REQUEST_TIMEOUT_S = 30.0
"""One request of the check: a first completion after a load can be slow (graph capture, warm-up)."""


class NotServing(Exception):
    """The engine did not serve within the timeout; the message says what it answered last."""


@dataclass(frozen=True)
class Step:
    """One try: `None` when every step passed, else what failed, in words."""

    failed: str | None
    model: str | None = None


def _answer(response: httpx.Response) -> str:
    text = " ".join(response.text.split())
    return f"HTTP {response.status_code}" + (f": {text[:160]}" if text else "")


def _is_embedding(engine: Engine, model: str) -> bool:
    chosen = engine.smoke.embedding_models
    return model in chosen if chosen is not None else "embed" in model.lower()


async def check_once(client: httpx.AsyncClient, engine: Engine, want_model: str | None = None) -> Step:
    """Health, the model listed, one token generated (an embedding for an embedding model)."""
    base = engine.url
    body: dict[str, object]
    headers = auth_headers(engine)
    path = adapter(engine.kind).health_path
    try:
        health = await client.get(base + path, headers=headers)
        if health.status_code != 200:
            waiting = " (loading)" if health.status_code == 503 else ""
            return Step(f"GET {base}{path}: {_answer(health)}{waiting}")
        models_url = base + "/v1/models"
        listed = await client.get(models_url, headers=headers)
        if listed.status_code != 200:
            return Step(f"GET {models_url}: {_answer(listed)}")
        names = _model_names(listed.json())
        if not names:
            return Step(f"GET {models_url}: no model listed yet")
        if want_model is not None and want_model not in names:
            return Step(f"GET {models_url}: {want_model!r} is not listed (listed: {', '.join(names[:4])})")
        model = want_model or names[0]
        if _is_embedding(engine, model):
            url, body = base + "/v1/embeddings", {"model": model, "input": "ping"}
        else:
            url = base + "/v1/completions"
            body = {"model": model, "prompt": "Hello", "max_tokens": 1, "temperature": 0}
        answer = await client.post(url, json=body, headers=headers)
        if answer.status_code != 200:
            return Step(f"POST {url}: {_answer(answer)}")
        data = answer.json()
        if not isinstance(data, dict) or not (data.get("choices") or data.get("data")):
            return Step(f"POST {url}: the answer holds no completion ({_answer(answer)})")
        return Step(None, model)
    except httpx.HTTPError as exc:
        url = str(exc.request.url) if _has_request(exc) else base
        return Step(failed_request(url, exc, REQUEST_TIMEOUT_S))
    except ValueError as exc:  # a body that is not JSON
        return Step(f"{base}: an answer that is not JSON ({exc})")


def _has_request(exc: httpx.HTTPError) -> bool:
    try:
        exc.request  # noqa: B018 (raises RuntimeError when the error has no request)
    except RuntimeError:
        return False
    return True


def _model_names(doc: Any) -> list[str]:
    entries = doc.get("data") if isinstance(doc, dict) else None
    if not isinstance(entries, list):
        return []
    return [str(e["id"]) for e in entries if isinstance(e, dict) and "id" in e]


async def await_serving(
    engine: Engine,
    timeout_s: float,
    progress: Progress,
    *,
    want_model: str | None = None,
    first_wait_s: float = 1.0,
    every_s: float = 1.0,
) -> float:
    """Seconds until the engine serves (health, model listed, one token), or NotServing at `timeout_s`."""
    started = time.monotonic()
    last = "no answer yet"
    limits = httpx.Timeout(min(REQUEST_TIMEOUT_S, timeout_s))
    async with httpx.AsyncClient(timeout=limits, trust_env=False) as client:
        await asyncio.sleep(first_wait_s)  # let the old process go away before judging the new one
        while True:
            step = await check_once(client, engine, want_model)
            if step.failed is None:
                ready = time.monotonic() - started
                progress(f"{engine.name} serves {step.model}: health 200, model listed, one token generated")
                return ready
            if step.failed != last:
                progress(f"waiting for {engine.name}: {step.failed}")
                last = step.failed
            waited = time.monotonic() - started
            if waited + every_s > timeout_s:
                raise NotServing(
                    f"{engine.name} not serving within its {timeout_s:g} s health timeout (last checked at "
                    f"{waited:.0f} s; the next check would have come after the timeout); last answer: {last}"
                )
            await asyncio.sleep(every_s)
