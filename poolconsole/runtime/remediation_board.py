"""The remediation's board (issue 38, item 3), in the watcher's notifications' state file beside the history
store (runtime.pager.state_path), in tables of its own: `remediation_pending`, one row per case that waits out
its grace before an automatic action (written by the watcher, deleted when the case acts, clears or gives up),
and `remediation_cancels`, one row per operator's cancellation of such a case (written by the console through
workflows.remediation_cancel; the watcher reads them each tick and drops the case's action).

Several watchers may share one store (two pools, two configs): each row names the watcher that wrote it, each
watcher writes and deletes only its own rows and hears only the cancellations of its own cases. A watcher
killed without its goodbye cannot delete its rows, so a live one refreshes its rows' `beat_at` each BEAT_S; the
console hides rows not refreshed for STALE_S, and any watcher's next write deletes them.

Each open is short: WAL, a few seconds' busy timeout, so the watcher, the notifier and the console never hold
one another up for long. Blocking: call these in a thread."""

from __future__ import annotations

import os
import socket
import sqlite3
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

SCHEMA = """
CREATE TABLE IF NOT EXISTS remediation_pending (
    watcher TEXT NOT NULL, engine TEXT NOT NULL, rule TEXT NOT NULL, action TEXT NOT NULL, due_at REAL NOT NULL,
    left INTEGER NOT NULL, per_hour INTEGER NOT NULL, opened_at REAL NOT NULL, beat_at REAL NOT NULL,
    PRIMARY KEY (watcher, engine));
CREATE TABLE IF NOT EXISTS remediation_cancels (
    watcher TEXT NOT NULL, engine TEXT NOT NULL, rule TEXT NOT NULL, opened_at REAL NOT NULL, at REAL NOT NULL,
    by TEXT NOT NULL, PRIMARY KEY (watcher, engine, rule, opened_at));
"""
TIMEOUT_S = 3.0
"""How long one open waits for another's write (the watcher's tick is a second)."""
KEEP_S = 86400.0
"""Cancellations older than this are dropped (a case lasts minutes)."""
BEAT_S = 5.0
"""How often a watcher refreshes its rows while any waits (its tick is a second)."""
STALE_S = 30.0
"""Rows not refreshed for this long are a dead watcher's: hidden, and deleted by the next write."""


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
    watcher: str = field(default="", compare=False)
    """The watcher whose case it is (its board's id; the ladder leaves it empty, the board fills it in). Not
    compared: the ladder's rows and the board's are the same rows."""

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
    watcher: str = ""
    """The watcher whose case it is: only that one hears it ("": every watcher, each of which drops it unless
    the case is its own)."""


def _open(path: Path, *, read_only: bool = False) -> sqlite3.Connection:
    if read_only:
        return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=TIMEOUT_S)
    path.parent.mkdir(parents=True, exist_ok=True)
    # the watcher's one connection is used from asyncio.to_thread's threads, one call at a time
    db = sqlite3.connect(path, timeout=TIMEOUT_S, check_same_thread=False)
    db.execute("PRAGMA journal_mode=WAL")
    if not _has_tables(db):
        # a board written before watchers had ids (or none yet): its rows are minutes long, so replaced, not kept
        db.executescript("DROP TABLE IF EXISTS remediation_pending; DROP TABLE IF EXISTS remediation_cancels;")
    db.executescript(SCHEMA)
    return db


def _has_tables(db: sqlite3.Connection) -> bool:
    """Both tables are there, with the watcher's id."""
    return all(
        "watcher" in {str(r[1]) for r in db.execute(f"PRAGMA table_info({table})")}
        for table in ("remediation_pending", "remediation_cancels")
    )


def watcher_id() -> str:
    """host/pid/random: two watchers in one process (tests) differ too."""
    return f"{socket.gethostname()}/{os.getpid()}/{uuid.uuid4().hex[:8]}"


class Board:
    """The watcher's side: one connection kept while it runs (it writes only when its rows change, and each
    BEAT_S while any waits)."""

    def __init__(self, path: Path, watcher: str | None = None) -> None:
        self.path = path
        self.watcher = watcher or watcher_id()
        self.shown: list[Pending] | None = None
        """The rows last written (None: none yet)."""
        self._beat_at = 0.0
        self._db = _open(path)

    def changes(self, rows: Sequence[Pending], now: float) -> bool:
        """Whether show(rows, now) writes: the rows changed, or they wait and are due a refresh."""
        return list(rows) != self.shown or (bool(rows) and now - self._beat_at >= BEAT_S)

    def show(self, rows: Sequence[Pending], now: float | None = None) -> None:
        """This watcher's rows are exactly `rows` (its others acted, cleared, gave up or were cancelled); the
        other watchers' rows stay, but those not refreshed for STALE_S (a dead watcher's) are deleted."""
        now = time.time() if now is None else now
        with self._db:
            self._db.execute(
                "DELETE FROM remediation_pending WHERE watcher = ? OR beat_at < ?", (self.watcher, now - STALE_S)
            )
            self._db.executemany(
                "INSERT OR REPLACE INTO remediation_pending VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (self.watcher, p.engine, p.rule, p.action, p.due_at, p.left, p.per_hour, p.opened_at, now)
                    for p in rows
                ],
            )
        self.shown, self._beat_at = list(rows), now

    def pending(self) -> list[Pending]:
        """This watcher's rows, soonest first."""
        return [p for p in _pending(self._db, 0.0) if p.watcher == self.watcher]

    def cancels(self, since: float) -> list[Cancel]:
        """The cancellations of this watcher's cases (and those naming no watcher) written since `since`, oldest
        first."""
        return _cancels(self._db, since, self.watcher)

    def close(self) -> None:
        self._db.close()


def _pending(db: sqlite3.Connection, fresh_since: float) -> list[Pending]:
    rows = db.execute(
        "SELECT engine, rule, action, due_at, left, per_hour, opened_at, watcher FROM remediation_pending "
        "WHERE beat_at >= ? ORDER BY due_at, watcher",
        (fresh_since,),
    )
    return [
        Pending(str(e), str(r), str(a), float(d), int(n), int(h), float(o), str(w)) for e, r, a, d, n, h, o, w in rows
    ]


def _cancels(db: sqlite3.Connection, since: float, watcher: str) -> list[Cancel]:
    rows = db.execute(
        "SELECT engine, rule, opened_at, at, by, watcher FROM remediation_cancels "
        "WHERE at >= ? AND watcher IN (?, '') ORDER BY at",
        (since, watcher),
    )
    return [Cancel(str(e), str(r), float(o), float(a), str(b), str(w)) for e, r, o, a, b, w in rows]


def read_pending(path: Path, now: float | None = None) -> list[Pending]:
    """The console's side: every live watcher's rows on the board of the state file at `path`, read-only,
    soonest first; [] where there is no file or no board in it yet. Raises sqlite3.Error for a file that is
    not a usable one."""
    if not path.exists():
        return []
    now = time.time() if now is None else now
    db = _open(path, read_only=True)
    try:
        return _pending(db, now - STALE_S) if _has_tables(db) else []
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
                "INSERT OR REPLACE INTO remediation_cancels VALUES (?, ?, ?, ?, ?, ?)",
                (cancel.watcher, cancel.engine, cancel.rule, cancel.opened_at, cancel.at, cancel.by),
            )
    finally:
        db.close()
