"""The history store's writer. The Recorder calls (on the event loop, once per applied poll) only append the
frozen view or snapshot, with an engine's running totals as the runtime applied them, to an in-memory
buffer; a writer thread encodes and commits the buffer once a second, so a `kill -9` loses at most the polls
of the last second. The file is in WAL mode with synchronous=NORMAL: a committed transaction is in the WAL
file (the OS's page cache) before COMMIT returns, so it survives the death of the process; only an OS crash
or power loss can take back the last commits (never corrupt the file), and it saves an fsync a second (a disk
kept awake, flash wear) for telemetry that is not an audit record.

Retention: every poll for `full_resolution_hours` (24 h by default), then one row per target and minute
(rollup.py) for `rollup_days` (90 by default), then deleted."""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import sqlite3
import threading
import time
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from poolconsole.config.models import PoolConfig
from poolconsole.model.hosts import HostSnapshot
from poolconsole.model.view import EngineView
from poolconsole.runtime.store.codec import Codec, Kind, decode, deflate, dumps, poll_json
from poolconsole.runtime.store.files import SCHEMA, StoreProblem, check_store, store_path, take_lock
from poolconsole.runtime.store.rollup import rollup

if TYPE_CHECKING:
    from poolconsole.runtime.live import LivePool

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
DICT_REFRESH_RATIO = 0.35
"""A stored dictionary that deflates a target's first poll of a session to more than this share of its
size no longer matches the target (new GPUs, a new URL): a new one is made from that poll."""


Poll = tuple[Kind, EngineView | HostSnapshot, Mapping[str, float] | None, float]
"""One buffered poll: what it is, the view or snapshot, an engine's running totals at it, when."""


@dataclass
class _Dict:
    id: int
    data: bytes
    checked: bool = False


class HeldPolls:
    """A Recorder that holds the polls applied while the store opens (off the event loop: opening can wait
    on the disk, recovering the write-ahead log of a console that was killed), each with its engine's running
    totals as the runtime gave them, and gives them to the store in order once it is open."""

    def __init__(self) -> None:
        self.polls: list[Poll] = []

    def engine(self, view: EngineView, totals: Mapping[str, float], at: float) -> None:
        self._hold(("engine", view, totals, at))

    def host(self, snapshot: HostSnapshot, at: float) -> None:
        self._hold(("host", snapshot, None, at))

    def _hold(self, poll: Poll) -> None:
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
        self._lock_fd = take_lock(path)
        try:
            self._db = self._open()
        except BaseException:
            self._release()
            raise
        self._pending: list[Poll] = []
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
            check_store(db, self.path, new_ok=True)
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

    # -- the Recorder (the event loop): buffer only ----------------------------------------------------------
    def engine(self, view: EngineView, totals: Mapping[str, float], at: float) -> None:
        self.add("engine", view, totals, at)

    def host(self, snapshot: HostSnapshot, at: float) -> None:
        self.add("host", snapshot, None, at)

    def add(self, kind: Kind, item: EngineView | HostSnapshot, totals: Mapping[str, float] | None, at: float) -> None:
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
        # kept for the session: a copy of its own length, not orjson's bytes, which keep the buffer they were
        # grown in (at 1,000 engines and 250 hosts, 19 MiB of dictionaries where 4 MiB is theirs)
        raw = memoryview(raw).tobytes()
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
                        target = self._target(kind, item.name)
                        dict_id, blob = self._encode(target, poll_json(item, totals), at)
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
