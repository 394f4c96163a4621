"""The remediation's board (issue 38, item 3), in the watcher's notifications' state file beside the history
store (runtime.pager.state_path), in tables of its own: `remediation_pending`, one row per case that waits out
its grace before an automatic action (written by the watcher, deleted when the case acts, clears or gives up),
and `remediation_cancels`, one row per operator's cancellation of such a case (written by the console through
workflows.remediation_cancel; the watcher reads them each tick and drops the case's action).

Each open is short: WAL, a few seconds' busy timeout, so the watcher, the notifier and the console never hold
one another up for long. Blocking: call these in a thread."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

SCHEMA = """
CREATE TABLE IF NOT EXISTS remediation_pending (
    engine TEXT PRIMARY KEY, rule TEXT NOT NULL, action TEXT NOT NULL, due_at REAL NOT NULL,
    left INTEGER NOT NULL, per_hour INTEGER NOT NULL, opened_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS remediation_cancels (
    engine TEXT NOT NULL, rule TEXT NOT NULL, opened_at REAL NOT NULL, at REAL NOT NULL, by TEXT NOT NULL,
    PRIMARY KEY (engine, rule, opened_at));
"""
TIMEOUT_S = 3.0
"""How long one open waits for another's write (the watcher's tick is a second)."""
KEEP_S = 86400.0
"""Cancellations older than this are dropped (a case lasts minutes)."""


@dataclass(frozen=True)
class Pending:
    """An automatic action the watcher is about to take, unless the condition clears or an operator cancels."""

    engine: str
    rule: str
    action: str
    due_at: float
    left: int
    """Actions left on the engine this hour, before this one."""
    per_hour: int
    opened_at: float
    """When the case opened: with engine and rule, what a cancellation names."""

    def when(self, now: float) -> str:
        """In words: in 40 s (2 of 3 left this hour); due now (...) once its time has come."""
        wait = self.due_at - now
        return f"{f'in {wait:.0f} s' if wait >= 0.5 else 'due now'} ({self.left} of {self.per_hour} left this hour)"

    def words(self, now: float) -> str:
        """The console's line: auto-restart of X in 40 s (2 of 3 left this hour)."""
        return f"auto-{self.action} of {self.engine} {self.when(now)}"


@dataclass(frozen=True)
class Cancel:
    """An operator's cancellation of one case's automatic action."""

    engine: str
    rule: str
    opened_at: float
    at: float
    by: str


def _open(path: Path, *, read_only: bool = False) -> sqlite3.Connection:
    if read_only:
        return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=TIMEOUT_S)
    path.parent.mkdir(parents=True, exist_ok=True)
    # the watcher's one connection is used from asyncio.to_thread's threads, one call at a time
    db = sqlite3.connect(path, timeout=TIMEOUT_S, check_same_thread=False)
    db.execute("PRAGMA journal_mode=WAL")
    db.executescript(SCHEMA)
    return db


def _has_tables(db: sqlite3.Connection) -> bool:
    names = {str(r[0]) for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    return {"remediation_pending", "remediation_cancels"} <= names


class Board:
    """The watcher's side: one connection kept while it runs (it writes only when the board changes)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._db = _open(path)

    def show(self, rows: Iterable[Pending]) -> None:
        """The board is exactly `rows`: the others' rows are deleted (acted, cleared, gave up, cancelled)."""
        with self._db:
            self._db.execute("DELETE FROM remediation_pending")
            self._db.executemany(
                "INSERT OR REPLACE INTO remediation_pending VALUES (?, ?, ?, ?, ?, ?, ?)",
                [(p.engine, p.rule, p.action, p.due_at, p.left, p.per_hour, p.opened_at) for p in rows],
            )

    def pending(self) -> list[Pending]:
        return _pending(self._db)

    def cancels(self, since: float) -> list[Cancel]:
        """The cancellations written since `since`, oldest first."""
        return _cancels(self._db, since)

    def close(self) -> None:
        self._db.close()


def _pending(db: sqlite3.Connection) -> list[Pending]:
    rows = db.execute(
        "SELECT engine, rule, action, due_at, left, per_hour, opened_at FROM remediation_pending ORDER BY due_at"
    )
    return [Pending(str(e), str(r), str(a), float(d), int(n), int(h), float(o)) for e, r, a, d, n, h, o in rows]


def _cancels(db: sqlite3.Connection, since: float) -> list[Cancel]:
    rows = db.execute(
        "SELECT engine, rule, opened_at, at, by FROM remediation_cancels WHERE at >= ? ORDER BY at", (since,)
    )
    return [Cancel(str(e), str(r), float(o), float(a), str(b)) for e, r, o, a, b in rows]


def read_pending(path: Path) -> list[Pending]:
    """The console's side: the board of the state file at `path`, read-only, soonest first; [] where there is
    no file or no board in it yet. Raises sqlite3.Error for a file that is not a usable one."""
    if not path.exists():
        return []
    db = _open(path, read_only=True)
    try:
        return _pending(db) if _has_tables(db) else []
    finally:
        db.close()


def add_cancel(path: Path, cancel: Cancel) -> None:
    """The console's side: writes a cancellation (the watcher reads it within a tick). Raises sqlite3.Error or
    OSError where the file cannot be written."""
    db = _open(path)
    try:
        with db:
            db.execute("DELETE FROM remediation_cancels WHERE at < ?", (cancel.at - KEEP_S,))
            db.execute(
                "INSERT OR REPLACE INTO remediation_cancels VALUES (?, ?, ?, ?, ?)",
                (cancel.engine, cancel.rule, cancel.opened_at, cancel.at, cancel.by),
            )
    finally:
        db.close()
