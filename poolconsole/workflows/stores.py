"""The stores the actions write and the commands read: where the audit log and the smoke runs are by default,
whether one can take a write before work whose result would be lost, and reading them back.

Their errors are the askers' to say, so they are named here: StoreUnusable (a store's file cannot be opened,
created or written, or is not one of ours; ops.sqlite) and AuditUnreadable (the audit log cannot be read;
ops.audit). A command reaches them through this module, never through ops/ (issue 36)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from poolconsole.ops import audit
from poolconsole.ops.audit import AuditUnreadable, Entry
from poolconsole.ops.smoke import store as smoke_runs
from poolconsole.ops.sqlite import StoreUnusable, require

__all__ = [
    "AuditUnreadable",
    "Entry",
    "StoreUnusable",
    "active_profile",
    "audit_entries",
    "default_audit_path",
    "default_runs_path",
    "require_audit_writable",
    "require_runs_existing",
    "require_runs_writable",
]


def default_audit_path() -> Path:
    """The user's audit log (the user data directory's)."""
    return audit.default_path()


def require_audit_writable(path: Path) -> None:
    """StoreUnusable now, naming `path`, where an action could not be audited there (it is then not run)."""
    require(path, "an audit log", audit.SCHEMA)


def audit_entries(path: Path, limit: int, *, named: bool = False) -> list[Entry]:
    """The newest `limit` entries of the audit log at `path`. `named`: the path was typed on the command line,
    so a missing file is a typo (StoreUnusable), not an empty log."""
    if named and not path.exists():
        raise StoreUnusable(f"no audit log at {path}")
    return audit.entries(path, limit)


def active_profile(path: Path, engine: str) -> str | None:
    """The profile the audit log's last promotion left `engine` on, if any."""
    return audit.active_profile(path, engine)


def default_runs_path() -> Path:
    """The user's smoke-run store (the user data directory's)."""
    return smoke_runs.default_db()


def require_runs_writable(path: Path) -> None:
    """StoreUnusable now where a smoke run could not be stored at `path`, before its checks run for minutes."""
    smoke_runs.require_writable(path)


def require_runs_existing(path: Path) -> None:
    """A store named on the command line must be there to be read: a missing one is a typo, not 'no runs'."""
    smoke_runs.require_existing(path)


def stored_runs(path: Path, target: str | None = None) -> list[dict[str, Any]]:
    """The stored smoke runs with the conditions they were measured on, newest first (`target`: only the runs
    that measured it)."""
    return smoke_runs.list_runs(path, target)


def stored_run(path: Path, run_id: int) -> dict[str, Any] | None:
    return smoke_runs.get_run(path, run_id)


def compare_runs(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """What differs between two stored runs: conditions, results, and where the engine disagrees with hosts.toml."""
    return smoke_runs.compare_runs(a, b)


def figure_words(figure: str, value: float | bool | None) -> str:
    """A stored figure in the console's words and units (ms, tok/s)."""
    return smoke_runs.figure_words(figure, value)
