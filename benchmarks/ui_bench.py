"""Console benchmark (issue 5), run by hand: `python benchmarks/ui_bench.py [NODES] [SECONDS]`.

The demo pool with 64 extra nodes runs in a child process (`poolconsole demo --serve-only`), so its CPU
is not charged to the console. The console (headless, the real app with live polling at a 1 s
refresh) runs here for two minutes. Printed: the console process's CPU share of one core, the mean
and max time to apply one poll result to the model, and resident memory at start and end.

UI_BENCH_LOOP=uvloop runs the same on uvloop where installed (measured ~5 % less CPU: not adopted); UI_BENCH_GC=1 also
prints the number of objects the cyclic collector tracks every 30 s (to tell garbage from a leak).
UI_BENCH_POOL=PATH polls a demo pool already running with that config (`poolconsole demo --serve-only
--config-out PATH`) instead of starting one: benchmarks/ui_ab.sh runs two consoles side by side on one pool.

`python benchmarks/ui_bench.py refresh [ROUNDS]` (issue 16 item 5): no pool, no polling; the overview's cost of one
refresh at 64 and 1,000 engines side by side (refresh_rows, the grid's visible lines, the summary, a filter key).
"""

from __future__ import annotations

import asyncio
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from poolconsole.config import load_config  # noqa: E402
from poolconsole.runtime.live import ApplyTimes  # noqa: E402
from poolconsole.ui.app import PoolApp  # noqa: E402


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def main(nodes: int, seconds: float) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        config_path = Path(tmp) / "pool.toml"
        if os.environ.get("UI_BENCH_POOL"):  # a pool already running (A/B runs share one): its config
            config_path = Path(os.environ["UI_BENCH_POOL"])
        sim = (
            None
            if os.environ.get("UI_BENCH_POOL")
            else subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "poolconsole",
                    "demo",
                    "--serve-only",
                    "--nodes",
                    str(nodes),
                    "--config-out",
                    str(config_path),
                ],
                stdout=subprocess.DEVNULL,
            )
        )
        try:
            deadline = time.monotonic() + 120
            while not config_path.exists():
                if time.monotonic() > deadline or (sim and sim.poll() is not None):
                    raise RuntimeError("the demo pool did not start")
                await asyncio.sleep(0.2)
            config = load_config(config_path)
            app = PoolApp(config, theme_state=Path(tmp) / "ui.json")
            async with app.run_test(size=(160, 45)):
                await asyncio.sleep(10)  # connections up, first polls done
                app.runtime.update_times = ApplyTimes()
                rss_start = rss_mib()
                cpu0, wall0, times0 = time.process_time(), time.monotonic(), os.times()
                rss_trace = []
                for _ in range(int(seconds // 30)):
                    await asyncio.sleep(30)
                    rss_trace.append(rss_mib())
                    if os.environ.get("UI_BENCH_GC"):
                        import gc

                        print(f"  {len(gc.get_objects())} objects tracked, gc counts {gc.get_count()}", flush=True)
                await asyncio.sleep(seconds % 30)
                cpu, wall, times1 = time.process_time() - cpu0, time.monotonic() - wall0, os.times()
                rss_end = rss_mib()
                updates = app.runtime.update_times
                states = {t.view.state for t in app.state.engines.values() if t.view}
        finally:
            if sim:
                sim.send_signal(signal.SIGINT)
                sim.wait(30)
    targets = len(config.engines) + len(config.hosts)
    print(
        f"console on {len(config.engines)} engines + {len(config.hosts)} hosts ({targets} poll loops, 1 s refresh), "
        f"{wall:.0f} s measured"
    )
    user, system = times1.user - times0.user, times1.system - times0.system
    print(
        f"CPU: {cpu:.1f} s of {wall:.0f} s = {cpu / wall * 100:.1f}% of one core (target <= 5%): "
        f"user {user / wall * 100:.1f}%, kernel {system / wall * 100:.1f}%"
    )
    print(
        f"apply one update: mean {updates.total_s / max(1, updates.count) * 1e3:.3f} ms, "
        f"max {updates.max_s * 1e3:.2f} ms "
        f"over {updates.count} updates ({updates.count / wall:.0f}/s)"
    )
    print(
        f"RSS: {rss_start:.0f} MiB at start, every 30 s {' '.join(f'{r:.0f}' for r in rss_trace)}, "
        f"{rss_end:.0f} MiB at end (max RSS "
        f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB); engine states seen {sorted(states)}"
    )
    print(f"pid {os.getpid()}")


async def refresh_cost(engines: int, rounds: int, every: int, size: tuple[int, int] = (200, 50)) -> dict[str, float]:
    """One overview refresh on the big capture-based pool (tests/helpers/bigpool.py), headless and with no
    polling: each round every `every`-th target gets its next poll (applied outside the clock), then
    OverviewScreen.refresh_rows and the grid's visible lines are timed. Mean ms per refresh."""
    from poolconsole.model.summary import summarise
    from poolconsole.ui.grid import PoolGrid
    from poolconsole.ui.screens.overview import OverviewScreen
    from tests.helpers import bigpool, uipool

    cfg = bigpool.config(engines)
    pages = bigpool.Pages()
    now = [uipool.T0]
    with tempfile.TemporaryDirectory() as tmp:
        app = PoolApp(cfg, live=False, clock=lambda: now[0], theme_state=Path(tmp) / "ui.json")
        async with app.run_test(size=size) as pilot:
            totals = {"refresh_rows": 0.0, "summarise": 0.0, "draw visible": 0.0, "filter key": 0.0}
            for step in range(rounds + 2):
                now[0] = uipool.T0 + step
                hosts, snaps = bigpool.polls(cfg, pages, step, 1 if step < 2 else every)
                for host in hosts:
                    app.apply_host(host)
                for snap in snaps:
                    app.apply_engine(snap)
                screen = app.screen
                assert isinstance(screen, OverviewScreen)
                grid = screen.query_one(PoolGrid)
                t0 = time.perf_counter()
                screen.refresh_rows()
                t1 = time.perf_counter()
                for y in range(grid.size.height):
                    grid.render_line(y)
                t2 = time.perf_counter()
                summarise(app.state, app.alerts)
                t3 = time.perf_counter()
                await pilot.pause()
                if step >= 2:  # the first two rounds build everything (the first frame): not counted
                    totals["refresh_rows"] += t1 - t0
                    totals["draw visible"] += t2 - t1
                    totals["summarise"] += t3 - t2
            screen = app.screen
            assert isinstance(screen, OverviewScreen)
            for round_ in range(rounds):  # a keystroke in the filter box: the rows matching it
                screen.filter_text = "e00"[: 1 + round_ % 3]
                t0 = time.perf_counter()
                screen.refresh_rows()
                totals["filter key"] += time.perf_counter() - t0
            screen.filter_text = ""
    return {k: v / rounds * 1e3 for k, v in totals.items()}


async def refresh_main(rounds: int) -> None:
    """`python benchmarks/ui_bench.py refresh [ROUNDS]`: the overview's per-refresh cost at 64 and 1,000
    engines side by side (4 engines and 16 GPUs a host), every target new each refresh (a 1 s poll) and an
    eighth of them (a 2 s refresh over a 15 s Prometheus scrape)."""
    for every in (1, 8):
        small = await refresh_cost(64, rounds, every)
        big = await refresh_cost(1000, rounds, every)
        changed = "every target" if every == 1 else f"1 in {every} targets"
        print(f"overview refresh, {changed} polled since the last, mean of {rounds} (ms):")
        print(f"  {'':16} {'64 engines':>11} {'1000 engines':>13} {'ratio':>6}")
        for key in small:
            ratio = big[key] / small[key] if small[key] else float("nan")
            print(f"  {key:16} {small[key]:11.2f} {big[key]:13.2f} {ratio:6.1f}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "refresh":
        asyncio.run(refresh_main(int(sys.argv[2]) if len(sys.argv) > 2 else 20))
        sys.exit(0)
    if os.environ.get("UI_BENCH_LOOP") == "uvloop":
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 64, float(sys.argv[2]) if len(sys.argv) > 2 else 120))
