"""The watcher's notifications' state file (runtime.pager's SCHEMA, beside the history store): one row per
alert (rule, target) with what each receiver was told, each receiver's last good send and last failure, the
console's silences, and the remediation's actions spent. Written off the event loop by the notifier."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from poolconsole.model.notify import Alert, Silence
from poolconsole.runtime.pager import SCHEMA, load_silences


class NotifyState:
    """The sibling SQLite file: one row per alert (rule, target) with what each receiver was told."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, timeout=10, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(SCHEMA)

    def load(self) -> list[Alert]:
        rows = self._db.execute(
            "SELECT rule, target, labels, message, starts_at, ends_at, cleared, sent, resolved_sent FROM alerts"
        )
        out = []
        for rule, target, labels, message, starts, ends, cleared, sent, resolved in rows:
            out.append(
                Alert(rule, target, json.loads(labels), message, starts, ends, cleared, json.loads(sent),
                      set(json.loads(resolved)))
            )  # fmt: skip
        return out

    def write(self, rows: Sequence[tuple[Any, ...]], gone: Iterable[tuple[str, str]]) -> None:
        with self._db:
            self._db.executemany("DELETE FROM alerts WHERE rule = ? AND target = ?", list(gone))
            self._db.executemany("INSERT OR REPLACE INTO alerts VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)

    def write_receivers(self, rows: Sequence[tuple[Any, ...]]) -> None:
        """Each receiver's kind, shown label, last good send and last failure (no token, no URL secret)."""
        with self._db:
            self._db.executemany("INSERT OR REPLACE INTO receivers VALUES (?, ?, ?, ?, ?, ?, ?)", rows)

    def silences(self, now: float) -> list[Silence]:
        """The silences not yet ended (the console writes them: runtime.pager.add_silence)."""
        return list(load_silences(self._db, now))

    def spend(self, engine: str, at: float, action: str, rule: str) -> None:
        """One automatic action of the remediation (its budget and cooldown); older than a day are dropped."""
        with self._db:
            self._db.execute("DELETE FROM remediation_actions WHERE at < ?", (at - 86400.0,))
            self._db.execute("INSERT INTO remediation_actions VALUES (?, ?, ?, ?)", (engine, at, action, rule))

    def actions_since(self, since: float) -> list[tuple[str, float]]:
        """(engine, when) of each automatic action since `since`."""
        rows = self._db.execute("SELECT engine, at FROM remediation_actions WHERE at >= ? ORDER BY at", (since,))
        return [(str(engine), float(at)) for engine, at in rows]

    def close(self) -> None:
        self._db.close()


def row_of(alert: Alert) -> tuple[Any, ...]:
    return (
        alert.rule,
        alert.target,
        json.dumps(alert.labels),
        alert.message,
        alert.starts_at,
        alert.ends_at,
        alert.cleared,
        json.dumps(alert.sent),
        json.dumps(sorted(alert.resolved_sent)),
    )
