"""Ollama residency actions: unload a model (`keep_alive: 0`) to free its memory, or preload one with a
keep-alive, through Ollama's own `/api/generate` with no prompt (an embedding model, refused there, through
`/api/embed` with no input). Each is confirmed by the caller (the exact
request is `plan_*`), refused in read-only mode, one at a time per engine, verified on `/api/ps` (the model
gone, or resident), and lands in the audit log with its outcome."""

from __future__ import annotations

import asyncio
import json
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from poolconsole.collect.auth import auth_headers
from poolconsole.collect.engines.jsonparse import parse_ollama_ps
from poolconsole.collect.prom import ParseError
from poolconsole.config.models import Engine, EngineKind
from poolconsole.ops import audit
from poolconsole.ops.lifecycle import ActionRefused, Outcome, Progress

VERIFY_S = 15.0
"""How long /api/ps is watched for the change (a large model takes a while to load)."""
KEEP_ALIVE = re.compile(r"^-?(?:\d+|(?:\d+(?:\.\d+)?(?:ns|us|µs|ms|s|m|h))+)$")
_BUSY: set[str] = set()


@dataclass
class OllamaContext:
    audit_path: Path
    progress: Progress = print
    read_only: bool = False
    timeout_s: float = 30.0


def keep_alive_value(text: str) -> str | int:
    """What the request carries for a keep-alive typed by an operator: a bare number is seconds (an int, as
    Ollama's API takes it), else a duration ("10m", "1h30m", "-1m"); negative keeps the model loaded for good.
    ValueError for anything else."""
    text = text.strip()
    if not KEEP_ALIVE.match(text):
        raise ValueError(f"keep-alive {text!r}: give seconds (300, -1) or a duration such as 10m, 1h or 24h")
    return int(text) if re.fullmatch(r"-?\d+", text) else text


def _check(engine: Engine, model: str, read_only: bool, action: str) -> None:
    if read_only:
        raise ActionRefused(f"read-only mode: {action} refused")
    if engine.kind is not EngineKind.OLLAMA:
        raise ActionRefused(f"{engine.name} is not an Ollama instance ({engine.kind})")
    if not model:
        raise ActionRefused("no model given")


def request_body(model: str, keep_alive: str | int) -> dict[str, Any]:
    return {"model": model, "keep_alive": keep_alive, "stream": False}


def plan(engine: Engine, model: str, keep_alive: str | int) -> str:
    """The exact request, as shown before it is confirmed and recorded in the audit log."""
    return f"POST {engine.url}/api/generate {json.dumps(request_body(model, keep_alive))}"


def embed_body(model: str, keep_alive: str | int) -> dict[str, Any]:
    return {"model": model, "keep_alive": keep_alive}


def embed_plan(engine: Engine, model: str, keep_alive: str | int) -> str:
    """The preload of an embedding model, which Ollama refuses on /api/generate ("... does not support
    generate"): an /api/embed with no input loads it with the keep-alive given (an unload works on either)."""
    return f"POST {engine.url}/api/embed {json.dumps(embed_body(model, keep_alive))}"


EMBEDDING_ONLY = "does not support generate"
"""Ollama's 400 for /api/generate on a model without completion (an embedding model)."""


async def unload(ctx: OllamaContext, engine: Engine, model: str) -> Outcome:
    """Unload `model` now: its memory is free once /api/ps no longer lists it."""
    return await _act(ctx, engine, model, 0, "ollama unload")


async def preload(ctx: OllamaContext, engine: Engine, model: str, keep_alive: str) -> Outcome:
    """Load `model` and keep it for `keep_alive` (seconds or a duration; negative: until unloaded)."""
    try:
        value = keep_alive_value(keep_alive)
    except ValueError as exc:
        raise ActionRefused(str(exc)) from None
    return await _act(ctx, engine, model, value, "ollama preload")


async def resident(client: httpx.AsyncClient, engine: Engine) -> set[str] | None:
    """The models /api/ps lists now (None when it does not answer)."""
    try:
        answer = await client.get(engine.url + "/api/ps", headers=auth_headers(engine))
        return {m.name for m in parse_ollama_ps(answer.content)} if answer.status_code == 200 else None
    except (httpx.HTTPError, ParseError):
        return None


async def _act(ctx: OllamaContext, engine: Engine, model: str, keep_alive: str | int, action: str) -> Outcome:
    _check(engine, model, ctx.read_only, action)
    if engine.name in _BUSY:
        raise ActionRefused(f"an action on {engine.name} is already running: refused")
    _BUSY.add(engine.name)
    commands = [plan(engine, model, keep_alive)]
    started = time.monotonic()
    want_gone = keep_alive == 0
    try:
        ctx.progress(f"$ {commands[0]}")
        async with httpx.AsyncClient(timeout=httpx.Timeout(ctx.timeout_s), trust_env=False) as client:

            async def post(path: str, body: dict[str, Any]) -> httpx.Response:
                try:
                    answer = await client.post(engine.url + path, json=body, headers=auth_headers(engine))
                except httpx.HTTPError as exc:
                    raise _Failed(f"{type(exc).__name__}: {exc}") from None
                ctx.progress(f"HTTP {answer.status_code} {answer.text.strip()[:300]}")
                return answer

            answer = await post("/api/generate", request_body(model, keep_alive))
            if answer.status_code == 400 and EMBEDDING_ONLY in answer.text and not want_gone:
                commands.append(embed_plan(engine, model, keep_alive))
                ctx.progress(f"an embedding model: loaded through /api/embed instead\n$ {commands[-1]}")
                answer = await post("/api/embed", embed_body(model, keep_alive))
            text = answer.text.strip()
            if answer.status_code != 200:
                raise _Failed(f"HTTP {answer.status_code}: {text[:200]}")
            deadline = time.monotonic() + VERIFY_S
            while True:
                names = await resident(client, engine)
                if names is not None and (model not in names if want_gone else model in names):
                    break
                if time.monotonic() > deadline:
                    state = "still listed" if want_gone else "not listed"
                    raise _Failed(f"/api/ps: {model} {state} after {VERIFY_S:g} s")
                await asyncio.sleep(0.5)
        detail = f"{model} unloaded: /api/ps no longer lists it" if want_gone else (
            f"{model} loaded, keep-alive {keep_alive}: /api/ps lists it"
        )  # fmt: skip
        outcome = Outcome(action, engine.name, "ok", detail, commands, time.monotonic() - started)
    except _Failed as exc:
        outcome = Outcome(action, engine.name, "failed", str(exc), commands, time.monotonic() - started)
    except asyncio.CancelledError:  # the console quit (asked first) while it ran: audited at once, as it stood
        seconds = time.monotonic() - started
        detail = (
            f"stopped after {seconds:.0f} s (the console quit, or the command was interrupted): the request was "
            f"sent; whether /api/ps {'still lists' if want_gone else 'lists'} {model} was not seen"
        )
        audit.record(ctx.audit_path, action, engine.name, commands, "abandoned", detail, seconds)
        raise
    finally:
        _BUSY.discard(engine.name)
    ctx.progress(f"{action} {model}: {outcome.outcome} ({outcome.detail})")
    await asyncio.to_thread(
        audit.record, ctx.audit_path, action, engine.name, outcome.commands, outcome.outcome, outcome.detail,
        outcome.seconds,
    )  # fmt: skip
    return outcome


class _Failed(Exception):
    pass
