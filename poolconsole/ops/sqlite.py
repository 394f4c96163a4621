"""The one way the console opens its SQLite files (audit log, smoke runs): WAL, synchronous writes."""

from __future__ import annotations

import sqlite3
from pathlib import Path


def open_db(path: Path, schema: str) -> sqlite3.Connection:
    """The database at `path` (created with its folder), the `schema` script applied (idempotent)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path, timeout=10)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.executescript(schema)
    return db
