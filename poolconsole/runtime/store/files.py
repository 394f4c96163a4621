"""The history store's file: where it is, its schema, the check that a file is one, and the lock that keeps
one writer per file (a second console on the same store only reads it)."""

from __future__ import annotations

import os
import sqlite3
import sys
from pathlib import Path

from poolconsole.config.models import PoolConfig

if sys.platform != "win32":
    import fcntl
else:  # pragma: no cover - no lock on Windows: one writer is the operator's business there
    fcntl = None

APPLICATION_ID = 0x70636873  # "pchs": a poolconsole history store, as `PRAGMA application_id` says
SCHEMA_VERSION = 1

SCHEMA = f"""
PRAGMA application_id = {APPLICATION_ID};
PRAGMA user_version = {SCHEMA_VERSION};
CREATE TABLE IF NOT EXISTS targets (
    id INTEGER PRIMARY KEY, kind TEXT NOT NULL, name TEXT NOT NULL, UNIQUE (kind, name));
CREATE TABLE IF NOT EXISTS dicts (
    id INTEGER PRIMARY KEY, target INTEGER NOT NULL, data BLOB NOT NULL, last_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS polls (
    at REAL NOT NULL, target INTEGER NOT NULL, dict INTEGER, data BLOB NOT NULL,
    PRIMARY KEY (at, target)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS rollups (
    at REAL NOT NULL, target INTEGER NOT NULL, polls INTEGER NOT NULL, dict INTEGER, data BLOB NOT NULL,
    PRIMARY KEY (at, target)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value) WITHOUT ROWID;
"""
TABLES = frozenset({"targets", "dicts", "polls", "rollups", "meta"})


class StoreProblem(Exception):
    """The store cannot be used: a sentence naming the file."""


class StoreBusy(StoreProblem):
    """Another process writes this store."""


def default_path() -> Path:
    from platformdirs import user_data_path

    return user_data_path("poolconsole") / "history.sqlite3"


def store_path(config: PoolConfig | None, explicit: str | None = None) -> Path:
    """--store, else `[store] path`, else history.sqlite3 in the user data directory."""
    chosen = explicit or (config.store.path if config is not None else None)
    return Path(chosen).expanduser() if chosen else default_path()


def lock_path(path: Path) -> Path:
    return path.with_name(path.name + ".lock")


def take_lock(path: Path) -> int | None:
    """The writer's lock on `path` (its file descriptor, which holds it until closed), else StoreBusy naming
    the process that holds it."""
    if fcntl is None:
        return None
    try:
        fd = os.open(lock_path(path), os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise StoreProblem(f"cannot write the history store {path}: {exc.strerror or exc}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        holder = os.read(fd, 32).decode(errors="replace").strip()
        os.close(fd)
        raise StoreBusy(
            f"{path} is being written by another poolconsole process" + (f" (pid {holder})" if holder else "")
        ) from None
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    return fd


def check_store(db: sqlite3.Connection, path: Path, *, new_ok: bool) -> None:
    """Refuse what is not a history store: another SQLite file (an audit log given by mistake) is left as it is."""
    try:
        app_id = db.execute("PRAGMA application_id").fetchone()[0]
        version = db.execute("PRAGMA user_version").fetchone()[0]
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.DatabaseError as exc:
        raise StoreProblem(f"{path} is not a SQLite file ({exc})") from None
    if app_id == 0 and not tables and new_ok:
        return
    if app_id != APPLICATION_ID or not tables >= TABLES:
        raise StoreProblem(f"{path} is a SQLite file but not a poolconsole history store")
    if version > SCHEMA_VERSION:
        raise StoreProblem(f"{path} was written by a newer poolconsole (store version {version})")
