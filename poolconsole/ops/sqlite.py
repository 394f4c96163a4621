"""The one way the console opens its SQLite files (audit log, smoke runs): WAL, synchronous writes, and
every failure as one sentence naming the file."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class StoreUnusable(Exception):
    """A store's file cannot be opened, created or written, or is not one of ours: a directory, a file that is
    not SQLite, a folder that cannot be created, a read-only place. The message names the file."""


def open_db(path: Path, schema: str) -> sqlite3.Connection:
    """The database at `path` (created with its folder), the `schema` script applied (idempotent)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path, timeout=10)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        db.executescript(schema)
    except BaseException:
        db.close()
        raise
    return db


def unusable(path: Path, what: str, exc: Exception) -> StoreUnusable:
    """The sentence for a failure of `what` ("the smoke-run store") at `path`."""
    if path.is_dir():
        return StoreUnusable(f"{path} is a directory, not {what}")
    blocking = next((p for p in path.parents if p.exists() and not p.is_dir()), None)
    if blocking is not None:
        return StoreUnusable(f"cannot create {what} at {path}: {blocking} is a file, not a folder")
    if isinstance(exc, sqlite3.DatabaseError) and "not a database" in str(exc):
        return StoreUnusable(f"{path} is not {what} (not a SQLite file)")
    if isinstance(exc, OSError):
        return StoreUnusable(f"cannot open {what} {path}: {exc.strerror or exc}")
    return StoreUnusable(f"cannot use {what} {path}: {exc}")


@contextmanager
def transaction(path: Path, schema: str, what: str) -> Iterator[sqlite3.Connection]:
    """One transaction on the database at `path`, closed afterwards; any SQLite or file-system failure becomes
    StoreUnusable naming the file and `what` it should have been."""
    try:
        db = open_db(path, schema)
        try:
            with db:  # commits, or rolls back on an exception
                yield db
        finally:
            db.close()
    except (sqlite3.DatabaseError, OSError) as exc:
        raise unusable(path, what, exc) from None


def require(path: Path, what: str, schema: str) -> None:
    """Fails now, with the sentence, where `path` could not take a write: before work whose result would be
    lost (a smoke run's checks run for minutes before they are stored). A file there is opened (it must be
    ours); where there is none, nothing is created: the nearest folder that exists must be one we can write."""
    if path.exists():
        with transaction(path, schema, what):
            return
    ancestor = next((p for p in path.parents if p.exists()), None)
    if ancestor is None or not ancestor.is_dir():
        raise unusable(path, what, NotADirectoryError(f"{ancestor} is not a folder"))
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise StoreUnusable(f"cannot create {what} at {path}: {ancestor} is not writable")
