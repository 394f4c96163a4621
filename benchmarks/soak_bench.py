"""A day of polls in minutes (issue 14): is the runtime's memory flat, and what does the recorder cost?

`python benchmarks/soak_bench.py [ENGINES] [HOURS]` (default 32 engines, 24 simulated hours).

The headless runtime (runtime.live.LivePool: pool state, history, alerts, reset-safe totals, the
subscribers' updates) applies one poll per engine per simulated second, and the history store
(runtime.store.Store, its own SQLite file) records every one, as the console does. Time is compressed:
the clock is injected and jumps one second per round, so a day runs in a few minutes. Each poll is a
real vLLM 0.32.0 CPU page (tests/fixtures/real), parsed once, with the counters grown per poll. Every
engine's queue flaps 8 -> 0 every 3 s (the alert storm of the peers harness: the queue rule fires and
clears all day), and each engine restarts (a counter reset) every simulated hour.

Printed: resident memory (RSS) and the number of objects the garbage collector tracks every simulated
hour, the store file's size, and the CPU per applied poll split into the runtime's part and the
recorder's part (the Recorder call plus the writer's commits and retention, measured in this thread with
background=False), with what the recorder costs at 143 targets polled every second.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import resource
import sys
import tempfile
import time
from pathlib import Path
from types import MappingProxyType

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from poolconsole.collect.engines import specs  # noqa: E402
from poolconsole.collect.engines.mapping import parse_metrics  # noqa: E402
from poolconsole.config import parse_config  # noqa: E402
from poolconsole.config.models import EngineKind  # noqa: E402
from poolconsole.model.snapshots import EngineMetrics, EngineSnapshot, EngineState  # noqa: E402
from poolconsole.runtime.live import LivePool, Update  # noqa: E402
from poolconsole.runtime.store import Store  # noqa: E402

CAPTURE = ROOT / "tests/fixtures/real/vllm-0.32.0-cpu"
T0 = 1_800_000_000.0
COUNTERS = ("generation_tokens_total", "prompt_tokens_total", "request_success_total")


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


def config_text(engines: int) -> str:
    return "".join(
        f'[[engines]]\nname = "e{i:03d}"\nkind = "vllm"\nurl = "http://127.0.0.1:{20000 + i}"\n\n'
        for i in range(engines)
    )


def base_metrics() -> EngineMetrics:
    metrics, _, _ = parse_metrics((CAPTURE / "metrics.load.txt").read_bytes(), specs.VLLM)
    return metrics


def snapshot(name: str, metrics: EngineMetrics, second: int, restarts: int) -> EngineSnapshot:
    values = dict(metrics.values)
    since = second - restarts * 3600  # the counters start again at each restart
    for counter in COUNTERS:
        if counter in values:
            values[counter] = values[counter] + since * 50.0
    values["requests_waiting"] = 8.0 if second % 6 < 3 else 0.0  # the queue flaps: the alert storm
    grown = dataclasses.replace(metrics, values=MappingProxyType(values))
    return EngineSnapshot(
        name=name,
        kind=EngineKind.VLLM,
        url="http://127.0.0.1:1",
        host=None,
        fetched_at=T0 + second,
        monotonic=float(second),
        state=EngineState.OK,
        source="GET /metrics",
        latency_s=0.002,
        version="0.32.0",
        models=("tiny",),
        metrics=grown,
        restart_marker=str(restarts),
    )


async def main(engines: int = 32, hours: float = 24.0) -> None:
    """On an event loop, as the runtime always runs (it spawns its side tasks there)."""
    config = parse_config(config_text(engines))
    clock = [T0]
    metrics = base_metrics()
    names = [e.name for e in config.engines]
    updates = [0]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "soak.db"
        store = Store(path, clock=lambda: clock[0], background=False)
        live = LivePool(config, clock=lambda: clock[0], recorder=store)

        def counted(update: Update) -> None:
            updates[0] += 1

        live.subscribe(counted)
        seconds = int(hours * 3600)
        runtime_cpu = recorder_cpu = 0.0
        start_rss = None
        print(f"{engines} engines, {hours:g} simulated hours, one poll per engine per second")
        print(f"{'hour':>5} {'RSS MB':>7} {'objects':>9} {'store MB':>9}")
        for second in range(seconds + 1):
            clock[0] = T0 + second
            restarts = second // 3600
            started = time.process_time()
            for name in names:
                live.apply_engine(snapshot(name, metrics, second, restarts))
            middle = time.process_time()
            store.flush()  # the writer thread's 1 s commit, here in this thread so its CPU is counted
            if second % 60 == 0:
                store.retain_step(2000)
            recorder_cpu += time.process_time() - middle
            runtime_cpu += middle - started
            if second % 3600 == 0:
                gc.collect()
                objects = len(gc.get_objects())
                rss = rss_mb()
                start_rss = start_rss if start_rss is not None else rss
                size = sum(p.stat().st_size for p in Path(tmp).iterdir()) / 2**20
                print(f"{second // 3600:>5} {rss:>7.1f} {objects:>9} {size:>9.1f}", flush=True)
        store.close()
        polls = engines * (seconds + 1)
        # The Recorder call itself runs inside apply_engine; time it apart on a fresh store.
        probe = Store(Path(tmp) / "probe.db", clock=lambda: clock[0], background=False)
        view = live.state.engines[names[0]].view
        assert view is not None
        totals = live.state.engines[names[0]].totals
        began = time.process_time()
        for i in range(20000):
            probe.engine(view, dict(totals), T0 + seconds + i)  # with the copy apply_engine makes for it
        call = (time.process_time() - began) / 20000
        probe.close()
    per_poll_runtime = (runtime_cpu / polls - call) * 1e6
    per_poll_recorder = (recorder_cpu / polls + call) * 1e6
    print(
        f"CPU per applied poll: runtime {per_poll_runtime:.0f} us (state, history, alerts, totals, "
        f"{updates[0]} updates to subscribers), recorder {per_poll_recorder:.0f} us (of which the call on the "
        f"event loop {call * 1e6:.1f} us); the recorder at 143 targets every second: "
        f"{per_poll_recorder * 143 / 1e4:.2f} % of one core"
    )
    print(f"RSS {start_rss:.1f} MB at hour 0, {rss_mb():.1f} MB at the end")


if __name__ == "__main__":
    args = sys.argv[1:]
    asyncio.run(main(int(args[0]) if args else 32, float(args[1]) if len(args) > 1 else 24.0))
