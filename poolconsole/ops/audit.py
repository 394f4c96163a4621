"""The audit log: every action (local user, time, target, profiles, exact commands, outcome, duration, and
whether the watcher took it by itself and for which rule) in SQLite with WAL and synchronous=FULL, so an entry
survives a crash once written. A log written before the automatic actions (issue 38) gains their columns when
it is next opened (`ALTER TABLE ... ADD COLUMN`): its entries read as an operator's."""

from __future__ import annotations

import getpass
import json
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from platformdirs import user_data_path

from poolconsole.model.audit import Entry
from poolconsole.ops.control import redact
from poolconsole.ops.sqlite import open_db

SCHEMA = """
CREATE TABLE IF NOT EXISTS actions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at REAL NOT NULL, user TEXT NOT NULL, action TEXT NOT NULL, target TEXT NOT NULL,
    profile_from TEXT, profile_to TEXT, commands TEXT NOT NULL,
    outcome TEXT NOT NULL, detail TEXT NOT NULL, duration_s REAL NOT NULL,
    automatic INTEGER NOT NULL DEFAULT 0, rule TEXT
);
CREATE TABLE IF NOT EXISTS active_profiles (engine TEXT PRIMARY KEY, profile TEXT NOT NULL, at REAL NOT NULL);
"""
ADDED_COLUMNS = (("automatic", "INTEGER NOT NULL DEFAULT 0"), ("rule", "TEXT"))
"""Columns added after the first audit logs were written, each with what an older entry reads as."""


def default_path() -> Path:
    return user_data_path("poolconsole") / "audit.sqlite3"


class AuditUnreadable(Exception):
    """The audit database cannot be opened or is not one (a file that is not SQLite, a directory)."""


@contextmanager
def _connect(path: Path) -> Iterator[sqlite3.Connection]:
    """One transaction on the audit database; any SQLite failure becomes AuditUnreadable naming the file."""
    try:
        db = open_db(path, SCHEMA)
        try:
            _migrate(db)
            with db:  # commits, or rolls back on an exception
                yield db
        finally:
            db.close()
    except sqlite3.DatabaseError as exc:
        raise AuditUnreadable(f"{path}: not a usable audit database ({exc})") from None
    except OSError as exc:
        raise AuditUnreadable(f"{path}: cannot open the audit database ({exc.strerror or exc})") from None


def _migrate(db: sqlite3.Connection) -> None:
    """Adds the columns an older audit log lacks (idempotent: a column there already is left alone)."""
    have = {str(row[1]) for row in db.execute("PRAGMA table_info(actions)")}
    for name, kind in ADDED_COLUMNS:
        if name not in have:
            try:
                db.execute(f"ALTER TABLE actions ADD COLUMN {name} {kind}")
            except sqlite3.OperationalError as exc:  # another process added it meanwhile
                if "duplicate column" not in str(exc):
                    raise


def record(
    path: Path,
    action: str,
    target: str,
    commands: list[str],
    outcome: str,
    detail: str,
    duration_s: float,
    profile_from: str | None = None,
    profile_to: str | None = None,
    secrets: tuple[str, ...] = (),
    *,
    automatic: bool = False,
    rule: str | None = None,
) -> Entry:
    """One entry; `secrets` (a profile's values) are scrubbed from the commands and the detail as well as
    the values of secret-looking assignments: none of them lands on disk. `automatic`: the watcher took it
    by itself, for `rule`."""
    entry = Entry(
        time.time(),
        getpass.getuser(),
        action,
        target,
        profile_from,
        profile_to,
        [redact(c, secrets) for c in commands],
        outcome,
        redact(detail, secrets),
        round(duration_s, 3),
        automatic,
        rule,
    )
    with _connect(path) as db:
        db.execute(
            "INSERT INTO actions (at, user, action, target, profile_from, profile_to, commands, outcome, "
            "detail, duration_s, automatic, rule) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                entry.at,
                entry.user,
                action,
                target,
                profile_from,
                profile_to,
                json.dumps(entry.commands),
                outcome,
                entry.detail,
                entry.duration_s,
                int(automatic),
                rule,
            ),
        )
    return entry


def set_active_profile(path: Path, engine: str, profile: str) -> None:
    with _connect(path) as db:
        db.execute("INSERT OR REPLACE INTO active_profiles VALUES (?, ?, ?)", (engine, profile, time.time()))


def active_profiles(path: Path) -> dict[str, str]:
    """Every engine's profile as its last promoted rollover left it (one read; {} without an audit log)."""
    if not path.exists():
        return {}
    with _connect(path) as db:
        return {
            str(engine): str(profile) for engine, profile in db.execute("SELECT engine, profile FROM active_profiles")
        }


def active_profile(path: Path, engine: str) -> str | None:
    if not path.exists():
        return None
    with _connect(path) as db:
        row = db.execute("SELECT profile FROM active_profiles WHERE engine = ?", (engine,)).fetchone()
    return str(row[0]) if row else None


def entries(path: Path, limit: int = 100) -> list[Entry]:
    if not path.exists():
        return []
    with _connect(path) as db:
        rows = db.execute(
            "SELECT at, user, action, target, profile_from, profile_to, commands, outcome, detail, "
            "duration_s, automatic, rule FROM actions ORDER BY id DESC LIMIT ?",
            (limit,),
        ).fetchall()
    return [
        Entry(r[0], r[1], r[2], r[3], r[4], r[5], json.loads(r[6]), r[7], r[8], r[9], bool(r[10]), r[11]) for r in rows
    ]


def previous_profile(path: Path, engine: str) -> str | None:
    """The profile an automatic rollback goes back to: the one the engine ran before the last rollover the
    audit log promoted (that rollover's `profile_from`); None without such a rollover."""
    if not path.exists():
        return None
    with _connect(path) as db:
        row = db.execute(
            "SELECT profile_from FROM actions WHERE action = 'rollover' AND target = ? AND outcome = 'ok' "
            "AND profile_from IS NOT NULL AND profile_from != profile_to ORDER BY id DESC LIMIT 1",
            (engine,),
        ).fetchone()
    return str(row[0]) if row else None
