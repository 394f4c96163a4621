"""One read of an engine's log (collect.engine_logs reads it over SSH): its lines as cut and redacted, the
failure modes they show, or why it could not be read; what the log screen and `poolconsole logs` show."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from poolconsole.model.failure_modes import Finding


@dataclass(frozen=True)
class LogRead:
    engine: str
    host: str
    source: str
    command: str
    lines: tuple[str, ...]
    findings: tuple[Finding, ...]
    truncated: bool = False
    error: str | None = None
    note: str | None = None
    fetched_at: float = field(default_factory=time.time)

    def to_json(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "host": self.host,
            "source": self.source,
            "command": self.command,
            "fetched_at": self.fetched_at,
            "truncated": self.truncated,
            "error": self.error,
            "note": self.note,
            "lines": list(self.lines),
            "findings": [f.to_json() for f in self.findings],
        }
