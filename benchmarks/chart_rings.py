"""The chart rings at fleet size (issue 39, item 2: "the chart rings must not grow with the fleet"), before and
after they were cut to SHORT_POINTS for all but the FULL_KEPT engines opened last, and what a detail then costs
to read its hour back from the history store.

1. Ring memory at 1,000 engines on 250 hosts (tests/helpers/bigpool), every ring filled to its capacity (what an
   hour or two of polls leaves): `before` every engine's six rings and every host's VRAM ring at HISTORY_POINTS
   (what each kept until now), `after` as PoolState now keeps them, FULL_KEPT engines opened in a detail. Bytes
   as tracemalloc counts them (the arrays, the Ring and History objects), and the points' own bytes.
2. A detail's fill for one engine from a history store holding an hour of polls 2 s apart for `--engines`
   engines: read_history for that engine (the thread's part) and fill_history (the event loop's part), in ms,
   the median of `--runs`; beside it the launch's read of every engine, for scale.

    PYTHONPATH=. .venv/bin/python benchmarks/chart_rings.py [--engines 100] [--runs 5]"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from poolconsole.config import PoolConfig
from poolconsole.model.pool_state import FULL_KEPT, HISTORY_POINTS, SERIES, SHORT_POINTS, History, PoolState
from poolconsole.model.series import Ring
from poolconsole.runtime.store import Store, fill_history, read_history
from tests.helpers import bigpool, uipool

FLEET = 1000
HOUR = 1800  # polls 2 s apart


def filled(template: Ring, capacity: int) -> Ring:
    """A ring of `capacity` holding as many points as it keeps."""
    return template.resized(capacity)


def ring_memory(cfg: PoolConfig, before: bool) -> tuple[int, int]:
    """(bytes tracemalloc counts, bytes of the points) of every engine's and host's rings, each full."""
    template = Ring(HISTORY_POINTS)
    for i in range(HISTORY_POINTS):
        template.append(float(i))
    tracemalloc.start()
    start = tracemalloc.get_traced_memory()[0]
    state = PoolState(cfg)
    if not before:
        for name in list(state.engines)[:FULL_KEPT]:
            state.keep_full(name)
    for name, track in state.engines.items():
        capacity = HISTORY_POINTS if before else state.capacity_of(name)
        history = History(capacity)
        for series in SERIES:
            setattr(history, series, filled(template, capacity))
        track.history = history
    for host in state.hosts.values():
        host.vram = filled(template, HISTORY_POINTS if before else SHORT_POINTS)
    traced = tracemalloc.get_traced_memory()[0] - start
    tracemalloc.stop()
    points = sum(r.nbytes for t in state.engines.values() for r in t.history.rings())
    points += sum(h.vram.nbytes for h in state.hosts.values())
    return traced, points


def median_ms(work: Callable[[], object], runs: int) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def detail_fill(engines: int, runs: int, folder: Path) -> dict[str, float]:
    cfg = bigpool.config(engines, gpus_per_host=4)
    ui = uipool.config()
    view = next(v for v in (PoolState(ui).apply_engine(s) for s in uipool.engine_snapshots(ui)) if v.kind == "vllm")
    path = folder / "history.sqlite3"
    until = time.time()
    t0 = until - 2 * HOUR
    started = time.perf_counter()
    store = Store(path, background=False)
    names = [e.name for e in cfg.engines]
    for i in range(HOUR):
        for name in names:
            store.engine(replace(view, name=name, kv_cache_usage=i / HOUR), {}, t0 + 2 * i)
    store.close()
    written_s = time.perf_counter() - started
    name = names[len(names) // 2]
    since = until - HISTORY_POINTS * 2.0

    def read() -> object:
        return read_history(path, cfg, since, until, (name,))

    def fill() -> None:
        state = PoolState(cfg)
        state.keep_full(name)
        fill_history(state, stored, marks=False)
        assert len(state.engines[name].history.times) == HOUR

    stored = read_history(path, cfg, since, until, (name,))
    return {
        "rows": float(HOUR * engines),
        "written_s": written_s,
        "read_ms": median_ms(read, runs),
        "fill_ms": median_ms(fill, runs),
        "launch_read_ms": median_ms(lambda: read_history(path, cfg, since, until), max(1, runs // 2)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--engines", type=int, default=100, help="engines in the store of the detail's fill")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    cfg = bigpool.config(FLEET, gpus_per_host=4)
    for label, before in (("before", True), ("after", False)):
        traced, points = ring_memory(cfg, before)
        print(f"rings at {FLEET} engines, {len(cfg.hosts)} hosts, full, {label}: "
              f"{traced / 1e6:.1f} MB traced, {points / 1e6:.1f} MB of points")  # fmt: skip
    with tempfile.TemporaryDirectory() as folder:
        got = detail_fill(args.engines, args.runs, Path(folder))
    print(
        f"detail fill, one engine's hour from a store of {args.engines} engines' hour ({got['rows']:,.0f} rows, "
        f"written in {got['written_s']:.1f} s): read {got['read_ms']:.1f} ms (thread), "
        f"fill {got['fill_ms']:.1f} ms (event loop); the launch's read of every engine {got['launch_read_ms']:.0f} ms"
    )


if __name__ == "__main__":
    main()
