"""The audit log as a view reads it (ops.audit): where it is, its latest entries, and the profile each engine's
last promoted rollover left it on."""

from __future__ import annotations

from pathlib import Path

from poolconsole.model.audit import Entry
from poolconsole.ops import audit
from poolconsole.ops.audit import AuditUnreadable

__all__ = ["AuditUnreadable", "active_profiles", "default_path", "entries"]


def default_path() -> Path:
    return audit.default_path()


def entries(path: Path, limit: int = 100) -> list[Entry]:
    """The latest `limit` entries (in ops.audit's order); AuditUnreadable where the file cannot be read."""
    return audit.entries(path, limit)


def active_profiles(path: Path) -> dict[str, str]:
    return audit.active_profiles(path)
