"""The stores the actions write and the commands read: whether the audit log can take a write before an action
runs, and the smoke runs (where they are by default, whether one can take a run before its checks run for
minutes, reading them back). Reading the audit log is workflows.audit_log's.

Their errors are the askers' to say, so they are named here: StoreUnusable (a store's file cannot be opened,
created or written, or is not one of ours; ops.sqlite) and AuditUnreadable (the audit log cannot be read;
ops.audit). A command reaches them through this module, never through ops/ (issue 36)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from poolconsole.ops import audit
from poolconsole.ops.audit import AuditUnreadable
from poolconsole.ops.smoke import runs as smoke_runs
from poolconsole.ops.sqlite import StoreUnusable, require

__all__ = [
    "AuditUnreadable",
    "NoSuchRun",
    "RunComparison",
    "StoreUnusable",
    "compare_stored",
    "default_runs_path",
    "require_audit_writable",
    "require_runs_existing",
    "require_runs_writable",
    "stored_runs",
]


def require_audit_writable(path: Path) -> None:
    """StoreUnusable now, naming `path`, where an action could not be audited there (it is then not run)."""
    require(path, "an audit log", audit.SCHEMA)


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


class NoSuchRun(Exception):
    """Runs asked for by id that the store does not hold (a usage problem)."""

    def __init__(self, missing: list[int]) -> None:
        super().__init__(", ".join(str(i) for i in missing))
        self.missing = missing


@dataclass(frozen=True)
class RunComparison:
    a: dict[str, Any]
    b: dict[str, Any]
    diff: dict[str, Any]
    """What differs: conditions, results, and where the engine disagrees with hosts.toml (`runs --compare
    --json` prints it)."""


def compare_stored(path: Path, a: int, b: int) -> RunComparison:
    """Runs `a` and `b` of the store at `path` and what differs between them; NoSuchRun naming those it lacks."""
    found = [smoke_runs.get_run(path, run_id) for run_id in (a, b)]
    missing = [i for i, run in zip((a, b), found, strict=True) if run is None]
    first, second = found
    if missing or first is None or second is None:
        raise NoSuchRun(missing)
    return RunComparison(first, second, smoke_runs.compare_runs(first, second))
