"""Silence an alert for a chosen time (the console's `silence` action, issue 37): plan -> confirmation -> run.

Where an `alertmanager` receiver is configured, the silence is created in each such Alertmanager through its
API (and recorded in the watcher's state file so the alert log shows it, and the watcher holds the alert back
from its other receivers); else it is a local silence in the watcher's state file beside the history store,
which the watcher honours (runtime.notifier). Either way it is audited: action "silence", target
"TARGET/RULE", the duration and where in the detail."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path

from poolconsole.config.models import Notify, PoolConfig
from poolconsole.model.notify import Silence, labels_for, silence_matchers
from poolconsole.ops import audit
from poolconsole.ops.silence import create_alertmanager_silence, silences_url
from poolconsole.runtime.notifier import shown_url
from poolconsole.runtime.pager import add_silence, hms, new_silence, state_path

DURATIONS: dict[str, float] = {"15m": 900.0, "1h": 3600.0, "4h": 14400.0, "1d": 86400.0}
"""The choices the console offers, in its picker's order."""


@dataclass(frozen=True)
class SilencePlan:
    rule: str
    target: str
    matchers: dict[str, str]
    duration: str
    starts_at: float
    ends_at: float
    created_by: str
    comment: str
    alertmanagers: tuple[Notify, ...]
    state: Path | None
    """The watcher's state file the silence is written to (a local one) or recorded in (Alertmanager's)."""
    question: str
    lines: tuple[str, ...] = ()
    refused: str | None = None

    @property
    def audit_target(self) -> str:
        return f"{self.target}/{self.rule}"


@dataclass(frozen=True)
class SilenceOutcome:
    ok: bool
    detail: str
    silences: tuple[Silence, ...] = field(default=())


def plan(
    config: PoolConfig,
    store: Path | None,
    rule: str,
    target: str,
    duration: str,
    user: str,
    now: float,
    labels: dict[str, str] | None = None,
) -> SilencePlan:
    """What silencing `rule` on `target` for `duration` (a key of DURATIONS) would do, in words."""
    seconds = DURATIONS[duration]
    if labels is None:
        labels = labels_for(rule, target, {e.name: e.host for e in config.engines}, [h.name for h in config.hosts])
    matchers = silence_matchers(labels)
    managers = tuple(n for n in config.notify if n.kind == "alertmanager")
    state = state_path(store) if store is not None else None
    shown = ", ".join(f'{k}="{v}"' for k, v in sorted(matchers.items()))
    until = time.strftime("%Y-%m-%d ", time.gmtime(now + seconds)) + hms(now + seconds)
    comment = f"silenced from poolconsole for {duration}"
    lines = [f"Until {until} UTC ({duration} from now), alerts labelled {shown}."]
    if rule != matchers.get("alertname", rule):
        lines.append(f"The rule is per GPU: the silence covers {matchers['alertname']} on every GPU of {target}.")
    if managers:
        for n in managers:
            lines.append(
                f"Alertmanager {shown_url(n.url)}: POST {shown_url(silences_url(n))} (createdBy {user}, "
                f"comment {comment!r}); Alertmanager mutes it for its receivers."
            )
        if any(n.kind != "alertmanager" for n in config.notify):
            lines.append("The watcher also holds it back from its webhook and ntfy receivers meanwhile.")
        if state is not None:
            lines.append(f"Recorded in {state} so the alert log shows it.")
    elif state is not None:
        lines.append(
            f"A local silence written to {state}: the watcher on this store (`poolconsole watch`) does not send "
            "this alert while it lasts, and sends it when it ends if it still fires. A receiver already told "
            "it fires is still told when it clears."
        )
    lines.append(f"Audited as: silence {target}/{rule}.")
    refused = None
    if not managers and state is None:
        refused = "no history store and no alertmanager receiver: nowhere to keep a silence the watcher would honour"
    question = f"Silence {matchers.get('alertname', rule)} on {target} for {duration}?"
    return SilencePlan(
        rule, target, matchers, duration, now, now + seconds, user, comment, managers, state, question,
        tuple(lines), refused,
    )  # fmt: skip


async def run(plan: SilencePlan, store: Path | None, audit_path: Path) -> SilenceOutcome:
    """Creates the silence(s), records them in the state file, and audits the outcome. Never raises for a
    receiver or a file that fails: the outcome says it."""
    started = time.monotonic()
    made: list[Silence] = []
    problems: list[str] = []
    commands: list[str] = []
    for n in plan.alertmanagers:
        commands.append(f"POST {shown_url(silences_url(n))}")
        draft = new_silence(plan.matchers, plan.starts_at, plan.ends_at, plan.created_by, plan.comment)
        found, error = await create_alertmanager_silence(n, draft)
        if found is None:
            problems.append(f"alertmanager {shown_url(n.url)}: {error}")
            continue
        made.append(Silence(found, draft.matchers, draft.starts_at, draft.ends_at, draft.created_by, draft.comment,
                            f"alertmanager {shown_url(n.url)} id {found}"))  # fmt: skip
    if not plan.alertmanagers:
        made.append(new_silence(plan.matchers, plan.starts_at, plan.ends_at, plan.created_by, plan.comment))
    if store is not None:
        for silence in made:
            try:
                await asyncio.to_thread(add_silence, store, silence)
            except (OSError, sqlite3.Error) as exc:  # a file that cannot be written is data, said in the outcome
                problems.append(f"cannot write {state_path(store)}: {exc}")
                if silence.place == "local":
                    made.remove(silence)
                break
    ok = bool(made) and not problems
    where = "; ".join(s.place for s in made) or "nowhere"
    detail = f"for {plan.duration} until {hms(plan.ends_at)} UTC; {where}" + (
        f"; {'; '.join(problems)}" if problems else ""
    )
    outcome = "ok" if ok else ("partial" if made else "failed")
    try:
        await asyncio.to_thread(
            audit.record, audit_path, "silence", plan.audit_target, commands, outcome, detail,
            time.monotonic() - started,
        )  # fmt: skip
    except audit.AuditUnreadable as exc:
        problems.append(str(exc))
        detail += f"; not audited: {exc}"
        ok = False
    return SilenceOutcome(ok, detail, tuple(made))
