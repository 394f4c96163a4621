"""Restart one engine: plan (its control's command, what its callers get) and run (ops.lifecycle.restart:
the command over SSH, then "healthy means serving", audited)."""

from __future__ import annotations

from poolconsole.config.models import Engine
from poolconsole.model.gateway import restart_effect
from poolconsole.model.pool_state import PoolState
from poolconsole.ops import lifecycle
from poolconsole.workflows import drain
from poolconsole.workflows.plan import Plan, PlanLine, Refusal, refused
from poolconsole.workflows.workspace import Workspace

ACTION = "restart"


def in_flight(state: PoolState | None, engine: Engine, *, drains: bool) -> list[PlanLine]:
    """What the engine serves now (its last poll) and what the action does with it: its requests in flight,
    and the gateways' callers of the models it serves. Nothing where no live state is at hand (a command)."""
    if state is None:
        return []
    track = state.engines.get(engine.name)
    view = track.view if track is not None else None
    running = view.requests_running if view is not None else None
    waiting = view.requests_waiting if view is not None else None
    words = lifecycle.in_flight_words(engine, running, waiting, drains=drains)
    return [words, *restart_effect(state, engine.name)]


def plan(ws: Workspace, name: str, state: PoolState | None = None, *, automatic: bool = False) -> Plan:
    """`automatic`: the watcher's remediation plans it, and runs it without waiting for the engine's requests."""
    engine = ws.engine(name)
    if engine is None:
        return refused(ACTION, name, f"no engine named {name} in the config", Refusal.CONFIG)
    host = ws.host_of(engine)
    if host is None:
        why = f"engine {engine.name} names no [[hosts]] entry to run commands on"
        return refused(ACTION, name, why, Refusal.CONFIG)
    try:
        commands = lifecycle.plan_restart(engine)
    except lifecycle.ActionRefused as exc:
        return refused(ACTION, name, str(exc), Refusal.REFUSED)
    if ws.read_only:
        return refused(ACTION, name, "read-only mode", Refusal.REFUSED)
    gateway = drain.plan_lines(ws.config, state, engine, waits=not automatic)  # behind a gateway (workflows.drain)
    lines: list[PlanLine] = [
        *in_flight(state, engine, drains=bool(gateway)),
        *gateway,
        f"host {host.name}:",
        *(f"  $ {c}" for c in commands),
        "then wait until the engine answers healthy (time-to-ready is reported)",
    ]
    return Plan(ACTION, engine.name, f"Restart {engine.name}?", tuple(lines), where=f"{host.name} ({host.address})")


async def run(ws: Workspace, plan: Plan, progress: lifecycle.Progress, *, rule: str | None = None) -> lifecycle.Outcome:
    """The planned restart; ActionRefused where it is refused now (busy, read-only, no control). `rule`: the
    watcher's remediation runs it by itself for that alert rule (audited as automatic, with the rule)."""
    engine = ws.engine(plan.engine)
    host = ws.host_of(engine) if engine is not None else None
    if engine is None or host is None or plan.refused is not None:
        raise lifecycle.ActionRefused(plan.refused or f"{plan.engine}: no engine or host to restart")
    ctx = lifecycle.ActionContext(
        ws.config, ws.connection(host), ws.audit_path, progress, ws.read_only, automatic=rule is not None, rule=rule
    )
    drained = await drain.before(ws.config, engine, progress, wait=rule is None)
    outcome = await lifecycle.restart(ctx, engine)
    drain.after(engine, progress, drained and outcome.outcome == "ok")
    return outcome
