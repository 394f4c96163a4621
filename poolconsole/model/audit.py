"""One entry of the audit log (ops.audit writes and reads them): what the audit screen, `poolconsole audit` and
the console's action history show."""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Entry:
    at: float
    user: str
    action: str
    target: str
    profile_from: str | None
    profile_to: str | None
    commands: list[str]
    outcome: str
    detail: str
    duration_s: float
    automatic: bool = False
    """Taken by the watcher's remediation (`[remediation]`), not by an operator."""
    rule: str | None = None
    """The alert rule that caused an automatic action (stalled, down, restart_loop)."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def text(self) -> str:
        """As `poolconsole audit` prints it and the audit screen shows the highlighted entry: when, who, what,
        the outcome with its detail (why it failed or was refused), then each command on its own line."""
        when = dt.datetime.fromtimestamp(self.at, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")
        change = f" {self.profile_from} -> {self.profile_to}" if self.profile_to else ""
        auto = f" (automatic: {self.rule or 'a rule'})" if self.automatic else ""
        head = (
            f"{when}Z {self.user} {self.action}{auto} {self.target}{change}: {self.outcome} ({self.duration_s:.1f} s)"
        )
        return "\n".join([f"{head} {self.detail}".rstrip(), *(f"    $ {c}" for c in self.commands)])
