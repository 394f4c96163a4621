"""Restarts and rollovers behind a LiteLLM gateway: which gateways route the engine's models and who else
answers them, what their callers will see (said in the Plan beforehand), and the drain around the action.

The mechanism, as found on the LiteLLM proxy the tests run (1.108.7, no database):
- its model-management API cannot take one deployment out of routing: `/model/delete`, `/model/new` and
  `/model/update` answer 500 "No DB Connected", `/model/block` and `PATCH /model/{id}/update` 500 "DB not
  connected", `/config/update` 400 "Authentication Error, No DB Connected";
- its config file is read once, at start: a deployment removed from it is still routed 35 s later;
- its router's cooldown cannot be set from outside: requests pinned to one deployment (`model` = its id)
  that time out (408) leave it in routing, even with `allowed_fails: 0`;
- `/health/drain` (off unless `enable_drain_endpoint`) drains the whole proxy worker, not one deployment;
- health-check routing (`background_health_checks` + `enable_health_check_routing`) drops a deployment
  only after its probe has failed, i.e. once the engine is already away.
So the drain waits for the engine's own requests to finish (running + waiting = 0: llama-server does not
exit on SIGTERM while requests run, and the process manager then kills them), acts, and lets the gateway's
retries and fallbacks carry the callers across: the Plan prints the router settings that do (GET
`/router/settings` answers without a database, so the run reads and says what the gateway has now)."""

from __future__ import annotations

import asyncio
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass

from poolconsole.config.models import Engine, EngineKind, PoolConfig
from poolconsole.model.pool_state import PoolState
from poolconsole.workflows.plan import PlanLine

Progress = Callable[[str], None]
MECHANISM = (
    "LiteLLM without its database cannot take one deployment out of routing (/model/delete: 500 No DB "
    "Connected; its config file is read only at start)"
)


@dataclass(frozen=True)
class Cover:
    """One model a gateway routes to the engine, and the engines that can answer it meanwhile."""

    gateway: str
    model: str
    others: tuple[str, ...]
    """Engines in the pool serving the same model (the gateway's other deployments of it)."""
    degrade_to: str | None = None
    """The engine's `degrade_to`, reachable through the gateway's fallbacks."""


@dataclass(frozen=True)
class RouterSettings:
    """What a LiteLLM gateway's router does with a failed request (GET /router/settings)."""

    num_retries: int | None
    fallbacks: tuple[str, ...]
    """The model groups that have fallbacks."""
    allowed_fails: int | None
    cooldown_time: float | None


def _served(config: PoolConfig, state: PoolState | None, engine: Engine) -> set[str]:
    track = state.engines.get(engine.name) if state is not None else None
    if track is not None and track.view is not None and track.view.models:
        return set(track.view.models)
    return {engine.model} if engine.model else set()


def _routed(config: PoolConfig, state: PoolState | None, gateway: Engine) -> set[str] | None:
    """The models the gateway lists (its last poll); None where unknown (a command: no live state)."""
    track = state.engines.get(gateway.name) if state is not None else None
    if track is None or track.view is None:
        return None
    return set(track.view.models)


def covers(config: PoolConfig, state: PoolState | None, engine: Engine) -> list[Cover]:
    """For each gateway that routes (or, without live state, may route) one of the engine's models: who else
    answers it. Empty for a gateway itself and for an engine no gateway stands in front of."""
    if engine.kind is EngineKind.LITELLM:
        return []
    models = _served(config, state, engine)
    out: list[Cover] = []
    for gateway in config.engines:
        if gateway.kind is not EngineKind.LITELLM:
            continue
        routed = _routed(config, state, gateway)
        for model in sorted(models if routed is None else models & routed):
            others = tuple(
                e.name
                for e in config.engines
                if e is not engine and e.kind is not EngineKind.LITELLM and model in _served(config, state, e)
            )
            out.append(Cover(gateway.name, model, others, engine.degrade_to))
    return out


def settings_text(model: str, others: tuple[str, ...], degrade_to: str | None) -> list[str]:
    """The gateway config that carries callers across an engine's absence: retries land on another deployment
    of the model, a failed deployment cools down, and a fallback group answers when retries run out.
    `degrade_to`: the model group to fall back to where no other engine serves `model`."""
    lines = [
        "  router_settings:",
        "    num_retries: 3          # a request cut or refused by the engine is sent again",
        "    allowed_fails: 1        # after 2 failures in a minute the deployment cools down",
        "    cooldown_time: 30       # seconds out of routing: longer than the restart",
    ]
    spare = f"{model}-spare" if others else (degrade_to or "")
    if spare:
        lines += [f"    fallbacks: [{{{model}: [{spare}]}}]"]
        if others:
            lines += [f"  (and a model_list group {spare} with only {others[0]}'s deployment in it)"]
    return lines


def plan_lines(config: PoolConfig, state: PoolState | None, engine: Engine, *, waits: bool = True) -> list[PlanLine]:
    """What the Plan says beforehand about the gateways' callers and the drain; nothing where no gateway
    stands in front of the engine. `waits`: the engine's requests are waited for (an operator's action);
    the watcher's does not wait (a stalled or dead engine's requests never finish: `before(wait=False)`)."""
    found = covers(config, state, engine)
    if not found:
        return []
    lines: list[PlanLine] = []
    for c in found:
        if c.others or c.degrade_to:
            who = ", ".join(c.others) or f"{c.degrade_to} (its degrade_to, through fallbacks)"
            lines.append(
                f"drain: {MECHANISM}; "
                + (f"{engine.name} finishes its requests first, then " if waits else "acting at once, ")
                + f"the gateway {c.gateway}'s "
                f"retries and fallbacks send {c.model}'s callers to {who}: they see no errors where the gateway "
                "has these settings (the run reads and says what it has now):"
            )
            # a fallback names a model group: the degrade_to engine's model, not the engine
            target = next((e.model for e in config.engines if e.name == c.degrade_to and e.model), c.degrade_to)
            lines += settings_text(c.model, c.others, target)
        else:
            lines.append(
                f"drain: gateway {c.gateway} routes {c.model} to {engine.name} alone: its callers get errors until "
                f"it is back (add another deployment of {c.model}, or set degrade_to)"
            )
    return lines


def _field(fields: dict[str, object], name: str) -> int | None:
    value = fields.get(name)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None  # Python's json reads Infinity and NaN: int() of them raises
    return int(value)


def parse_router_settings(body: object) -> RouterSettings | None:
    """GET /router/settings' body: {"fields": [{"field_name", "field_value", ...}]} (LiteLLM 1.108.7)."""
    if not isinstance(body, dict) or not isinstance(body.get("fields"), list):
        return None
    fields = {str(f.get("field_name")): f.get("field_value") for f in body["fields"] if isinstance(f, dict)}
    raw = fields.get("fallbacks")
    groups = tuple(str(k) for item in raw if isinstance(item, dict) for k in item) if isinstance(raw, list) else ()
    cooldown = fields.get("cooldown_time")
    return RouterSettings(
        _field(fields, "num_retries"),
        groups,
        _field(fields, "allowed_fails"),
        float(cooldown) if isinstance(cooldown, int | float) and not isinstance(cooldown, bool) else None,
    )


async def read_router_settings(gateway: Engine, timeout_s: float = 15.0) -> RouterSettings | None:
    """The gateway's router settings now; None where it does not answer them (no key, not LiteLLM). A
    generous timeout: a loaded LiteLLM on two cores took more than 5 s to answer it."""
    import httpx  # loaded when an action runs, not when the console starts

    key = os.environ.get(gateway.api_key_env) if gateway.api_key_env else None
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    try:
        async with httpx.AsyncClient(timeout=timeout_s, trust_env=False) as client:
            reply = await client.get(gateway.url.rstrip("/") + "/router/settings", headers=headers)
        return parse_router_settings(reply.json()) if reply.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return None


def callers_see(cover: Cover, settings: RouterSettings | None) -> str:
    """What the callers of one model will see while the engine is away, from the gateway's settings now."""
    if not cover.others and not cover.degrade_to:
        return f"{cover.model}: no other engine answers it: its callers get errors until the engine is back"
    if settings is None:
        return f"{cover.model}: gateway {cover.gateway}'s router settings unread: whether callers see errors is unknown"
    retries = settings.num_retries or 0
    fallback = cover.model in settings.fallbacks
    if retries == 0 and not fallback:
        return f"{cover.model}: gateway {cover.gateway} neither retries nor falls back: requests that reach it fail"
    how = f"{retries} retries" + (" and a fallback" if fallback else ", no fallback")
    return f"{cover.model}: gateway {cover.gateway} has {how}: its callers' requests go to the other deployments"


async def wait_idle(engine: Engine, config: PoolConfig, progress: Progress, timeout_s: float) -> float:
    """Wait until the engine runs and queues nothing (its own metrics), up to `timeout_s`; seconds waited. An
    engine that does not answer has nothing to drain (a wedged or dead engine is not waited for)."""
    from poolconsole.collect.engines.poll import EnginePoller

    poller = EnginePoller(engine, settings=config.settings)
    started = time.monotonic()
    try:
        while time.monotonic() - started < timeout_s:
            snap = await poller.poll()
            m = snap.metrics
            running = m.get("requests_running") if m else None
            waiting = m.get("requests_waiting") if m else None
            if running is None or waiting is None:
                progress(
                    f"drain: {engine.name} does not say what it runs ({snap.error or 'not exposed'}): not waited for"
                )
                break
            if running + waiting == 0:
                break
            progress(f"drain: {engine.name} has {running + waiting:.0f} requests in flight")
            await asyncio.sleep(0.25)
        else:
            progress(f"drain: timeout after {timeout_s:g} s, acting with requests in flight")
    finally:
        await poller.aclose()
    return time.monotonic() - started


async def before(
    config: PoolConfig, engine: Engine, progress: Progress, state: PoolState | None = None, *, wait: bool = True
) -> bool:
    """The drain before an action: say what each gateway's callers see now, then (`wait`) wait for the
    engine's requests to finish. False where no gateway stands in front of it (nothing done). The watcher's
    remediation does not wait: a stalled engine's requests never finish, and a down one has none."""
    found = covers(config, state, engine)
    if not found:
        return False
    gateways = {e.name: e for e in config.engines}
    read = await asyncio.gather(*(read_router_settings(gateways[c.gateway]) for c in found))
    for cover, settings in zip(found, read, strict=True):
        progress("drain: " + callers_see(cover, settings))
    timeout = engine.control.drain_timeout_s if engine.control is not None else 0.0
    if wait and timeout > 0:
        waited = await wait_idle(engine, config, progress, timeout)
        progress(f"drain: {engine.name} idle after {waited:.1f} s; acting")
    return True


def after(engine: Engine, progress: Progress, drained: bool) -> None:
    """Admitting it again: the gateway routes to the engine as soon as it answers (a deployment that failed
    meanwhile after its cooldown_time); nothing to call."""
    if drained:
        progress(f"drain: {engine.name} serves again; the gateway routes to it again (after any cooldown_time)")
