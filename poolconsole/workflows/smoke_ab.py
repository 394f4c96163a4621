"""`smoke ENGINE --workload ... --ab PROFILE`: speculative decoding measured with and without, once for every
asker. plan: the engine, the profile it serves now (the audit log's, else the config's) and the four steps
(measure, roll over, measure, roll back), or why it is refused; run: ops.smoke.ab's guarded rollovers and
measurements, audited; store: both runs kept, linked, and the document `smoke --ab` prints."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from poolconsole.ops import audit, lifecycle
from poolconsole.ops.smoke import ab
from poolconsole.ops.smoke.runner import SmokeOptions
from poolconsole.ops.sqlite import StoreUnusable
from poolconsole.workflows.plan import Plan, PlanLine, Refusal, refused
from poolconsole.workflows.workspace import Workspace

ACTION = "smoke --ab"


def plan(ws: Workspace, options: SmokeOptions, profile: str) -> Plan:
    """The A/B of `options`' one target against `profile`. Refused with CONFIG where it is asked wrongly (not one
    engine with workloads, a profile it cannot switch to), REFUSED in read-only mode."""
    name = options.targets[0] if options.targets else ""
    if len(options.targets) != 1 or not options.workloads or options.context:
        why = "--ab measures one engine's workloads: give one ENGINE and --workload (no --context)"
        return refused(ACTION, name, why, Refusal.CONFIG)
    if ws.read_only:
        return refused(ACTION, name, "read-only mode (--ab switches the engine's profile twice)", Refusal.REFUSED)
    engine = ws.engine(name)
    if engine is None:
        return refused(ACTION, name, f"no engine named {name} in the config", Refusal.CONFIG)
    current = audit.active_profile(ws.audit_path, engine.name) or engine.profile
    try:
        ab.check_ab(ws.config, engine, profile, current)
    except ab.AbRefused as exc:
        return refused(ACTION, name, f"--ab refused: {exc}", Refusal.CONFIG)
    host = ws.host_of(engine)
    assert current is not None and host is not None and engine.control is not None  # check_ab says so
    restart = lifecycle.plan_restart(engine)[0]
    lines: list[PlanLine] = [f"  1. workloads {', '.join(w.name for w in options.workloads)} on {current}"]
    for step, to in ((2, profile), (4, current)):
        lines.append(
            f"  {step}. rollover to {to}: fit check, write {engine.control.profile_file} (profile {to}'s values"
        )
        lines.append(f"     over stdin), $ {restart}, wait until it serves; any failure rolls back")
        if step == 2:
            lines.append(f"  3. the same workloads on {profile}")
    question = f"smoke --ab on {engine.name} ({host.name}, {host.address}): measure, switch, measure, switch back:"
    return Plan(
        ACTION, engine.name, question, tuple(lines), f"{host.name} ({host.address})", profile=profile, active=current
    )


async def run(ws: Workspace, plan: Plan, options: SmokeOptions, progress: Callable[[str], None]) -> ab.AbOutcome:
    """The planned A/B; ActionRefused where a rollover is refused now."""
    engine = ws.engine(plan.engine)
    if engine is None or plan.refused is not None or plan.profile is None or plan.active is None:
        raise lifecycle.ActionRefused(plan.refused or f"{plan.engine}: nothing to measure")
    return await ab.run_ab(ws.config, options, engine, plan.profile, plan.active, ws.audit_path, progress)


@dataclass(frozen=True)
class Stored:
    doc: dict[str, Any]
    """The document `smoke --ab --json` prints (with the store's path, `db`)."""
    store_error: str | None = None
    """Why the runs could not be stored ("results not stored: ..."); the results are still in `doc`."""

    @property
    def passed(self) -> bool:
        return bool(self.doc["passed"])

    def text_lines(self) -> list[str]:
        return ab.text_lines(self.doc)


def store(db: Path, outcome: ab.AbOutcome, command: str) -> Stored:
    """Both runs stored in `db` and linked; a store that fails meanwhile loses nothing said."""
    error = None
    try:
        runs = ab.store_ab(db, outcome, command)
    except (OSError, StoreUnusable) as exc:
        runs = (0, 0)
        error = f"results not stored: {exc}"
    doc = ab.document(outcome, runs)
    doc["db"] = str(db)
    return Stored(doc, error)
