"""What holds the console's event loop, and how late does it make the polls? (issue 35: "every healthy
target updated within one cycle")

`python benchmarks/loop_stalls.py [--config hosts.toml] [--minutes 5] [--size 160x48] [--stall-ms 150]`

The whole console (ui.app.PoolApp, headless through `run_test`) watches a pool: the live demo pool
(sim.demo.SimPool, seed 7, hosts over SSH) or `--config`'s. Beside it:
- a heartbeat on the event loop, every 20 ms, and a watchdog thread that, once the heartbeat is older than
  `--stall-ms`, samples the loop thread's stack every 5 ms until it beats again: each stall's length and the
  frames it spent its time in;
- the control: the same heartbeat and watchdog alone in a process of their own over the same minutes, whose
  stalls are the machine's (a core not given in time) and not the console's;
- the cyclic collector's pauses (gc.callbacks), by generation;
- each target's gaps between two consecutive applied polls (the runtime's updates, as the store records
  them), judged against 1.5 poll intervals as the chaos soak judges them.

Printed: the stalls by length, with the loop thread's CPU time during them (a stall the loop thread spent on
a core is the console's own work; one it spent waiting is the machine's) and the other threads' CPU time
during them, the control's stalls, the code lines that held the loop longest in them (the innermost frame of
poolconsole, textual or rich, and the outermost of the callback), the collector's pauses, and the gaps:
the worst target's longest and p99, and how many gaps exceeded 1.5 intervals.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from poolconsole.config import parse_config  # noqa: E402
from poolconsole.runtime.live import Update  # noqa: E402
from poolconsole.sim.demo import SimPool  # noqa: E402
from poolconsole.ui.app import PoolApp  # noqa: E402

BEAT_S = 0.02
SAMPLE_S = 0.005
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
OURS = ("/poolconsole/", "/textual/", "/rich/", "/asyncssh/", "/httpx/", "/httpcore/", "/sqlite3/")


def where(frame: FrameType | None) -> str:
    """The innermost frame of ours or of the UI libraries, with the outermost poolconsole frame above it."""
    stack = traceback.extract_stack(frame)
    inner = next((f for f in reversed(stack) if any(part in f.filename for part in OURS)), stack[-1] if stack else None)
    outer = next((f for f in stack if "/poolconsole/" in f.filename), None)

    def short(f: traceback.FrameSummary | None) -> str:
        if f is None:
            return "?"
        name = f.filename
        for part in OURS:
            if part in name:
                name = part.strip("/") + "/" + name.split(part, 1)[1]
                break
        return f"{name}:{f.lineno} {f.name}"

    return f"{short(inner)}  <- {short(outer)}"


def thread_cpu_s(native_id: int) -> float:
    """CPU time (user + system) of one thread of this process, from /proc: the loop thread's own work
    during a stall, against the wall time it lasted (the rest is waiting for a core, or for the GIL)."""
    with open(f"/proc/self/task/{native_id}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def threads_cpu_s(leave_out: tuple[int, ...]) -> dict[str, float]:
    """Each live Python thread's CPU seconds, by its name (a thread that ended is left out, and those whose
    native ids are in `leave_out`)."""
    out: dict[str, float] = {}
    for thread in threading.enumerate():
        if thread.native_id is not None and thread.native_id not in leave_out:
            with contextlib.suppress(FileNotFoundError, ProcessLookupError):  # it ended meanwhile
                out[thread.name] = out.get(thread.name, 0.0) + thread_cpu_s(thread.native_id)
    return out


@dataclass
class Watchdog:
    stall_s: float
    loop_thread: int = 0
    loop_native: int = 0
    beat: float = field(default_factory=time.monotonic)
    stalls: list[float] = field(default_factory=list)
    working: list[float] = field(default_factory=list)
    """The loop thread's CPU seconds during each stall."""
    others: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))
    """The other threads' CPU seconds during the stalls, by thread name."""
    held: Counter[str] = field(default_factory=Counter)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        while not self.stop.is_set():
            time.sleep(SAMPLE_S)
            late = time.monotonic() - self.beat
            if late < self.stall_s:
                continue
            began = self.beat
            cpu_then = thread_cpu_s(self.loop_native)
            mine = (self.loop_native, threading.get_native_id())
            threads_then = threads_cpu_s(mine)
            seen: Counter[str] = Counter()
            while self.beat == began and not self.stop.is_set():
                frame = sys._current_frames().get(self.loop_thread)
                seen[where(frame)] += 1
                time.sleep(SAMPLE_S)
            self.stalls.append(time.monotonic() - began)
            self.working.append(thread_cpu_s(self.loop_native) - cpu_then)
            for name, cpu in threads_cpu_s(mine).items():
                self.others[name] += cpu - threads_then.get(name, 0.0)
            for line, n in seen.items():
                self.held[line] += n


@dataclass
class Collector:
    started: float = 0.0
    pauses: dict[int, list[float]] = field(default_factory=lambda: defaultdict(list))

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self.started = time.perf_counter()
        else:
            self.pauses[int(info["generation"])].append(time.perf_counter() - self.started)


async def beat(dog: Watchdog, minutes: float) -> None:
    """The heartbeat on this event loop for `minutes`, the watchdog thread beside it."""
    watcher = threading.Thread(target=dog.run, daemon=True)
    watcher.start()
    end = time.monotonic() + minutes * 60
    while time.monotonic() < end:
        dog.beat = time.monotonic()
        await asyncio.sleep(BEAT_S)
    dog.stop.set()


async def control(args: argparse.Namespace) -> None:
    """The control: the heartbeat and its watchdog alone, in a process that does nothing else, over the same
    minutes. Its stalls are the machine's (a core not given in time), not the console's."""
    dog = Watchdog(args.stall_ms / 1000, threading.get_ident(), threading.get_native_id())
    await beat(dog, args.minutes)
    print(json.dumps(dog.stalls))


async def run(args: argparse.Namespace) -> None:
    width, height = (int(n) for n in args.size.split("x"))
    with tempfile.TemporaryDirectory() as tmp:
        pool = None if args.config else SimPool(scenario="normal", seed=7)
        if pool is not None:
            await pool.start(Path(tmp) / "keys")
        try:
            if pool is not None:
                await pool.wait_ready()
                text = pool.config_toml()
            else:
                text = args.config.read_text()
            config = parse_config(text)
            interval = config.settings.poll_interval_s
            app = PoolApp(config, theme_state=Path(tmp) / "ui.json", subtitle="stalls", store=Path(tmp) / "h.sqlite3")
            app.audit_path = Path(tmp) / "audit.sqlite3"
            app.smoke_db = Path(tmp) / "smoke.sqlite3"
            seen: dict[str, list[float]] = defaultdict(list)

            def heard(update: Update) -> None:
                """A healthy target's applied poll (a hostile or down target's gaps are its timeouts)."""
                if update.kind == "engine":
                    track = app.state.engines.get(update.target)
                    healthy = track is not None and track.view is not None and track.view.state == "ok"
                elif update.kind == "host":
                    host = app.state.hosts.get(update.target)
                    healthy = host is not None and host.snapshot is not None and host.snapshot.state == "ok"
                else:
                    return
                if healthy:
                    seen[update.target].append(time.monotonic())

            app.source.subscribe(heard)
            dog = Watchdog(args.stall_ms / 1000, threading.get_ident(), threading.get_native_id())
            collector = Collector()
            async with app.run_test(size=(width, height)):
                await asyncio.sleep(args.warmup)
                for times in seen.values():
                    times.clear()
                gc.callbacks.append(collector)
                control = subprocess.Popen(
                    [sys.executable, __file__, "--control", "--minutes", str(args.minutes), "--stall-ms",
                     str(args.stall_ms)], stdout=subprocess.PIPE, text=True,
                )  # fmt: skip
                await beat(dog, args.minutes)
                gc.callbacks.remove(collector)
                alone = json.loads(control.communicate()[0])
            report(args, dog, collector, seen, interval)
            band_lines("the same heartbeat alone in a process of its own (the machine's share)", alone, None)
        finally:
            if pool is not None:
                await pool.stop()


def band_lines(title: str, stalls: list[float], working: list[float] | None) -> None:
    """How many stalls of each length, their total, and (for the console) the loop thread's CPU share of them."""
    ordered = sorted(stalls)
    print(
        f"{title}: {len(stalls)}; total {sum(stalls):.2f} s"
        + (
            f"; longest {ordered[-1] * 1000:.0f} ms, median {statistics.median(ordered) * 1000:.0f} ms"
            if stalls
            else ""
        )
    )
    for low, high in ((0.15, 0.3), (0.3, 0.5), (0.5, 1.0), (1.0, 99.0)):
        inside = [s for s in stalls if low <= s < high]
        line = f"  {low * 1000:4.0f}-{high * 1000:5.0f} ms: {len(inside)}"
        if working is not None:
            cpu = sum(w for s, w in zip(stalls, working, strict=True) if low <= s < high)
            line += f", the loop thread on a core {100 * cpu / (sum(inside) or 1):.0f}% of it"
        print(line)


def report(
    args: argparse.Namespace, dog: Watchdog, collector: Collector, seen: dict[str, list[float]], interval: float
) -> None:
    print(f"{args.minutes} min at {args.size}, poll every {interval} s, {len(seen)} targets")
    band_lines(f"the console's loop stalls over {args.stall_ms:.0f} ms", dog.stalls, dog.working)
    ranked = sorted(dog.others.items(), key=lambda item: -item[1])[:6]
    busy = ", ".join(f"{name} {cpu:.2f} s" for name, cpu in ranked if cpu > 0)
    print(f"the other threads' CPU during the stalls: {busy or 'none'}")
    total = sum(dog.held.values()) or 1
    print(f"where the loop was held ({total} samples of {SAMPLE_S * 1000:.0f} ms):")
    for line, n in dog.held.most_common(args.top):
        print(f"  {100 * n / total:5.1f}%  {line}")
    for gen, pauses in sorted(collector.pauses.items()):
        print(
            f"gc generation {gen}: {len(pauses)} runs, total {sum(pauses):.2f} s, longest {max(pauses) * 1000:.0f} ms"
        )
    worst = ("", 0.0)
    over = 0
    p99s = []
    for target, times in seen.items():
        gaps = [b - a for a, b in itertools.pairwise(times)]
        if not gaps:
            continue
        over += sum(g > 1.5 * interval for g in gaps)
        if max(gaps) > worst[1]:
            worst = (target, max(gaps))
        p99s.append(statistics.quantiles(gaps, n=100)[98] if len(gaps) >= 100 else max(gaps))
    print(
        f"gaps between applied polls: longest {worst[1]:.2f} s ({worst[0]}), p99 of the worst target "
        f"{max(p99s, default=0):.2f} s, gaps over {1.5 * interval:.2f} s: {over}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=Path, default=None, help="watch this hosts.toml's pool instead of the demo")
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--warmup", type=float, default=10.0, help="seconds before measuring")
    parser.add_argument("--size", default="160x48")
    parser.add_argument("--stall-ms", type=float, default=150.0)
    parser.add_argument("--top", type=int, default=20)
    parser.add_argument("--control", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    asyncio.run(control(args) if args.control else run(args))


if __name__ == "__main__":
    main()
