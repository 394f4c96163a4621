"""A Plan: what an action would do, in lines a confirmation shows and a command prints, or why it is refused."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from poolconsole.ops.fit import KvCapacity, LiveMemory
from poolconsole.ops.lifecycle import ActionRefused, Outcome

# A run's outcome and its refusal at run time (busy, read-only, no control) are the askers' to say: named here,
# so that a command reaches them without importing ops/ (issue 36).
__all__ = ["ActionRefused", "Outcome", "Plan", "PlanLine", "Refusal", "refused"]

PlanLine = str | tuple[str, ...]
"""A line, or a row of whole fields (a number stays with its unit) that a narrow dialog wraps between."""


class Refusal(StrEnum):
    """Why a plan cannot run: the command's exit code follows from it (2 for CONFIG, 1 for REFUSED)."""

    CONFIG = "config"
    """The config does not allow it: no such engine, profile or host (a usage problem)."""
    REFUSED = "refused"
    """The action refuses: no control, read-only, does not fit (nothing ran)."""


@dataclass(frozen=True)
class Plan:
    action: str
    """"restart" | "rollover": the audit's action name."""
    engine: str
    question: str
    """The confirmation's title: "Restart qwen3-30b-a3b?"."""
    lines: tuple[PlanLine, ...] = ()
    where: str = ""
    """The host it runs on, with its address: "tp4 (tp4-3090.example.ts.net)"."""
    refused: str | None = None
    """Why it cannot run, in words; None when it can."""
    refusal: Refusal | None = None
    profile: str | None = None
    """A rollover's target profile."""
    active: str | None = None
    """The profile the engine runs now (a rollover's from)."""
    live: LiveMemory | None = None
    kv: KvCapacity | None = None
    force: bool = False
    smoke: bool = True
    """A rollover's smoke gate (off with --no-smoke)."""
    model: str | None = None
    """An Ollama action's model."""
    keep_alive: str | None = None
    """An Ollama preload's keep-alive, as the operator chose it ("30m", "-1")."""
    blocked: str | None = None
    """Runnable, but the action will refuse it (a rollover that does not fit, without --force): the console
    shows it without a way to run it; a command runs it, so that the refusal is audited."""

    @property
    def runnable(self) -> bool:
        return self.refused is None

    @property
    def title(self) -> str:
        """The progress screen's title: "rollover qwen3-next-80b -> awq-tp4 (re-apply)"."""
        if self.model is not None:
            verb = self.action.removeprefix("ollama ")
            return f"{verb} {self.model} on {self.engine}"
        if self.profile is None:
            return f"{self.action} {self.engine}"
        again = " (re-apply)" if self.profile == self.active else ""
        return f"{self.action} {self.engine} -> {self.profile}{again}"

    def text(self) -> list[str]:
        """The lines as a command prints them: each row's fields joined."""
        return [line if isinstance(line, str) else " ".join(line) for line in self.lines]


def refused(action: str, engine: str, why: str, refusal: Refusal) -> Plan:
    return Plan(action, engine, f"{action} {engine}: refused", refused=why, refusal=refusal)
