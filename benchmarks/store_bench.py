"""History store benchmark (issue 14), run by hand: `python benchmarks/store_bench.py`.

The demo pool (8 engines, 7 hosts; poolconsole.sim) runs in this process and a LivePool polls it for
CAPTURE_S seconds, keeping every applied poll (the frozen view or snapshot, the engine's running totals).
The pool is then stopped, and each encoding writes the same polls, replayed until ROWS rows, into its own
store the way the writer thread does (the Recorder call, then one transaction per second's polls), with
the same table layout. Printed side by side for each encoding:

- bytes per row (the file's used pages after a checkpoint, over the rows) and per target-day at the
  default 2 s poll interval (43,200 polls) and at 1 s;
- CPU per written poll (process time of the Recorder calls, encoding and commits, over the polls), and
  the part of it the event loop pays (the Recorder call: the rest is the writer thread's);
- CPU to read one row back (export, the console's charts on launch);
- a 1-minute rollup row's bytes (what the rollups table adds to the vacuumed file, over its rows), and
  what one target costs in steady state: a day of full resolution plus 90 days of rollups.

The full-resolution bytes are the live file's (B-tree pages as the writer leaves them, the dictionaries and
the target table included), not a vacuumed copy.

Encodings: plain JSON text; JSON with zlib per row; JSON deflated against a preset dictionary per target
(its first poll, stored once), the store's choice.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from poolconsole.config import parse_config  # noqa: E402
from poolconsole.model.hosts import HostSnapshot  # noqa: E402
from poolconsole.model.view import EngineView  # noqa: E402
from poolconsole.runtime.live import LivePool  # noqa: E402
from poolconsole.runtime.store import Codec, Kind, Reader, Store  # noqa: E402
from poolconsole.sim.demo import SimPool  # noqa: E402

CAPTURE_S = float(os.environ.get("CAPTURE_S", "30"))
ROWS = int(os.environ.get("ROWS", "45000"))
CODECS: tuple[Codec, ...] = ("json", "zlib", "dict")
DAY = 86400
Poll = tuple[Kind, Any, dict[str, float] | None, float]


class Capture:
    """A Recorder that keeps each applied poll with the engine's running totals at that moment."""

    def __init__(self) -> None:
        self.polls: list[Poll] = []

    def engine(self, view: EngineView, totals: Mapping[str, float], at: float) -> None:
        self.polls.append(("engine", view, dict(totals), at))

    def host(self, snapshot: HostSnapshot, at: float) -> None:
        self.polls.append(("host", snapshot, None, at))


async def capture(keys: Path) -> tuple[list[Poll], float]:
    sim = SimPool(seed=5)
    await sim.start(keys)
    try:
        await sim.wait_ready()
        config = parse_config(sim.config_toml(), "demo.toml")
        recorder = Capture()
        pool = LivePool(config, recorder=recorder)
        pool.start(settle_gc=False)
        await asyncio.sleep(CAPTURE_S)
        await pool.stop()
        return recorder.polls, config.settings.poll_interval_s
    finally:
        await sim.stop()


def table_bytes(path: Path, table: str) -> int:
    """What `table` adds to the file, packed: the file vacuumed with and without it."""
    sizes = []
    for drop in (False, True):
        copy = path.with_name(f"{path.stem}-{table}-{drop}.sqlite3")
        db = sqlite3.connect(path)
        db.execute("VACUUM INTO ?", (str(copy),))
        db.close()
        if drop:
            db = sqlite3.connect(copy)
            db.execute(f"DELETE FROM {table}")
            db.commit()
            db.execute("VACUUM")
            db.close()
        sizes.append(copy.stat().st_size)
        copy.unlink()
    return sizes[0] - sizes[1]


def used_bytes(path: Path) -> int:
    db = sqlite3.connect(path)
    try:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        pages = db.execute("PRAGMA page_count").fetchone()[0] - db.execute("PRAGMA freelist_count").fetchone()[0]
        return int(pages * db.execute("PRAGMA page_size").fetchone()[0])
    finally:
        db.close()


def measure(codec: Codec, polls: list[Poll], interval: float, folder: Path) -> dict[str, float]:
    path = folder / f"{codec}.sqlite3"
    span = polls[-1][3] - polls[0][3] + interval
    per_second = max(1, round(len(polls) / span))  # polls the writer commits in one transaction
    now = [0.0]  # retention runs only when asked (below): writing is measured alone
    store = Store(path, codec=codec, background=False, clock=lambda: now[0])
    written = 0
    cpu = time.process_time()
    repeat = 0
    while written < ROWS:
        shift = repeat * span
        for i, (kind, item, totals, at) in enumerate(polls):
            store.add(kind, item, totals, at + shift)  # the Recorder's buffer, with the totals of then
            if (i + 1) % per_second == 0:
                written += store.flush()
        written += store.flush()
        repeat += 1
    cpu = time.process_time() - cpu
    size = used_bytes(path)

    started = time.process_time()
    with Reader(path) as reader:
        read = sum(1 for _ in reader.rows())
    read_cpu = time.process_time() - started

    # every row older than the full-resolution window: all become 1-minute rollups
    now[0] = polls[-1][3] + repeat * span + DAY + 120
    started = time.process_time()
    store.retain()
    rollup_cpu = time.process_time() - started
    db = sqlite3.connect(path)
    rollups, minutes_targets = db.execute("SELECT count(*), sum(polls) FROM rollups").fetchone()
    left = db.execute("SELECT count(*) FROM polls").fetchone()[0]
    db.close()
    store.close()
    rollup_size = table_bytes(path, "rollups")
    return {
        "rows": written,
        "read": read,
        "per_row": size / written,
        "cpu_us": cpu / written * 1e6,
        "read_us": read_cpu / read * 1e6,
        "rollups": rollups,
        "rolled": minutes_targets or 0,
        "left": left,
        "rollup_row": rollup_size / max(1, rollups),
        "rollup_us": rollup_cpu / max(1, minutes_targets or 1) * 1e6,
    }


def measure_rowid_json(polls: list[Poll], interval: float, folder: Path) -> dict[str, float]:
    """Plain JSON in an ordinary rowid table with an index on the time (the store's WITHOUT ROWID table
    pushes a 1.4 KB row into an overflow page, which is no fair measure of JSON itself)."""
    from poolconsole.runtime.store import poll_json

    path = folder / "json-rowid.sqlite3"
    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("CREATE TABLE polls (id INTEGER PRIMARY KEY, at REAL NOT NULL, target INTEGER, data BLOB)")
    db.execute("CREATE INDEX polls_at ON polls (at)")
    names: dict[str, int] = {}
    span = polls[-1][3] - polls[0][3] + interval
    per_second = max(1, round(len(polls) / span))
    written, repeat, batch = 0, 0, []
    cpu = time.process_time()
    while written < ROWS:
        for i, (_, item, totals, at) in enumerate(polls):
            raw = poll_json(item, totals)
            batch.append((at + repeat * span, names.setdefault(item.name, len(names)), raw))
            if (i + 1) % per_second == 0 or i == len(polls) - 1:
                with db:
                    db.executemany("INSERT INTO polls (at, target, data) VALUES (?, ?, ?)", batch)
                written += len(batch)
                batch = []
        repeat += 1
    cpu = time.process_time() - cpu
    db.close()
    return {"rows": written, "per_row": used_bytes(path) / written, "cpu_us": cpu / written * 1e6}


def loop_side_us(polls: list[Poll], folder: Path) -> float:
    """The Recorder call itself, what the event loop pays per applied poll (an engine's totals copied)."""
    store = Store(folder / "loop.sqlite3", background=False)
    calls = 0
    started = time.perf_counter()
    for _ in range(50):
        for kind, item, totals, at in polls:
            if kind == "engine":
                store.engine(item, dict(totals or {}), at)  # with the copy the runtime makes for it
            else:
                store.host(item, at)
            calls += 1
    spent = time.perf_counter() - started
    store._pending.clear()  # measured the buffering only: nothing to write
    store.close()
    return spent / calls * 1e6


def mib(n: float) -> str:
    return f"{n / 2**20:8.2f} MiB"


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        print(f"capturing {CAPTURE_S:g} s of the demo pool's polls ...", flush=True)
        polls, interval = asyncio.run(capture(folder / "keys"))
        targets = len({(k, item.name) for k, item, _, _ in polls})
        print(f"{len(polls)} polls of {targets} targets at {interval:g} s; each encoding writes {ROWS} rows\n")
        results = {codec: measure(codec, polls, interval, folder) for codec in CODECS}
        plain = measure_rowid_json(polls, interval, folder)
        loop_us = loop_side_us(polls, folder)
    print(
        f"{'encoding':10s} {'B/row':>8s} {'per target-day @2s':>18s} {'@1s':>12s} {'CPU/poll':>10s} "
        f"{'read/row':>9s} {'rollup B':>9s} {'steady target @2s':>18s}"
    )
    for codec, r in results.items():
        steady = r["per_row"] * DAY / 2 + r["rollup_row"] * 1440 * 90  # 24 h of every poll + 90 days of minutes
        print(
            f"{codec:10s} {r['per_row']:8.1f} {mib(r['per_row'] * DAY / 2):>18s} {mib(r['per_row'] * DAY):>12s} "
            f"{r['cpu_us']:8.1f}us {r['read_us']:7.1f}us {r['rollup_row']:9.1f} {mib(steady):>18s}"
        )
    print(
        f"{'json rowid':10s} {plain['per_row']:8.1f} {mib(plain['per_row'] * DAY / 2):>18s} "
        f"{mib(plain['per_row'] * DAY):>12s} {plain['cpu_us']:8.1f}us   (plain JSON, rowid table + time index)"
    )
    best, zlib_row = results["dict"], results["zlib"]
    print(
        f"\ndict vs plain JSON (rowid table): {plain['per_row'] / best['per_row']:.1f}x smaller rows, "
        f"{best['cpu_us'] / plain['cpu_us']:.2f}x the CPU per poll; vs zlib per row: "
        f"{zlib_row['per_row'] / best['per_row']:.1f}x smaller, {best['cpu_us'] / zlib_row['cpu_us']:.2f}x the CPU"
    )
    print(f"on the event loop: {loop_us:.2f} us per poll (the Recorder call: buffer the view, copy the totals)")
    print(
        f"rollup (dict): {best['rolled']:.0f} polls -> {best['rollups']:.0f} rows, {best['left']:.0f} left at full "
        f"resolution, {best['rollup_us']:.1f} us of CPU per rolled poll"
    )


if __name__ == "__main__":
    main()
