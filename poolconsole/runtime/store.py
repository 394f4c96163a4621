"""The history store: every applied poll's normalized values (an engine's `status --json` fields plus its
reset-safe running totals, a host's `status --json` fields; never a raw page, never a prompt or generated
text) for every target, in one embedded SQLite file. The runtime's clients write it (the console, `poolconsole
record`) and read it (`poolconsole export`, the console's charts on launch).

Writing: the Recorder calls (on the event loop, once per applied poll) only append the frozen view or
snapshot to an in-memory buffer; a writer thread encodes and commits the buffer once a second, so a
`kill -9` loses at most the polls of the last second. The file is in WAL mode with synchronous=NORMAL: a
committed transaction is in the WAL file (the OS's page cache) before COMMIT returns, so it survives the
death of the process; only an OS crash or power loss can take back the last commits (never corrupt the
file), and it saves an fsync a second (a disk kept awake, flash wear) for telemetry that is not an audit
record. One writer per file (a lock file beside it): a second console on the same store only reads it.

Retention: every poll for `full_resolution_hours` (24 h by default), then one row per target and minute
(gauges and rates averaged over the minute's known values, counters and timestamps the last, per-poll
increases summed, the worst state with its error) for `rollup_days` (90 by default), then deleted.

Rows: JSON of the poll's fields, deflated against a preset dictionary per target (that target's first
payload, kept in the file): the field names, URLs, model and GPU names repeat in every poll and cost
almost nothing. benchmarks/store_bench.py measures it against plain JSON and per-row zlib (README)."""

from __future__ import annotations

import asyncio
import contextlib
import csv
import dataclasses
import datetime as dt
import heapq
import json
import math
import os
import re
import sqlite3
import sys
import threading
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TextIO

from poolconsole.config.models import PoolConfig
from poolconsole.model.hosts import HostSnapshot, HostState
from poolconsole.model.pool_state import HISTORY_POINTS, History, PoolState
from poolconsole.model.series import Ring
from poolconsole.model.view import EngineView

if TYPE_CHECKING:
    from poolconsole.runtime.live import LivePool

if sys.platform != "win32":
    import fcntl
else:  # pragma: no cover - no lock on Windows: one writer is the operator's business there
    fcntl = None

COMMIT_EVERY_S = 1.0
"""The writer commits the buffer this often: what a `kill -9` can lose."""
RETAIN_EVERY_S = 60.0
RETAIN_SLICE = 1000
"""Rows rolled up or deleted per retention step (~50 ms of CPU): a backlog (the polls of a console that
last ran yesterday, now past the full-resolution window) is worked off in slices between the commits, so the
once-a-second commit never waits long and the event loop keeps the GIL most of the time."""
RETAIN_PAUSE_S = 0.25
"""Between two slices of a backlog."""
ROLLUP_S = 60
MAX_PENDING = 200_000
"""Polls buffered while the file cannot be written (a full disk): beyond it the oldest are dropped."""
APPLICATION_ID = 0x70636873  # "pchs": a poolconsole history store, as `PRAGMA application_id` says
SCHEMA_VERSION = 1
DICT_REFRESH_RATIO = 0.35
"""A stored dictionary that deflates a target's first poll of a session to more than this share of its
size no longer matches the target (new GPUs, a new URL): a new one is made from that poll."""

Codec = Literal["dict", "zlib", "json"]
Kind = Literal["engine", "host"]

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


# -- encoding ---------------------------------------------------------------------------------------------
def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def dumps(payload: dict[str, Any]) -> bytes:
    """Compact JSON; a non-finite number (which `status --json` could not print either) is stored as null."""
    try:
        return json.dumps(payload, separators=(",", ":"), allow_nan=False).encode()
    except ValueError:
        return json.dumps(_finite(payload), separators=(",", ":"), allow_nan=False).encode()


def deflate(raw: bytes, zdict: bytes) -> bytes:
    """Raw deflate against a preset dictionary, with the smallest window that holds both (setting up a
    32 KiB window for a 1 KiB row cost more than the compression itself)."""
    wbits = max(9, min(15, (len(zdict) + len(raw)).bit_length()))
    packer = zlib.compressobj(6, zlib.DEFLATED, -wbits, 8, zdict=zdict)
    return packer.compress(raw) + packer.flush()


def inflate(blob: bytes, zdict: bytes) -> bytes:
    unpacker = zlib.decompressobj(-15, zdict=zdict)
    return unpacker.decompress(blob) + unpacker.flush()


def decode(blob: bytes, zdict: bytes | None) -> dict[str, Any]:
    """A stored row's payload: deflated against `zdict`, else plain JSON ('{'), else a zlib stream."""
    if zdict is not None:
        raw = inflate(blob, zdict)
    elif blob[:1] == b"{":
        raw = blob
    else:
        raw = zlib.decompress(blob)
    value = json.loads(raw)
    if not isinstance(value, dict):
        raise ValueError("a stored row is not a JSON object")
    return value


_ENGINE_FIELDS = tuple(f.name for f in dataclasses.fields(EngineView))


def payload(item: EngineView | HostSnapshot, totals: dict[str, float] | None) -> dict[str, Any]:
    """What one poll stores: the `status --json` fields, and for an engine its running totals."""
    doc = item.to_json()
    if isinstance(item, EngineView):
        doc["totals"] = dict(totals or {})
    return doc


def poll_json(item: EngineView | HostSnapshot, totals: dict[str, float] | None) -> bytes:
    """dumps(payload(...)), for an engine without the deep copy: EngineView.to_json is dataclasses.asdict,
    which copies every nested dict and list (72 us of the 114 a poll cost to encode); JSON of the fields as
    they are is the same text. A value that is itself a dataclass (none today) takes the copying path."""
    if isinstance(item, HostSnapshot):
        return dumps(payload(item, None))
    doc = {name: getattr(item, name) for name in _ENGINE_FIELDS}
    doc["totals"] = totals or {}
    try:
        return dumps(doc)
    except TypeError:
        return dumps(payload(item, totals))


# -- rollups ----------------------------------------------------------------------------------------------
_LAST = frozenset(
    {
        "polled_at",
        "last_ok_at",
        "index",
        "pid",
        "rank",
        "ranks",
        "pcie_gen",
        "pcie_width",
        "memory_total_bytes",
        "total_bytes",
        "swap_total_bytes",
        "power_limit_w",
    }
)
"""Numbers that are identities, capacities or timestamps: a rollup keeps the last known (so are counters,
every `*_total`)."""
_SUM = frozenset({"counter_resets", "window_s"})
_SUM_TREES = frozenset({"increase"})
_LAST_TREES = frozenset({"totals", "details", "engine_gpus", "processes", "notes", "models", "unknown"})
_SEVERITY = {"ok": 0, "degraded": 1}


def _merge(values: Sequence[Any], weights: Sequence[int], key: str, mode: str) -> Any:
    last = values[-1]
    if isinstance(last, dict):
        if key in _LAST_TREES:
            return last
        child = "sum" if key in _SUM_TREES else mode
        pairs = [(v, w) for v, w in zip(values, weights, strict=True) if isinstance(v, dict)]
        keys = dict.fromkeys([*last, *(k for v, _ in pairs for k in v)])  # the last poll's order first
        return {k: _merge([v.get(k) for v, _ in pairs], [w for _, w in pairs], k, child) for k in keys}
    if isinstance(last, list):
        same = all(isinstance(v, list) and len(v) == len(last) for v in values)
        if key in _LAST_TREES or not same or not all(isinstance(e, dict) for e in last):
            return last
        return [_merge([v[i] for v in values], weights, "", mode) for i in range(len(last))]
    if isinstance(last, bool) or not isinstance(last, int | float | None):
        return last
    known = [
        (v, w) for v, w in zip(values, weights, strict=True) if isinstance(v, int | float) and not isinstance(v, bool)
    ]
    if not known:
        return None
    if mode == "sum" or key in _SUM:
        return sum(v for v, _ in known)
    if mode == "last" or key in _LAST or key.endswith("_total"):
        return known[-1][0]
    mean = sum(v * w for v, w in known) / sum(w for _, w in known)
    if all(isinstance(v, int) for v, _ in known):
        return round(mean)
    return float(f"{mean:.6g}")  # 6 significant digits: 17 digits of a mean deflate to 3x the bytes


def rollup(weighted: Sequence[tuple[dict[str, Any], int]]) -> dict[str, Any]:
    """One row for several polls of one target (oldest first, each with the number of polls it stands for):
    gauges and rates are the weighted mean of the known values (to 6 significant digits; None when none
    was known), counters, capacities and timestamps the last known, per-poll increases and counter resets
    summed; `state` and `error` are the worst poll's (down beats degraded beats ok), so an outage shows."""
    docs = [d for d, _ in weighted]
    weights = [w for _, w in weighted]
    out: dict[str, Any] = _merge(docs, weights, "", "mean")
    worst = max(range(len(docs)), key=lambda i: (_SEVERITY.get(str(docs[i].get("state")), 2), i))
    out["state"], out["error"] = docs[worst].get("state"), docs[worst].get("error")
    if "unknown" in out:  # why a field is null, for the fields the rollup left null
        reasons: dict[str, Any] = {}
        for doc in docs:
            reasons.update(doc.get("unknown") or {})
        out["unknown"] = {k: v for k, v in reasons.items() if out.get(k) is None}
    return out


# -- the writer -------------------------------------------------------------------------------------------
def _lock_path(path: Path) -> Path:
    return path.with_name(path.name + ".lock")


def _take_lock(path: Path) -> int | None:
    if fcntl is None:
        return None
    try:
        fd = os.open(_lock_path(path), os.O_RDWR | os.O_CREAT, 0o644)
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


def _check_store(db: sqlite3.Connection, path: Path, *, new_ok: bool) -> None:
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


@dataclass
class _Dict:
    id: int
    data: bytes
    checked: bool = False


class HeldPolls:
    """A Recorder that holds the polls applied while the store opens (off the event loop: opening can wait
    on the disk, recovering the write-ahead log of a console that was killed), each with its engine's running
    totals as they were then, and gives them to the store in order once it is open."""

    def __init__(self, state: PoolState) -> None:
        self.state = state
        self.polls: list[tuple[Kind, EngineView | HostSnapshot, dict[str, float] | None, float]] = []

    def engine(self, view: EngineView, at: float) -> None:
        track = self.state.engines.get(view.name)
        self._hold(("engine", view, dict(track.totals) if track is not None else None, at))

    def host(self, snapshot: HostSnapshot, at: float) -> None:
        self._hold(("host", snapshot, None, at))

    def _hold(self, poll: tuple[Kind, EngineView | HostSnapshot, dict[str, float] | None, float]) -> None:
        self.polls.append(poll)
        if len(self.polls) > MAX_PENDING:  # a disk that never answers: the oldest go, as the store's own
            del self.polls[: len(self.polls) - MAX_PENDING]

    def hand_over(self, store: Store) -> None:
        for poll in self.polls:
            store.add(*poll)
        self.polls.clear()


class Store:
    """The writer (the LivePool's Recorder). `engine`/`host` only buffer; the writer thread commits every
    `commit_every_s`. With background=False nothing runs by itself: the owner calls flush() and retain()
    (benchmarks, tests)."""

    def __init__(
        self,
        path: Path,
        *,
        full_resolution_hours: float = 24.0,
        rollup_days: float = 90.0,
        clock: Callable[[], float] = time.time,
        codec: Codec = "dict",
        commit_every_s: float = COMMIT_EVERY_S,
        background: bool = True,
        on_problem: Callable[[str], None] | None = None,
    ) -> None:
        self.path = path
        self.full_resolution_s = full_resolution_hours * 3600
        self.rollup_s = rollup_days * 86400
        self.clock = clock
        self.codec: Codec = codec
        self.commit_every_s = commit_every_s
        self.on_problem = on_problem
        self.polls_written = 0
        self.dropped = 0
        self.problem: str | None = None
        """The writer's last failure in words, None while it writes."""
        if path.is_dir():
            raise StoreProblem(f"{path} is a directory, not a history store")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            blocking = next((p for p in path.parents if p.exists() and not p.is_dir()), None)
            why = f"{blocking} is a file, not a folder" if blocking else exc.strerror
            raise StoreProblem(f"cannot create the folder of the history store {path}: {why}") from None
        self._lock_fd = _take_lock(path)
        try:
            self._db = self._open()
        except BaseException:
            self._release()
            raise
        self._state: PoolState | None = None
        self._pending: list[tuple[Kind, EngineView | HostSnapshot, dict[str, float] | None, float]] = []
        self._pending_lock = threading.Lock()
        self._db_lock = threading.Lock()
        self._targets: dict[tuple[str, str], int] = {}
        self._dicts: dict[int, _Dict] = {}
        """target id -> the dictionary this session deflates its polls against."""
        self._dict_data: dict[int, bytes] = {}
        self._load_targets()
        self._stop = threading.Event()
        self._closed = False
        self._thread: threading.Thread | None = None
        if background:
            self._thread = threading.Thread(target=self._run, name="history store writer", daemon=True)
            self._thread.start()

    @classmethod
    def for_config(cls, config: PoolConfig, path: Path | None = None, **kw: Any) -> Store:
        settings = config.store
        return cls(
            path or store_path(config),
            full_resolution_hours=settings.full_resolution_hours,
            rollup_days=settings.rollup_days,
            **kw,
        )

    def _open(self) -> sqlite3.Connection:
        try:
            db = sqlite3.connect(self.path, timeout=10, check_same_thread=False)
        except sqlite3.Error as exc:
            raise StoreProblem(f"cannot open the history store {self.path}: {exc}") from None
        try:
            _check_store(db, self.path, new_ok=True)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.executescript(SCHEMA)
        except StoreProblem:
            db.close()
            raise
        except sqlite3.Error as exc:
            db.close()
            raise StoreProblem(f"cannot write the history store {self.path}: {exc}") from None
        return db

    def _release(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # the kernel drops the flock with it (and on a kill -9)
            self._lock_fd = None

    def _load_targets(self) -> None:
        self._targets = {
            (kind, name): tid for tid, kind, name in self._db.execute("SELECT id, kind, name FROM targets")
        }

    def bind(self, state: PoolState) -> None:
        """The pool state whose engines' running totals go with each engine poll."""
        self._state = state

    # -- the Recorder (the event loop): buffer only ----------------------------------------------------------
    def engine(self, view: EngineView, at: float) -> None:
        track = self._state.engines.get(view.name) if self._state is not None else None
        self.add("engine", view, dict(track.totals) if track is not None else None, at)

    def host(self, snapshot: HostSnapshot, at: float) -> None:
        self.add("host", snapshot, None, at)

    def add(self, kind: Kind, item: EngineView | HostSnapshot, totals: dict[str, float] | None, at: float) -> None:
        """One poll, with the engine's running totals as they were at it (the Recorder calls, a replay)."""
        with self._pending_lock:
            self._pending.append((kind, item, totals, at))
            if len(self._pending) > MAX_PENDING:
                excess = len(self._pending) - MAX_PENDING
                del self._pending[:excess]
                self.dropped += excess

    # -- writing (the writer thread, or the owner) ----------------------------------------------------------
    def _target(self, kind: str, name: str) -> int:
        tid = self._targets.get((kind, name))
        if tid is None:
            cursor = self._db.execute("INSERT INTO targets (kind, name) VALUES (?, ?)", (kind, name))
            tid = self._targets[(kind, name)] = int(cursor.lastrowid or 0)
        return tid

    def _dict_bytes(self, dict_id: int) -> bytes:
        data = self._dict_data.get(dict_id)
        if data is None:
            row = self._db.execute("SELECT data FROM dicts WHERE id = ?", (dict_id,)).fetchone()
            data = self._dict_data[dict_id] = bytes(row[0])
        return data

    def _new_dict(self, target: int, raw: bytes, at: float) -> _Dict:
        cursor = self._db.execute("INSERT INTO dicts (target, data, last_at) VALUES (?, ?, ?)", (target, raw, at))
        entry = _Dict(int(cursor.lastrowid or 0), raw, checked=True)
        self._dict_data[entry.id] = raw
        self._dicts[target] = entry
        return entry

    def _encode(self, target: int, raw: bytes, at: float) -> tuple[int | None, bytes]:
        if self.codec == "json":
            return None, raw
        if self.codec == "zlib":
            return None, zlib.compress(raw, 6)
        entry = self._dicts.get(target)
        if entry is None:
            row = self._db.execute(
                "SELECT id, data FROM dicts WHERE target = ? ORDER BY id DESC LIMIT 1", (target,)
            ).fetchone()
            if row is None:
                entry = self._new_dict(target, raw, at)
            else:
                entry = self._dicts[target] = _Dict(int(row[0]), bytes(row[1]))
                self._dict_data[entry.id] = entry.data
        blob = deflate(raw, entry.data)
        if not entry.checked:  # the first poll of this session against a dictionary of an earlier one
            entry.checked = True
            if len(blob) > DICT_REFRESH_RATIO * len(raw):
                entry = self._new_dict(target, raw, at)
                blob = deflate(raw, entry.data)
        return entry.id, blob

    def flush(self) -> int:
        """Encode and commit what is buffered, in one transaction; the number of polls written. On a failure
        (a full disk) the polls go back to the buffer for the next try and the problem is told once."""
        with self._pending_lock:
            batch, self._pending = self._pending, []
        if not batch:
            return 0
        with self._db_lock:
            try:
                with self._db:
                    rows = []
                    used: dict[int, float] = {}
                    for kind, item, totals, at in batch:
                        raw = poll_json(item, totals)
                        target = self._target(kind, item.name)
                        dict_id, blob = self._encode(target, raw, at)
                        rows.append((at, target, dict_id, blob))
                        if dict_id is not None:
                            used[dict_id] = max(at, used.get(dict_id, at))
                    self._db.executemany("INSERT OR REPLACE INTO polls VALUES (?, ?, ?, ?)", rows)
                    self._db.executemany(
                        "UPDATE dicts SET last_at = max(last_at, ?) WHERE id = ?", [(a, d) for d, a in used.items()]
                    )
                    self._db.execute("INSERT OR REPLACE INTO meta VALUES ('written_at', ?)", (time.time(),))
            except sqlite3.Error as exc:
                self._failed(batch, exc)
                return 0
        self.polls_written += len(batch)
        if self.problem is not None:
            self.problem = None
            self._tell(f"history store {self.path}: writing again")
        return len(batch)

    def _failed(self, batch: list[Any], exc: sqlite3.Error) -> None:
        self._dicts.clear()  # what the rolled-back transaction made is gone: read it again
        self._dict_data.clear()
        with contextlib.suppress(sqlite3.Error):
            self._load_targets()
        with self._pending_lock:
            self._pending[:0] = batch
            if len(self._pending) > MAX_PENDING:
                excess = len(self._pending) - MAX_PENDING
                del self._pending[:excess]
                self.dropped += excess
        message = f"history store {self.path}: cannot write ({exc}); keeping the polls in memory and retrying"
        if self.problem != message:
            self.problem = message
            self._tell(message)

    def _tell(self, message: str) -> None:
        if self.on_problem is not None:
            with contextlib.suppress(Exception):  # a closed event loop, a closed terminal: not the writer's end
                self.on_problem(message)

    def retain(self) -> None:
        """Apply the retention now, completely (the writer thread does it in slices)."""
        while self.retain_step(RETAIN_SLICE):
            pass

    def retain_step(self, limit: int) -> bool:
        """Delete what is older than rollup_days, roll up at most `limit` polls older than the full-resolution
        window into 1-minute rows (whole minutes only); True while there is more to do."""
        now = self.clock()
        keep_after = now - self.rollup_s
        full_after = math.floor((now - self.full_resolution_s) / ROLLUP_S) * ROLLUP_S
        with self._db_lock:
            try:
                with self._db:
                    more = False
                    for table in ("rollups", "polls"):
                        cursor = self._db.execute(
                            f"DELETE FROM {table} WHERE (at, target) IN "
                            f"(SELECT at, target FROM {table} WHERE at < ? ORDER BY at LIMIT ?)",
                            (keep_after, limit),
                        )
                        more = more or cursor.rowcount >= limit
                    in_use = [d.id for d in self._dicts.values()]
                    self._db.execute(
                        f"DELETE FROM dicts WHERE last_at < ? AND id NOT IN ({','.join('?' * len(in_use))})",
                        (keep_after, *in_use),
                    )
                    rows = self._db.execute(
                        "SELECT at, target, dict, data FROM polls WHERE at < ? ORDER BY at LIMIT ?", (full_after, limit)
                    ).fetchall()
                    self._roll_up(rows)
            except sqlite3.Error as exc:
                message = f"history store {self.path}: retention failed ({exc})"
                if self.problem != message:
                    self.problem = message
                    self._tell(message)
                return False
        return more or len(rows) >= limit

    def _roll_up(self, rows: list[tuple[float, int, int | None, bytes]]) -> None:
        groups: dict[tuple[int, float], list[tuple[float, int | None, bytes]]] = {}
        for at, target, dict_id, blob in rows:
            groups.setdefault((target, math.floor(at / ROLLUP_S) * ROLLUP_S), []).append((at, dict_id, blob))
        out = []
        for (target, minute), polls in groups.items():
            weighted = []
            existing = self._db.execute(
                "SELECT polls, dict, data FROM rollups WHERE at = ? AND target = ?", (minute, target)
            ).fetchone()
            if existing is not None:  # a minute cut by the slice limit, or a late poll: merged, not replaced
                weighted.append((decode(existing[2], self._zdict(existing[1])), int(existing[0])))
            weighted += [(decode(blob, self._zdict(dict_id)), 1) for _, dict_id, blob in polls]
            raw = dumps(rollup(weighted))
            dict_id = polls[-1][1]  # the minute's last dictionary: its last_at covers the minute
            if dict_id is not None:
                blob = deflate(raw, self._dict_bytes(dict_id))
            else:
                blob = zlib.compress(raw, 6) if self.codec == "zlib" else raw
            out.append((minute, target, sum(w for _, w in weighted), dict_id, blob))
        self._db.executemany("INSERT OR REPLACE INTO rollups VALUES (?, ?, ?, ?, ?)", out)
        self._db.executemany("DELETE FROM polls WHERE at = ? AND target = ?", [(r[0], r[1]) for r in rows])

    def _zdict(self, dict_id: int | None) -> bytes | None:
        return None if dict_id is None else self._dict_bytes(dict_id)

    def _run(self) -> None:
        next_commit = time.monotonic() + self.commit_every_s
        next_retain = time.monotonic()
        while True:
            stopping = self._stop.wait(max(0.0, min(next_commit, next_retain) - time.monotonic()))
            if stopping:
                break
            now = time.monotonic()
            if now >= next_commit:
                self.flush()
                next_commit += self.commit_every_s
                if next_commit <= now:  # the machine stalled: keep the cadence from here, no burst
                    next_commit = now + self.commit_every_s
            if now >= next_retain:
                more = self.retain_step(RETAIN_SLICE)
                next_retain = time.monotonic() + (RETAIN_PAUSE_S if more else RETAIN_EVERY_S)

    def close(self) -> None:
        """Stop the writer, commit what is left, release the file (blocking: call it off the event loop)."""
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        try:
            self.flush()
        finally:
            with self._db_lock:
                self._db.close()
            self._release()


# -- reading ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Row:
    at: float
    kind: Kind
    name: str
    polls: int
    """How many polls the row stands for: 1 at full resolution, more for a 1-minute rollup."""
    values: dict[str, Any]


class Reader:
    """Read-only access (export, the console's charts): never creates a file, never takes the writer's lock."""

    def __init__(self, path: Path) -> None:
        self.path = path
        if path.is_dir():
            raise StoreProblem(f"{path} is a directory, not a history store")
        if not path.is_file():
            raise StoreProblem(f"no history store at {path} (`poolconsole record` or the console writes one)")
        try:
            self._db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=10)
        except sqlite3.Error as exc:
            raise StoreProblem(f"cannot open the history store {path}: {exc}") from None
        try:
            _check_store(self._db, path, new_ok=False)
            self.targets: dict[int, tuple[Kind, str]] = {
                tid: (kind, name) for tid, kind, name in self._db.execute("SELECT id, kind, name FROM targets")
            }
        except StoreProblem:
            self._db.close()
            raise
        except sqlite3.Error as exc:
            self._db.close()
            raise StoreProblem(f"cannot read the history store {path}: {exc}") from None
        self._dicts: dict[int, bytes] = {}

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Reader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def ids(self, names: Sequence[str] | None, kinds: Sequence[str] = ("engine", "host")) -> list[int]:
        return [t for t, (kind, name) in self.targets.items() if kind in kinds and (names is None or name in names)]

    def written_at(self) -> float | None:
        """When the writer last committed (wall clock)."""
        row = self._db.execute("SELECT value FROM meta WHERE key = 'written_at'").fetchone()
        return None if row is None else float(row[0])

    def _zdict(self, dict_id: int | None) -> bytes | None:
        if dict_id is None:
            return None
        data = self._dicts.get(dict_id)
        if data is None:
            row = self._db.execute("SELECT data FROM dicts WHERE id = ?", (dict_id,)).fetchone()
            if row is None:
                raise StoreProblem(f"{self.path} is damaged: a row's dictionary {dict_id} is missing")
            data = self._dicts[dict_id] = bytes(row[0])
        return data

    def _query(self, table: str, start: float, end: float, ids: list[int]) -> Iterator[Row]:
        polls = "polls" if table == "rollups" else "1"
        marks = ",".join("?" * len(ids))
        cursor = self._db.execute(
            f"SELECT at, target, {polls}, dict, data FROM {table} "
            f"WHERE at >= ? AND at < ? AND target IN ({marks}) ORDER BY at, target",
            (start, end, *ids),
        )
        while True:
            try:
                found = cursor.fetchmany(500)
            except sqlite3.Error as exc:
                raise StoreProblem(f"cannot read the history store {self.path}: {exc}") from None
            if not found:
                return
            for at, target, count, dict_id, blob in found:
                kind, name = self.targets[target]
                try:
                    values = decode(blob, self._zdict(dict_id))
                except (zlib.error, ValueError) as exc:
                    raise StoreProblem(
                        f"{self.path} is damaged: a row of {name} at {at} does not decode ({exc})"
                    ) from None
                yield Row(at, kind, name, int(count), values)

    def rows(self, start: float = -math.inf, end: float = math.inf, ids: list[int] | None = None) -> Iterator[Row]:
        """Rollups and full-resolution rows merged in time order."""
        chosen = list(self.targets) if ids is None else ids
        if not chosen:
            return iter(())
        lo, hi = max(start, -1e300), min(end, 1e300)
        return heapq.merge(
            self._query("rollups", lo, hi, chosen), self._query("polls", lo, hi, chosen), key=lambda r: r.at
        )


# -- export ----------------------------------------------------------------------------------------------
ENGINE_FIELDS = [f.name for f in dataclasses.fields(EngineView)] + ["totals"]
HOST_FIELDS = list(HostSnapshot("", "", HostState.OK).to_json())
EXPORT_FIELDS = list(dict.fromkeys(["taken_at", "target_type", "polls", *ENGINE_FIELDS, *HOST_FIELDS]))
"""The columns of `export --format csv`: every field a jsonl row can carry, engines' and hosts'."""

_RELATIVE = re.compile(r"^-\s*(\d+(?:\.\d+)?)\s*(s|m|min|h|d|w)$")
_UNITS = {"s": 1, "m": 60, "min": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_time(text: str, now: float) -> float:
    """ISO 8601 (no offset: UTC), `now`, or relative to now: -30s, -10m, -2h, -7d, -1w."""
    text = text.strip()
    if text == "now":
        return now
    match = _RELATIVE.match(text)
    if match:
        return now - float(match.group(1)) * _UNITS[match.group(2)]
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(
            f"{text!r} is not a time: give ISO 8601 (2026-11-30T14:00:00Z) or a relative one (-10m, -2h, -7d)"
        ) from None
    return (when if when.tzinfo is not None else when.replace(tzinfo=dt.UTC)).timestamp()


def iso(at: float) -> str:
    return dt.datetime.fromtimestamp(at, dt.UTC).isoformat(timespec="milliseconds")


def export_doc(row: Row) -> dict[str, Any]:
    return {"taken_at": iso(row.at), "target_type": row.kind, "polls": row.polls, **row.values}


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, dict | list | bool):
        return json.dumps(value, separators=(",", ":"), allow_nan=False)
    return value


def export(
    path: Path, fmt: Literal["jsonl", "csv"], out: TextIO, start: float, end: float, names: Sequence[str] | None
) -> int:
    """Write one row per poll (or 1-minute rollup) per target in [start, end), time order; the rows written."""
    with Reader(path) as reader:
        known = {name for _, name in reader.targets.values()}
        unknown = [n for n in names or () if n not in known]
        if unknown:
            listed = ", ".join(sorted(known)) or "none yet"
            raise StoreProblem(f"{path} has no target named {', '.join(unknown)} (it has: {listed})")
        count = 0
        writer = csv.writer(out, lineterminator="\n") if fmt == "csv" else None
        if writer is not None:
            writer.writerow(EXPORT_FIELDS)
        for row in reader.rows(start, end, reader.ids(names)):
            doc = export_doc(row)
            if writer is not None:
                writer.writerow([_cell(doc.get(k)) for k in EXPORT_FIELDS])
            else:
                out.write(json.dumps(doc, allow_nan=False) + "\n")
            count += 1
        return count


# -- the console's charts on launch ---------------------------------------------------------------------
@dataclass
class StoredHistory:
    """What the charts show, read from the store: per engine (at, tok/s, kv, running, waiting, vram,
    counter resets), per host (at, vram)."""

    engines: dict[str, list[tuple[float, Any, Any, Any, Any, float | None, int]]] = field(default_factory=dict)
    hosts: dict[str, list[tuple[float, float | None]]] = field(default_factory=dict)


def _vram(gpus: Any, only: list[int] | None) -> float | None:
    """The share of GPU memory used, as PoolState computes it from a snapshot (here its JSON)."""
    chosen = [g for g in gpus or () if only is None or g.get("index") in only]
    used = [g.get("memory_used_bytes") for g in chosen]
    total = [g.get("memory_total_bytes") for g in chosen]
    if not chosen or None in used or None in total:
        return None
    denominator = sum(t for t in total if t)
    return sum(u for u in used if u) / denominator if denominator else None


def read_history(path: Path, config: PoolConfig, since: float, until: float) -> StoredHistory:
    """The configured targets' rows in [since, until), as the history rings hold them (blocking)."""
    engines = {e.name: e for e in config.engines}
    hosts = {h.name for h in config.hosts}
    out = StoredHistory()
    gpus: dict[str, Any] = {}
    with Reader(path) as reader:
        ids = reader.ids(list(engines), ("engine",)) + reader.ids(list(hosts), ("host",))
        for row in reader.rows(since, until, ids):
            v = row.values
            if row.kind == "host":
                gpus[row.name] = v.get("gpus")
                out.hosts.setdefault(row.name, []).append((row.at, _vram(v.get("gpus"), None)))
                continue
            engine = engines[row.name]
            vram = _vram(gpus[engine.host], engine.gpus) if engine.host in gpus else None
            point = (
                row.at,
                v.get("generation_tokens_per_s"),
                v.get("kv_cache_usage"),
                v.get("requests_running"),
                v.get("requests_waiting"),
                vram,
                int(v.get("counter_resets") or 0),
            )
            out.engines.setdefault(row.name, []).append(point)
    return out


def fill_history(state: PoolState, stored: StoredHistory) -> None:
    """Put the stored points before what the live polls already appended (on the event loop)."""
    for name, points in stored.engines.items():
        track = state.engines.get(name)
        if track is None:
            continue
        old = track.history
        first_live = old.times.raw_tail(len(old.times))[0] if len(old.times) else math.inf
        new = History()
        for at, tps, kv, running, waiting, vram, resets in points[-HISTORY_POINTS:]:
            if at >= first_live:
                break
            new.times.append(at)
            new.tokens_per_s.append(tps)
            new.kv.append(kv)
            new.running.append(running)
            new.waiting.append(waiting)
            new.vram.append(vram)
            if resets:
                new.restarts.append(at)
        count = len(old.times)
        for series in ("times", "tokens_per_s", "kv", "running", "waiting", "vram"):
            target = getattr(new, series)
            for value in getattr(old, series).tail(count):
                target.append(value)
        new.restarts.extend(old.restarts)
        track.history = new
    for name, host_points in stored.hosts.items():
        host = state.hosts.get(name)
        if host is None:
            continue
        live = host.vram.tail(len(host.vram))
        host.vram = Ring(host.vram.capacity)
        for _, fraction in host_points[-HISTORY_POINTS:]:
            host.vram.append(fraction)
        for fraction in live:
            host.vram.append(fraction)


# -- record ----------------------------------------------------------------------------------------------
async def record(pool: LivePool, store: Store, stop: asyncio.Event) -> None:
    """The pool polled headless into the store until `stop`; then the loops end and the last rows are
    committed."""
    pool.start()
    try:
        await stop.wait()
    finally:
        await pool.stop()
        await asyncio.to_thread(store.close)
