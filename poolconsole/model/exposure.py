"""The exposure audit's findings and each engine's verdict (ops.exposure probes and judges them): what the
security screen and `poolconsole exposure` show."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Finding:
    check: str
    found: str
    fix: str
    exposed: bool
    """True when it makes the pool someone else's free API or leaks callers' data (exit 1); False for what
    is worth knowing but contained (a key-less engine reachable only on loopback or the tailnet; open /slots
    or CORS only on loopback). Where the engine listens unknown is never contained."""

    def to_json(self) -> dict[str, Any]:
        return {"check": self.check, "found": self.found, "fix": self.fix, "exposed": self.exposed}


@dataclass(frozen=True)
class EngineExposure:
    name: str
    kind: str
    url: str
    unauthenticated: bool | None
    listen: tuple[str, ...] | None
    findings: tuple[Finding, ...]
    unchecked: tuple[str, ...] = ()
    """Checks that could not run, in words."""

    @property
    def exposed(self) -> bool:
        return any(f.exposed for f in self.findings)

    @property
    def verdict(self) -> str:
        """In one word, as the exposure screen and the CLI's text say it."""
        if self.exposed:
            return "EXPOSED"
        if self.findings:
            return "contained"  # worth knowing, reachable only on loopback, the tailnet or the LAN
        return "ok" if self.unauthenticated is False else "not checked"

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "url": self.url,
            "unauthenticated": self.unauthenticated,
            "listen": list(self.listen) if self.listen is not None else None,
            "exposed": self.exposed,
            "findings": [f.to_json() for f in self.findings],
            "unchecked": list(self.unchecked),
        }
