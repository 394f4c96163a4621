"""From a fault to a page (issue 37): per rule, on the demo pool, the time from the fault to the notification
at a webhook receiver, beside the goal (one poll interval + the rule's `for` + 5 s).

`python benchmarks/page_latency.py [--poll 1.0] [--stall-s 30] [--throttle-for-s 30] [--pcie-for-s 60]
[--canary-interval-s 1] [--canary-timeout-s 1] [--seed 1]`

The demo pool (sim.demo.SimPool, hosts over real SSH on 127.0.0.1) and `poolconsole watch` (runtime.watch,
in this process, the notifier's own gathering) with one `[[notify]]` webhook to a receiver this script runs.
Once the watcher has polled the healthy pool for a few intervals, seven faults at once, on separate targets:

- down (engine): qwen2.5-coder-3090's process is gone (connections refused);
- down (host): duo5090 stops answering SSH (its engine refuses too, a second engine `down`);
- stalled: qwen3-30b-a3b wedges (/health and /metrics answer, requests running, no token: --scenario wedge);
- gpu_xid and gpu_throttle: tp4's GPU 2 logs an Xid 31 and holds its clocks down (--scenario gpu-fault);
- gpu_ecc: ws48's GPU 0 reports 2 uncorrected ECC errors (SimPool.ecc_fault);
- gpu_pcie: tp4's GPU 1's link trains down to x8 of x16 (SimPool.pcie_fault);
- canary: gpt-oss-120b-spark idles with completions that hang (SimPool.hang), found by the watcher's canary
  (off by default; here canary_interval_s and canary_timeout_s 1 s, so its probe comes within a few polls).

slo_burn is not measured: its windows need 54+ minutes of history.

Each alert's latency is its first firing arrival at the receiver (by alertname and engine, host, gpu) less
the moment its fault was made. The `for` durations are the [alerts] defaults unless given (stall_s 30,
gpu_throttle_for_s 30, gpu_pcie_for_s 60: the run takes about 70 s with them).

`python benchmarks/page_latency.py --false-pages 30` is the other half of the goal, 0 false pages: the watcher
over `--scenario normal` for 30 minutes (no fault made), then every page the receiver got checked against the
history store the watcher wrote (runtime.alerts_audit: the condition held, at its clear level, for the rule's
`for` up to the poll that fired it). It prints the pages by rule and each one the store does not vouch for,
and exits 1 if any. Not run in CI (tests/integration/test_watch_false_pages.py runs 90 s of it)."""

from __future__ import annotations

import argparse
import asyncio
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from aiohttp import web

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from poolconsole.config import parse_config  # noqa: E402
from poolconsole.sim.demo import FAULT_GPU, FAULT_HOST, WEDGE_ENGINE, SimPool  # noqa: E402

DOWN_ENGINE = "qwen2.5-coder-3090"
DOWN_HOST = "duo5090"
ECC_HOST, ECC_GPU = "ws48", 0
PCIE_HOST, PCIE_GPU = "tp4", 1
CANARY_ENGINE = "gpt-oss-120b-spark"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Receiver:
    """A webhook receiver: the first arrival of each firing alert, by (alertname, engine/host, gpu)."""

    def __init__(self) -> None:
        self.port = free_port()
        self.first: dict[tuple[str, str, str], float] = {}
        self.bodies: list[Any] = []
        self.runner: web.AppRunner | None = None

    async def take(self, request: web.Request) -> web.Response:
        at = time.monotonic()
        doc: Any = await request.json()
        self.bodies.append(doc)
        for alert in doc.get("alerts", []) if isinstance(doc, dict) else []:
            labels = alert.get("labels", {})
            if alert.get("status") == "firing":
                key = (
                    labels.get("alertname", ""),
                    labels.get("engine") or labels.get("host", ""),
                    labels.get("gpu", ""),
                )
                self.first.setdefault(key, at)
        return web.Response(text="ok")

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/hook", self.take)
        self.runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self.runner.setup()
        await web.TCPSite(self.runner, "127.0.0.1", self.port).start()

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()


async def run(args: argparse.Namespace) -> int:
    from poolconsole.runtime.alerts_canary import canary
    from poolconsole.runtime.watch import watch

    sim = SimPool("normal", seed=args.seed)
    receiver = Receiver()
    await receiver.start()
    stop = asyncio.Event()
    with tempfile.TemporaryDirectory(prefix="page-latency-") as tmp:
        await sim.start(Path(tmp) / "keys")
        try:
            await sim.wait_ready()
            text = sim.config_toml().replace("poll_interval_s = 1.0", f"poll_interval_s = {args.poll}")
            text += (
                f"\n[alerts]\nstall_s = {args.stall_s}\ngpu_throttle_for_s = {args.throttle_for_s}\n"
                f"gpu_pcie_for_s = {args.pcie_for_s}\ncanary_interval_s = {args.canary_interval_s}\n"
                f"canary_timeout_s = {args.canary_timeout_s}\n"
                f'\n[[notify]]\nkind = "webhook"\nurl = "http://127.0.0.1:{receiver.port}/hook"\n'
                'min_severity = "info"\n'
            )
            config = parse_config(text, "hosts.toml")
            a = config.alerts
            store = Path(tmp) / "history.sqlite3"
            task = asyncio.create_task(watch(config, store, stop, settle_gc=False, companions=[canary]))
            await asyncio.sleep(max(5.0, 5 * args.poll))  # healthy polls first: baselines, nothing to page
            before = dict(receiver.first)
            faults: dict[tuple[str, str, str], tuple[float, float]] = {}  # alert -> (fault at, its `for`)
            at = time.monotonic()
            await sim.engines[DOWN_ENGINE].stop_listening()
            faults[("down", DOWN_ENGINE, "")] = (at, a.down_for_s)
            at = time.monotonic()
            await sim.host_down(DOWN_HOST)
            faults[("down", DOWN_HOST, "")] = (at, a.down_for_s)
            at = time.monotonic()
            sim.wedge(WEDGE_ENGINE)
            faults[("stalled", WEDGE_ENGINE, "")] = (at, a.stall_s)
            at = time.monotonic()
            sim.gpu_fault(FAULT_HOST, FAULT_GPU)
            faults[("gpu_xid", FAULT_HOST, str(FAULT_GPU))] = (at, a.gpu_xid_for_s)
            faults[("gpu_throttle", FAULT_HOST, str(FAULT_GPU))] = (at, a.gpu_throttle_for_s)
            at = time.monotonic()
            sim.ecc_fault(ECC_HOST, ECC_GPU)
            faults[("gpu_ecc", ECC_HOST, str(ECC_GPU))] = (at, a.gpu_ecc_for_s)
            at = time.monotonic()
            sim.pcie_fault(PCIE_HOST, PCIE_GPU)
            faults[("gpu_pcie", PCIE_HOST, str(PCIE_GPU))] = (at, a.gpu_pcie_for_s)
            at = time.monotonic()
            sim.hang(CANARY_ENGINE)
            faults[("canary", CANARY_ENGINE, "")] = (at, a.canary_for_s)
            deadline = time.monotonic() + max(f for _, f in faults.values()) + args.poll + 60
            while time.monotonic() < deadline and not all(k in receiver.first for k in faults):
                await asyncio.sleep(0.1)
            stop.set()
            await asyncio.wait_for(task, 30)
        finally:
            stop.set()
            await sim.stop()
            await receiver.stop()
    print(f"fault -> webhook, demo pool, poll_interval_s = {args.poll} (goal: poll + the rule's for + 5 s)")
    print(f"{'rule':<14}{'target':<22}{'for s':>7}{'goal s':>8}{'measured s':>12}  ok")
    failed = 0
    for (rule, target, gpu), (at, hold) in faults.items():
        goal = args.poll + hold + 5.0
        got = receiver.first.get((rule, target, gpu))
        shown = "none" if got is None else f"{got - at:.2f}"
        ok = got is not None and got - at <= goal
        failed += not ok
        name = f"{target} gpu{gpu}" if gpu else target
        print(f"{rule:<14}{name:<22}{hold:>7.0f}{goal:>8.1f}{shown:>12}  {'yes' if ok else 'NO'}")
    if before:
        print(f"(paged before the faults: {sorted(before)})")
    return 1 if failed else 0


async def false_pages(args: argparse.Namespace) -> int:
    """The watcher over --scenario normal for args.false_pages minutes, then every page against the store."""
    from poolconsole.runtime.alerts_audit import audit, pages_of
    from poolconsole.runtime.watch import watch

    sim = SimPool("normal", seed=args.seed)
    receiver = Receiver()
    await receiver.start()
    stop = asyncio.Event()
    with tempfile.TemporaryDirectory(prefix="false-pages-") as tmp:
        store = Path(tmp) / "history.sqlite3"
        await sim.start(Path(tmp) / "keys")
        try:
            await sim.wait_ready()
            text = sim.config_toml().replace("poll_interval_s = 1.0", f"poll_interval_s = {args.poll}")
            text += f'\n[[notify]]\nkind = "webhook"\nurl = "http://127.0.0.1:{receiver.port}/hook"\n'
            config = parse_config(text, "hosts.toml")
            task = asyncio.create_task(watch(config, store, stop, settle_gc=False))
            started = time.monotonic()
            await asyncio.sleep(args.false_pages * 60)
            stop.set()
            await asyncio.wait_for(task, 60)
            ran = time.monotonic() - started
        finally:
            stop.set()
            await sim.stop()
            await receiver.stop()
        pages = pages_of(receiver.bodies)
        findings = audit(store, pages, config.alerts, [h.name for h in config.hosts])
    by_rule: dict[str, int] = {}
    for page in pages:
        by_rule[page.alertname] = by_rule.get(page.alertname, 0) + 1
    print(f"--scenario normal, {ran / 60:.1f} min, poll_interval_s = {args.poll}, seed {args.seed}")
    print(f"pages: {len(pages)} ({', '.join(f'{r} {n}' for r, n in sorted(by_rule.items())) or 'none'})")
    print(f"false pages (not held in the store for their `for`): {len(findings)}")
    for finding in findings:
        print(f"  {finding}")
    return 1 if findings else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--poll", type=float, default=1.0, help="poll_interval_s (the demo's: 1.0)")
    parser.add_argument("--stall-s", type=float, default=30.0, help="[alerts] stall_s (default 30)")
    parser.add_argument("--throttle-for-s", type=float, default=30.0, help="[alerts] gpu_throttle_for_s (30)")
    parser.add_argument("--pcie-for-s", type=float, default=60.0, help="[alerts] gpu_pcie_for_s (60)")
    parser.add_argument("--canary-interval-s", type=float, default=1.0, help="[alerts] canary_interval_s (1)")
    parser.add_argument("--canary-timeout-s", type=float, default=1.0, help="[alerts] canary_timeout_s (1)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--false-pages", type=float, metavar="MINUTES", help="0 false pages over --scenario normal")
    args = parser.parse_args()
    return asyncio.run(false_pages(args) if args.false_pages else run(args))


if __name__ == "__main__":
    raise SystemExit(main())
