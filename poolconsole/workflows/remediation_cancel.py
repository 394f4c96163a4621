"""Cancel an automatic action the watcher is about to take (issue 38, item 3): plan -> confirmation -> run.

The watcher writes each case that waits out its grace before a restart or a rollback to the board in its state
file beside the history store (runtime.remediation_board); the console shows it as "auto-restart of X in 40 s
(2 of 3 left this hour)". Cancelling writes a cancellation row naming the case (engine, rule, when it opened);
the watcher reads it within a tick, drops the action, announces "auto-restart of X cancelled by an operator",
and only notifies until the condition clears. Audited as action "cancel_remediation", target "ENGINE/RULE"."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from poolconsole.ops import audit
from poolconsole.runtime.pager import state_path
from poolconsole.runtime.remediation_board import Cancel, Pending, add_cancel, read_pending

ACTION = "cancel_remediation"
"""The audit log's action name."""


@dataclass(frozen=True)
class CancelPlan:
    pending: Pending
    state: Path
    by: str
    question: str
    lines: tuple[str, ...]

    @property
    def audit_target(self) -> str:
        return f"{self.pending.engine}/{self.pending.rule}"


@dataclass(frozen=True)
class CancelOutcome:
    ok: bool
    detail: str


def pending(store: Path) -> list[Pending]:
    """The automatic actions the watcher on `store` is about to take, soonest first. Blocking; raises
    sqlite3.Error for a state file that is not a usable one."""
    return read_pending(state_path(store))


def plan(store: Path, row: Pending, by: str, now: float) -> CancelPlan:
    """What cancelling `row` does, in words."""
    path = state_path(store)
    lines = (
        f"The watcher's {row.action} of {row.engine} ({row.rule}, {row.when(now)}) is "
        "dropped: it only notifies about this case until it clears; a later case is acted on as usual.",
        f"A cancellation is written to {path}; the watcher reads it within a second and announces it.",
        f"If the action has started by then, it runs to its end. Audited as: {ACTION} {row.engine}/{row.rule}.",
    )
    question = f"Cancel the automatic {row.action} of {row.engine}?"
    return CancelPlan(row, path, by, question, lines)


async def run(plan: CancelPlan, audit_path: Path) -> CancelOutcome:
    """Writes the cancellation and audits it. Never raises for a file that fails: the outcome says it."""
    started = time.monotonic()
    row = plan.pending
    cancel = Cancel(row.engine, row.rule, row.opened_at, time.time(), plan.by, row.watcher)
    try:
        await asyncio.to_thread(add_cancel, plan.state, cancel)
        ok, detail = True, f"auto-{row.action} of {row.engine} cancelled by {plan.by} (written to {plan.state})"
    except (OSError, sqlite3.Error) as exc:
        ok, detail = False, f"cannot write {plan.state}: {exc}"
    try:
        await asyncio.to_thread(
            audit.record, audit_path, ACTION, plan.audit_target, [], "ok" if ok else "failed", detail,
            time.monotonic() - started,
        )  # fmt: skip
    except audit.AuditUnreadable as exc:
        return CancelOutcome(False, f"{detail}; not audited: {exc}")
    return CancelOutcome(ok, detail)
