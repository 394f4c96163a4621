"""The pager's side as the console reads it (issue 37): the watcher's notifications' state file beside the
history store, its one name (`state_path`, used by the watcher and the console alike) and schema, read
read-only (`mode=ro`) into a PagerView, and the operator's local silences written into it.

The state file holds one row per alert (rule, target) with what each receiver was told and when, one row
per receiver (`receivers`: its kind and shown label, never a token or a URL's secret part; its last good send
and its last failure in words), and the silences (`silences`). A state file written before the receivers and
silences tables has none: it reads as receivers known only by their hash, and no silence."""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from poolconsole.model.notify import Alert, Silence, silenced_by

SCHEMA = """
CREATE TABLE IF NOT EXISTS alerts (
    rule TEXT NOT NULL, target TEXT NOT NULL, labels TEXT NOT NULL, message TEXT NOT NULL,
    starts_at REAL NOT NULL, ends_at REAL, cleared TEXT, sent TEXT NOT NULL, resolved_sent TEXT NOT NULL,
    PRIMARY KEY (rule, target));
CREATE TABLE IF NOT EXISTS remediation_actions (
    engine TEXT NOT NULL, at REAL NOT NULL, action TEXT NOT NULL, rule TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS receivers (
    id TEXT PRIMARY KEY, kind TEXT NOT NULL, shown TEXT NOT NULL, last_ok_at REAL, failed_at REAL,
    error TEXT, streak INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS silences (
    id TEXT PRIMARY KEY, matchers TEXT NOT NULL, starts_at REAL NOT NULL, ends_at REAL NOT NULL,
    created_by TEXT NOT NULL, comment TEXT NOT NULL, place TEXT NOT NULL);
"""

ABSENT = "no watcher has paged from this store"
"""What the alert log says when there is no state file beside the history store."""


def state_path(store: Path) -> Path:
    """The notifications' state beside the history store: history.sqlite3 -> history.notify.sqlite3."""
    return store.with_name(f"{store.stem}.notify.sqlite3")


@dataclass(frozen=True)
class ReceiverState:
    """One receiver as the state file keeps it: no token, no URL secret (`shown` is Receiver.shown)."""

    id: str
    kind: str
    shown: str
    last_ok_at: float | None
    failed_at: float | None
    error: str | None
    streak: int

    @property
    def failing(self) -> bool:
        """Its last send failed (no good send since)."""
        return self.failed_at is not None and (self.last_ok_at is None or self.failed_at > self.last_ok_at)


def hms(at: float) -> str:
    return dt.datetime.fromtimestamp(at, dt.UTC).strftime("%H:%M:%S")


@dataclass(frozen=True)
class PagerView:
    """What the watcher sent, to whom, when, what failed, and the silences; times in UTC."""

    path: Path
    alerts: dict[tuple[str, str], Alert] = field(default_factory=dict)
    receivers: dict[str, ReceiverState] = field(default_factory=dict)
    silences: tuple[Silence, ...] = ()

    def shown(self, receiver_id: str) -> str:
        known = self.receivers.get(receiver_id)
        return known.shown if known is not None else f"receiver {receiver_id}"

    def lines(self, rule: str, target: str, now: float) -> list[str]:
        """The pager's side of one alert: where it was sent and when, a failing receiver it waits for, its
        silence."""
        out: list[str] = []
        alert = self.alerts.get((rule, target))
        labels = alert.labels if alert is not None else {}
        if alert is not None:
            out += [f"sent to {self.shown(r)} at {hms(at)}" for r, at in sorted(alert.sent.items(), key=lambda i: i[1])]
            out += [f"resolve sent to {self.shown(r)}" for r in sorted(alert.resolved_sent)]
            for receiver in self.receivers.values():
                pending = receiver.id not in (alert.sent if alert.firing else alert.resolved_sent)
                if pending and receiver.failing and receiver.failed_at is not None:
                    out.append(
                        f"failed to reach {receiver.shown} at {hms(receiver.failed_at)}: {receiver.error or 'failed'}"
                        f" ({receiver.streak} attempt(s) in a row; retrying)"
                    )
            if not out:
                out.append("not sent yet" if alert.firing else "cleared; no receiver was told")
        silence = silenced_by(labels, self.silences, now) if labels else self._silence_of(rule, target, now)
        if silence is not None:
            out.append(f"silenced until {hms(silence.ends_at)} by {silence.created_by} ({silence.place})")
        return out

    def _silence_of(self, rule: str, target: str, now: float) -> Silence | None:
        """An alert the watcher does not hold: a silence naming its rule and target."""
        found = [
            s
            for s in self.silences
            if s.active(now)
            and s.matchers.get("alertname") in (rule, rule.split("_gpu")[0])
            and target in (s.matchers.get("engine"), s.matchers.get("host"), s.matchers.get("target"))
        ]
        return max(found, key=lambda s: s.ends_at) if found else None

    def failures(self) -> list[str]:
        """Each receiver's last failure, in words."""
        out = []
        for r in self.receivers.values():
            if r.failed_at is None:
                continue
            since = "" if r.failing else f"; delivered since, at {hms(r.last_ok_at or 0.0)}"
            out.append(f"{r.shown}: last failure at {hms(r.failed_at)}: {r.error or 'failed'}{since}")
        return out


def _tables(db: sqlite3.Connection) -> set[str]:
    return {str(row[0]) for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def read_pager(store: Path) -> PagerView | None:
    """The state file beside `store`, read-only; None when there is none (no watcher has paged from this
    store). Raises sqlite3.Error for a file that is not a usable one. Blocking: call it in a thread."""
    path = state_path(store)
    if not path.exists():
        return None
    db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=5)
    try:
        tables = _tables(db)
        alerts: dict[tuple[str, str], Alert] = {}
        if "alerts" in tables:
            rows = db.execute(
                "SELECT rule, target, labels, message, starts_at, ends_at, cleared, sent, resolved_sent FROM alerts"
            )
            for rule, target, labels, message, starts, ends, cleared, sent, resolved in rows:
                alert = Alert(rule, target, json.loads(labels), message, starts, ends, cleared, json.loads(sent),
                              set(json.loads(resolved)))  # fmt: skip
                alerts[alert.key] = alert
        receivers: dict[str, ReceiverState] = {}
        if "receivers" in tables:
            for row in db.execute("SELECT id, kind, shown, last_ok_at, failed_at, error, streak FROM receivers"):
                receivers[str(row[0])] = ReceiverState(*row)
        silences: tuple[Silence, ...] = ()
        if "silences" in tables:
            silences = tuple(load_silences(db))
        return PagerView(path, alerts, receivers, silences)
    finally:
        db.close()


def load_silences(db: sqlite3.Connection, since: float | None = None) -> Iterable[Silence]:
    """The silences of a state file (those ending after `since`), oldest first."""
    query = "SELECT id, matchers, starts_at, ends_at, created_by, comment, place FROM silences"
    rows = (
        db.execute(query + " WHERE ends_at > ? ORDER BY starts_at", (since,))
        if since is not None
        else db.execute(query + " ORDER BY starts_at")
    )
    for sid, matchers, starts, ends, by, comment, place in rows:
        yield Silence(str(sid), json.loads(matchers), float(starts), float(ends), str(by), str(comment), str(place))


def new_silence(
    matchers: dict[str, str], starts_at: float, ends_at: float, created_by: str, comment: str, place: str = "local"
) -> Silence:
    return Silence(uuid.uuid4().hex[:16], dict(matchers), starts_at, ends_at, created_by, comment, place)


def add_silence(store: Path, silence: Silence) -> Path:
    """Writes a silence into the state file beside `store` (created if no watcher made it yet; a running
    watcher reads it within a few seconds). Silences ended over a day ago are dropped. Blocking."""
    path = state_path(store)
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path, timeout=10)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.executescript(SCHEMA)
        with db:
            db.execute("DELETE FROM silences WHERE ends_at < ?", (silence.starts_at - 86400.0,))
            db.execute(
                "INSERT OR REPLACE INTO silences VALUES (?, ?, ?, ?, ?, ?, ?)",
                (silence.id, json.dumps(silence.matchers), silence.starts_at, silence.ends_at, silence.created_by,
                 silence.comment, silence.place),
            )  # fmt: skip
    finally:
        db.close()
    return path
