"""Roll one engine to another quantization profile: plan (the fit check on live memory and the engine's own KV
figures, the commands, what its callers get) and run (ops.lifecycle.rollover: drain, write the profile file,
restart, serving, smoke gate, promote; any failure rolls back; audited)."""

from __future__ import annotations

import asyncio

from poolconsole.model.pool_state import PoolState
from poolconsole.ops import audit, lifecycle
from poolconsole.ops.fit import KvCapacity, LiveMemory, Verdict, fit, live_memory
from poolconsole.workflows import drain
from poolconsole.workflows.plan import Plan, PlanLine, Refusal, refused
from poolconsole.workflows.restart import in_flight
from poolconsole.workflows.workspace import Workspace

ACTION = "rollover"
BLOCKED = {
    Verdict.DOES_NOT_FIT: "DOES NOT FIT",
    Verdict.CANNOT_CHECK: "cannot check the fit (GPU memory unknown)",
}


async def active_profile(ws: Workspace, name: str) -> str | None:
    """The profile the engine runs: the last rollover the audit log promoted, else hosts.toml's `profile`."""
    engine = ws.engine(name)
    promoted = await asyncio.to_thread(audit.active_profile, ws.audit_path, name)
    return promoted or (engine.profile if engine is not None else None)


async def measure(
    ws: Workspace, name: str, state: PoolState | None = None
) -> tuple[LiveMemory | None, KvCapacity | None]:
    """What the fit check weighs: the host's memory now (the console's last poll, else one poll of the host)
    and the engine's own KV figures (read now)."""
    from poolconsole.ops.capacity import engine_kv  # httpx: loaded when a rollover is planned
    from poolconsole.ops.planning import poll_hosts

    engine = ws.engine(name)
    if engine is None:
        return None, None
    kv_read = engine_kv(engine, ws.config.settings)
    if state is not None:
        track = state.hosts.get(engine.host or "")
        live = live_memory(track.snapshot, engine, state.age_s(track.last_ok_at)) if track else None
        return live, await kv_read
    polled, kv = await asyncio.gather(poll_hosts(ws.config, {engine.host} if engine.host else set()), kv_read)
    return live_memory(polled.get(engine.host or ""), engine, 0.0), kv


def plan(
    ws: Workspace,
    name: str,
    profile: str,
    *,
    active: str | None,
    live: LiveMemory | None = None,
    kv: KvCapacity | None = None,
    state: PoolState | None = None,
    force: bool = False,
    smoke: bool = True,
    automatic: bool = False,
) -> Plan:
    engine = ws.engine(name)
    if engine is None:
        return refused(ACTION, name, f"no engine named {name} in the config", Refusal.CONFIG)
    if profile not in {p.name for p in engine.profiles}:
        known = ", ".join(p.name for p in engine.profiles) or "none"
        return refused(ACTION, name, f"{engine.name} has no profile {profile!r} (known: {known})", Refusal.CONFIG)
    host = ws.host_of(engine)
    if host is None:
        why = f"engine {engine.name} names no [[hosts]] entry to run commands on"
        return refused(ACTION, name, why, Refusal.CONFIG)
    try:
        new = lifecycle.check_rollover(engine, profile)
        commands = lifecycle.plan_restart(engine)
    except lifecycle.ActionRefused as exc:
        return refused(ACTION, name, str(exc), Refusal.REFUSED)
    if ws.read_only:
        return refused(ACTION, name, "read-only mode", Refusal.REFUSED)
    report = fit(engine, new, host, live, kv, active=profile == active)
    assert engine.control is not None
    gate = "smoke test" if smoke else "no smoke test (--no-smoke)"
    lines: list[PlanLine] = [
        *report.rows(),
        *in_flight(state, engine, drains=True),
        *drain.plan_lines(ws.config, state, engine, waits=not automatic),
        f"host {host.name}:",
        f"  $ (write {engine.control.profile_file} atomically, its values over stdin)",
        *(f"  $ {c}" for c in commands),
        f"then: serving (health, model listed, one token), {gate}, promote; on any failure roll back",
    ]
    if profile == active:
        question = (
            f"Re-apply {profile} to {engine.name}? It is the active profile: its file is written again as "
            "hosts.toml says it now, and the engine restarts"
        )
    else:
        question = f"Switch {engine.name} from {active} to {profile}?"
    blocked = None
    if report.verdict in BLOCKED and not force:
        blocked = f"{profile} {BLOCKED[report.verdict]}: the fit check refuses it (--force proceeds without it)"
        question = f"{engine.name}: {profile} {BLOCKED[report.verdict]}; the console will not switch it " + (
            "(the CLI's --force overrides)"
        )
    return Plan(
        ACTION, engine.name, question, tuple(lines), profile=profile, active=active, live=live, kv=kv,
        force=force, smoke=smoke, blocked=blocked, where=f"{host.name} ({host.address})",
    )  # fmt: skip


async def run(ws: Workspace, plan: Plan, progress: lifecycle.Progress, *, rule: str | None = None) -> lifecycle.Outcome:
    """The planned rollover; ActionRefused where it is refused now (busy, does not fit without --force).
    `rule`: the watcher's remediation runs it by itself for that alert rule (audited as automatic, with it)."""
    engine = ws.engine(plan.engine)
    host = ws.host_of(engine) if engine is not None else None
    if engine is None or host is None or plan.refused is not None or plan.profile is None:
        raise lifecycle.ActionRefused(plan.refused or f"{plan.engine}: no engine, host or profile to roll over")
    from poolconsole.ops.smoke.runner import smoke_gate  # the openai SDK: imported when a rollover runs

    ctx = lifecycle.ActionContext(
        ws.config, ws.connection(host), ws.audit_path, progress, ws.read_only, automatic=rule is not None, rule=rule
    )
    gate = smoke_gate(ws.config, engine.name) if plan.smoke else None
    drained = await drain.before(ws.config, engine, progress, wait=rule is None)
    outcome = await lifecycle.rollover(
        ctx, engine, plan.profile, force=plan.force, smoke=gate, live=plan.live, kv=plan.kv
    )
    drain.after(engine, progress, drained and outcome.outcome == "ok")
    return outcome
