"""Does the console's memory stay flat once the chart rings are full? (issue 35 item 9)

`python benchmarks/memory_growth.py [--minutes 10] [--poll 0.25] [--warmup 2] [--snapshot-every 2]
[--no-tracemalloc] [--fill-rings]`

The whole console (ui.app.PoolApp, headless through `run_test(size=(160, 45))`) watches the live demo pool
(sim.demo.SimPool, seed 7, hosts over SSH, a history store recording into a temporary directory, as
`poolconsole demo` runs it). The poll interval of the demo's config is shortened (`--poll`, default 0.25 s
instead of 1 s) so that ten minutes of wall time hold forty minutes' worth of polls.

`--fill-rings` fills every chart ring (model.series.Ring, HISTORY_POINTS points a series) to capacity once
the console has mounted, as an hour of polls would: what grows after that is not the rings. Without it, the
rings fill as the polls come (at 0.25 s, in 15 minutes) and their growth is part of the slope.

Printed: RSS every 30 s, the RSS slope per hour of wall time by least squares over the samples after the
warm-up (and, with tracemalloc, the slope of the Python heap it traces), and, with tracemalloc (25 frames,
the default), the allocation sites that grew most between the first snapshot after the warm-up and the last,
and between each pair of snapshots. tracemalloc costs memory of its own: take the RSS figure with
`--no-tracemalloc`.
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import gc
import itertools
import os
import resource
import sys
import tempfile
import time
import tracemalloc
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from poolconsole.config import parse_config  # noqa: E402
from poolconsole.model.series import Ring  # noqa: E402
from poolconsole.sim.demo import SimPool  # noqa: E402
from poolconsole.ui.app import PoolApp  # noqa: E402

SIZE = (160, 45)
FRAMES = 25


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 1e6


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


def malloc_mb() -> tuple[float, float]:
    """glibc's heap over all its arenas: (in use, free inside the arenas); NaN off glibc. Python's own
    objects live in pymalloc's arenas (in use here), native libraries' (SQLite, OpenSSL) too."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallinfo2.restype = _MallInfo2
        info = libc.mallinfo2()
    except (OSError, AttributeError):
        return float("nan"), float("nan")
    return (info.uordblks + info.hblkhd) / 1e6, info.fordblks / 1e6


def sqlite_mb() -> float:
    """SQLite's own heap in this process (sqlite3_memory_used: page caches, statements, the WAL index),
    from the library the sqlite3 module loaded (dlopen of the same soname gives the same instance); NaN
    where it cannot be read."""
    try:
        lib = ctypes.CDLL("libsqlite3.so.0")
        lib.sqlite3_memory_used.restype = ctypes.c_int64
        return float(lib.sqlite3_memory_used()) / 1e6
    except (OSError, AttributeError):
        return float("nan")


def slope_per_hour(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, MB) points, in MB per hour."""
    n = len(points)
    if n < 2:
        return float("nan")
    mx = sum(t for t, _ in points) / n
    my = sum(v for _, v in points) / n
    sxx = sum((t - mx) ** 2 for t, _ in points)
    sxy = sum((t - mx) * (v - my) for t, v in points)
    return sxy / sxx * 3600 if sxx else float("nan")


def type_counts() -> Counter[str]:
    """Objects the garbage collector tracks, by type."""
    return Counter(type(o).__qualname__ for o in gc.get_objects())


def rings_of(app: PoolApp) -> list[Ring]:
    rings: list[Ring] = []
    for track in app.state.engines.values():
        h = track.history
        rings += [h.times, h.tokens_per_s, h.kv, h.running, h.waiting, h.vram]
    rings += [host.vram for host in app.state.hosts.values()]
    return rings


def fill_rings(app: PoolApp) -> None:
    for ring in rings_of(app):
        while len(ring) < ring.capacity:
            ring.append(None)


def show_top(title: str, now: tracemalloc.Snapshot, before: tracemalloc.Snapshot, limit: int) -> None:
    filters = [
        tracemalloc.Filter(False, tracemalloc.__file__),
        tracemalloc.Filter(False, "<frozen importlib._bootstrap>"),
        tracemalloc.Filter(False, "<frozen importlib._bootstrap_external>"),
    ]
    stats = now.filter_traces(filters).compare_to(before.filter_traces(filters), "traceback")
    stats = sorted((s for s in stats if s.size_diff > 0), key=lambda s: -s.size_diff)
    print(f"\n== {title}: top {limit} growing sites ==")
    for stat in stats[:limit]:
        print(f"+{stat.size_diff / 1e3:8.1f} kB  +{stat.count_diff:6d} blocks  (now {stat.size / 1e3:.1f} kB)")
        ours = [f for f in stat.traceback if "/poolconsole/" in f.filename or "/textual/" in f.filename]
        for frame in (ours or list(stat.traceback))[-6:]:
            print(f"      {frame.filename.replace(str(ROOT) + '/', '')}:{frame.lineno}")


async def run(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        pool = None if args.config else SimPool(scenario="normal", seed=7)
        if pool is not None:
            await pool.start(Path(tmp) / "keys")
        try:
            if pool is not None:
                await pool.wait_ready()
                text = pool.config_toml().replace("poll_interval_s = 1.0", f"poll_interval_s = {args.poll}")
            else:  # a pool already running (the chaos soak's, say), polled at its own interval
                text = args.config.read_text()
            config = parse_config(text)
            app = PoolApp(
                config, theme_state=Path(tmp) / "ui.json", subtitle="demo pool", store=Path(tmp) / "history.sqlite3"
            )
            app.audit_path = Path(tmp) / "audit.sqlite3"
            app.smoke_db = Path(tmp) / "smoke.sqlite3"
            async with app.run_test(size=SIZE):
                await asyncio.sleep(3)
                if args.fill_rings:
                    fill_rings(app)
                rings = rings_of(app)
                print(
                    f"{len(app.state.engines)} engines, {len(app.state.hosts)} hosts, {len(rings)} rings "
                    f"of {rings[0].capacity} points: {len(rings) * rings[0].capacity * 8 / 1e6:.2f} MB full; "
                    f"poll every {args.poll} s, {args.minutes} min, warm-up {args.warmup} min"
                )
                if args.tracemalloc:
                    tracemalloc.start(FRAMES)
                start = time.monotonic()
                rss: list[tuple[float, float]] = []
                used: list[tuple[float, float]] = []
                free: list[tuple[float, float]] = []
                sqlite: list[tuple[float, float]] = []
                blocks: list[tuple[float, float]] = []
                traced: list[tuple[float, float]] = []
                snapshots: list[tuple[float, tracemalloc.Snapshot]] = []
                next_snap = args.warmup * 60
                types_then: Counter[str] | None = None
                while (elapsed := time.monotonic() - start) < args.minutes * 60:
                    gc.collect()
                    if elapsed >= args.warmup * 60:
                        if types_then is None:
                            types_then = type_counts()
                        rss.append((elapsed, rss_mb()))
                        in_use, spare = malloc_mb()
                        used.append((elapsed, in_use))
                        free.append((elapsed, spare))
                        sqlite.append((elapsed, sqlite_mb()))
                        blocks.append((elapsed, sys.getallocatedblocks() / 1e3))
                        if args.tracemalloc:
                            traced.append((elapsed, tracemalloc.get_traced_memory()[0] / 1e6))
                    if args.tracemalloc and elapsed >= next_snap:
                        snapshots.append((elapsed, tracemalloc.take_snapshot()))
                        next_snap += args.snapshot_every * 60
                    print(
                        f"{elapsed / 60:5.1f} min  RSS {rss_mb():7.1f} MB"
                        f"  malloc used/free {malloc_mb()[0]:6.1f}/{malloc_mb()[1]:5.1f} MB"
                        f"  Python blocks {sys.getallocatedblocks() / 1e3:7.1f} k"
                        + (f"  traced {tracemalloc.get_traced_memory()[0] / 1e6:6.1f} MB" if args.tracemalloc else "")
                        + f"  SQLite {sqlite_mb():5.1f} MB"
                        + f"  fds {len(os.listdir('/proc/self/fd'))}"
                        + f"  ring points {sum(len(r) for r in rings)}",
                        flush=True,
                    )
                    await asyncio.sleep(30)
                gc.collect()
                if args.tracemalloc:
                    snapshots.append((time.monotonic() - start, tracemalloc.take_snapshot()))
                    for (t0, s0), (t1, s1) in itertools.pairwise(snapshots):
                        show_top(f"{t0 / 60:.1f} -> {t1 / 60:.1f} min", s1, s0, 5)
                    show_top(
                        f"{snapshots[0][0] / 60:.1f} -> {snapshots[-1][0] / 60:.1f} min",
                        snapshots[-1][1],
                        snapshots[0][1],
                        args.top,
                    )
                if types_then is not None:
                    grown = (type_counts() - types_then).most_common(args.top)
                    print("\nobjects grown since the warm-up, by type: " + ", ".join(f"{n} +{c}" for n, c in grown))
                print(f"\nRSS slope after the warm-up: {slope_per_hour(rss):+.1f} MB/h ({len(rss)} samples)")
                print(
                    f"glibc heap in use: {slope_per_hour(used):+.1f} MB/h, free inside its arenas: "
                    f"{slope_per_hour(free):+.1f} MB/h; SQLite's heap: {slope_per_hour(sqlite):+.1f} MB/h; "
                    f"Python blocks: {slope_per_hour(blocks):+.1f} k/h"
                )
                if traced:
                    print(f"traced heap slope after the warm-up: {slope_per_hour(traced):+.1f} MB/h")
        finally:
            if pool is not None:
                await pool.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--poll", type=float, default=0.25, help="the demo's poll interval, s (default 0.25)")
    parser.add_argument("--warmup", type=float, default=2.0, help="minutes left out of the slope")
    parser.add_argument("--snapshot-every", type=float, default=2.0, help="minutes between tracemalloc snapshots")
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--no-tracemalloc", dest="tracemalloc", action="store_false")
    parser.add_argument("--fill-rings", action="store_true", help="fill every chart ring before measuring")
    parser.add_argument("--config", type=Path, default=None, help="watch this hosts.toml's pool instead of the demo")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
