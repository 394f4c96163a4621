"""The gateway's view of the pool: each gateway model mapped to the engine and host serving it, drift
in both directions, and degrade hints when an engine queues."""

from __future__ import annotations

from dataclasses import dataclass

from poolconsole.config.models import EngineKind
from poolconsole.model.pool_state import PoolState
from poolconsole.model.snapshots import EngineState


@dataclass(frozen=True)
class Route:
    gateway: str
    model: str
    engine: str | None
    host: str | None
    engine_state: EngineState | None
    """None: the engine is not polled yet (or not in the pool)."""
    unlisted: tuple[str, ...] = ()
    """With no engine: the answering engines that list no models (llama.cpp read through Prometheus has no
    /v1/models), any of which may serve this route. Not drift: which engine serves it is unknown."""


@dataclass(frozen=True)
class GatewayReport:
    gateway: str
    state: EngineState | None
    """None: not polled yet."""
    liveness: str
    readiness: str
    routes: tuple[Route, ...]
    unrouted: tuple[tuple[str, str], ...]
    """(engine, model) served by an engine but routed by no gateway."""
    hints: tuple[str, ...]
    deep_health: str | None = None
    """LiteLLM's deep /health in words, when `litellm_health_interval_s` has it probed."""


def deep_health_text(state: PoolState, gateway: str) -> str | None:
    found = state.deep_health.get(gateway)
    if found is None:
        return None
    at, result = found
    age = f"{max(0.0, state.clock() - at):.0f} s ago"
    if "error" in result:
        return f"deep /health ({age}): {result['error']}"
    bad = [f"{e['model']} ({e['error'] or 'unhealthy'})" for e in result.get("unhealthy", [])]
    text = f"deep /health ({age}): {len(result.get('healthy', []))} healthy, {len(bad)} unhealthy"
    return text + (": " + "; ".join(bad[:4]) if bad else "")


def gateway_reports(state: PoolState) -> list[GatewayReport]:
    if not any(t.config.kind is EngineKind.LITELLM for t in state.engines.values()):
        return []  # no gateway: nothing to report (and at 1,000 engines, no walk over them all twice a refresh)
    served: dict[str, tuple[str, str | None]] = {}
    unlisted: list[str] = []
    for track in state.engines.values():
        if track.config.kind is EngineKind.LITELLM or track.view is None:
            continue
        if not track.view.models and track.view.state.answering:
            unlisted.append(track.config.name)
        for model in track.view.models:
            served.setdefault(model, (track.config.name, track.config.host))
    hints = tuple(degrade_hints(state))
    reports: list[GatewayReport] = []
    routed: set[str] = set()
    for track in state.engines.values():
        if track.config.kind is not EngineKind.LITELLM:
            continue
        v = track.view
        routes = []
        for model in v.models if v else []:
            routed.add(model)
            engine, host = served.get(model, (None, None))
            engine_state = state.engines[engine].view.state if engine and state.engines[engine].view else None  # type: ignore[union-attr]
            maybe = tuple(unlisted) if engine is None else ()
            routes.append(Route(track.config.name, model, engine, host, engine_state, maybe))
        readiness = v.details.get("readiness", {}) if v else {}
        reports.append(
            GatewayReport(
                track.config.name,
                v.state if v else None,
                "alive" if v and v.state.answering else (v.error or "unknown") if v else "polling",
                str(readiness.get("status", "unknown")) if isinstance(readiness, dict) else "unknown",
                tuple(routes),
                (),
                hints,
            )
        )
    unrouted = tuple((engine, model) for model, (engine, _) in served.items() if model not in routed)
    return [
        GatewayReport(
            r.gateway,
            r.state,
            r.liveness,
            r.readiness,
            r.routes,
            unrouted if reports else (),
            r.hints,
            deep_health_text(state, r.gateway),
        )
        for r in reports
    ]


def degrade_hints(state: PoolState) -> list[str]:
    """When an engine's queue passes the threshold, say where non-critical traffic could go."""
    out = []
    for track in state.engines.values():
        v = track.view
        if v is None or v.requests_waiting is None or v.requests_waiting < state.config.alerts.waiting:
            continue
        target = track.config.degrade_to
        if target is None:
            out.append(
                f"{track.config.name}: {v.requests_waiting:.0f} waiting; set degrade_to in hosts.toml to name "
                "a smaller model for non-critical traffic"
            )
            continue
        other = state.engines[target].view
        models = ", ".join(other.models) if other and other.models else target
        load = f"({other.requests_waiting:.0f} waiting there)" if other and other.requests_waiting is not None else ""
        out.append(
            f"{track.config.name}: {v.requests_waiting:.0f} waiting: send non-critical traffic to {models} "
            f"on {target} {load}".rstrip()
        )
    return out


def names(items: list[str], shown: int = 3) -> str:
    """ "a, b, c and 4 more": a list in a line, however long the pool's (at 1,000 engines dozens serve one
    model)."""
    if len(items) <= shown + 1:
        return ", ".join(items)
    return f"{', '.join(items[:shown])} and {len(items) - shown} more"


def restart_effect(state: PoolState, engine: str) -> list[str]:
    """What taking `engine` down (a restart, a rollover's switch) does to the gateways' callers, in words for
    the confirmation: for each model a gateway routes that the engine serves, whether another engine in the
    pool answers for it too (the gateway's list of deployments is not read, so "too" says where callers can
    go, not that they will); for a gateway itself, every model it routes."""
    track = state.engines.get(engine)
    if track is None:
        return []
    view = track.view
    if track.config.kind is EngineKind.LITELLM:
        routed = names(list(view.models)) if view else ""
        return [
            f"{engine} is a gateway: its callers get errors until it answers again" + (f" ({routed})" if routed else "")
        ]
    models = set(view.models) if view and view.models else {track.config.model} - {None}
    out: list[str] = []
    for gateway in state.engines.values():
        if gateway.config.kind is not EngineKind.LITELLM or gateway.view is None or not gateway.view.state.answering:
            continue
        for model in gateway.view.models:
            if model not in models:
                continue
            others = [
                t.config.name
                for t in state.engines.values()
                if t is not track
                and t.config.kind is not EngineKind.LITELLM
                and t.view is not None
                and t.view.state.answering
                and model in t.view.models
            ]
            name = gateway.config.name
            if others:
                verb = "serves" if len(others) == 1 else "serve"
                out.append(f"gateway {name} routes {model}: {names(others)} {verb} it too (if {name} lists them)")
            else:
                out.append(
                    f"gateway {name} routes {model}: no other engine in the pool serves it, so its callers get "
                    f"errors until {engine} is back"
                )
    return out
