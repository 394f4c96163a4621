"""Any workflow's Plan run by one generic runner, whoever asks (the console's one action worker; the watcher and
the commands may take it too): the plan's action picks its workflow's `run`, and a refusal at run time (busy,
read-only, does not fit) is an outcome like the others instead of an exception the asker must know."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from poolconsole.ops import lifecycle
from poolconsole.workflows import ollama, restart, rollover
from poolconsole.workflows.plan import Plan
from poolconsole.workflows.workspace import Workspace

Progress = lifecycle.Progress
Flow = Callable[[Workspace, Plan, lifecycle.Progress], Awaitable[lifecycle.Outcome]]

FLOWS: dict[str, Flow] = {
    restart.ACTION: restart.run,
    rollover.ACTION: rollover.run,
    ollama.UNLOAD: ollama.run,
    ollama.PRELOAD: ollama.run,
}


@dataclass(frozen=True)
class Ran:
    action: str
    """The audit's action name, as the workflow's outcome gives it."""
    outcome: str
    """ok | failed | rolled back | rollback failed | refused | abandoned (lifecycle.Outcome.outcome)."""
    detail: str
    refused: bool = False
    """Refused when run (nothing ran, and the workflow audited nothing): said on its screen, not toasted."""

    @property
    def ok(self) -> bool:
        return self.outcome == "ok"


async def run(ws: Workspace, plan: Plan, progress: lifecycle.Progress) -> Ran:
    """The plan's workflow run with `progress`."""
    try:
        done = await FLOWS[plan.action](ws, plan, progress)
    except lifecycle.ActionRefused as exc:
        return Ran(plan.action, "refused", str(exc), refused=True)
    return Ran(done.action, done.outcome, done.detail)
