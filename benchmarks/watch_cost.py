"""The watcher's own cost against the console's on the same pool, side by side in one run (issue 37).

    .venv/bin/python benchmarks/watch_cost.py [--nodes 0 32] [--seconds 60] [--rounds 2]

For each pool size it starts `poolconsole demo --serve-only --nodes N` (its own process; N=0 is the seed
pool's 15 targets, N=32 about 143), then runs, interleaved and one at a time, `rounds` times each:

- the console: `poolconsole --config F` in a tmux pane of 160x48 (its own tmux socket), as an operator runs
  it: polling, alerts, the history store beside the config, drawing;
- the watcher: `poolconsole watch --config F --store S` with one webhook [[notify]] to a receiver this
  script serves: polling, alerts, the history store, notifications.

Each run gets its own copy of the config (so its own store), `--warmup` seconds to settle, then its CPU
(utime + stime from /proc over `--seconds`, in % of one core) and its RSS at the end. Printed as a table and
the watcher/console ratio per size; `--json FILE` keeps the figures.
"""

from __future__ import annotations

import argparse
import dataclasses
import http.server
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
from pathlib import Path

VENV_BIN = Path(sys.executable).parent
POOLCONSOLE = str(VENV_BIN / "poolconsole") if (VENV_BIN / "poolconsole").exists() else "poolconsole"
TICKS = os.sysconf("SC_CLK_TCK")
TMUX = ["tmux", "-L", "watch-cost"]


class Receiver(http.server.BaseHTTPRequestHandler):
    received = 0

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        Receiver.received += 1
        self.send_response(200)
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@dataclasses.dataclass(frozen=True)
class Result:
    nodes: int
    targets: int
    cpu_pct: dict[str, float]
    """Program -> mean CPU % of one core over its rounds."""
    rss_mib: dict[str, float]
    """Program -> largest RSS at a round's end."""
    runs: dict[str, list[tuple[float, float]]]


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def start_pool(nodes: int, work: Path) -> tuple[subprocess.Popen[bytes], Path, int]:
    config = work / f"pool-{nodes}.toml"
    pool = subprocess.Popen(
        [POOLCONSOLE, "demo", "--serve-only", "--nodes", str(nodes), "--seed", "7", "--config-out", str(config)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    while not config.exists():
        if pool.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"the demo pool with --nodes {nodes} did not start")
        time.sleep(0.5)
    time.sleep(1.0)
    doc = tomllib.loads(config.read_text())
    targets = len(doc.get("engines", [])) + len(doc.get("hosts", []))
    return pool, config, targets


def run_one(program: str, config: Path, hook: str, work: Path, warmup: float, seconds: float) -> tuple[float, float]:
    """CPU % of one core over `seconds` after `warmup`, and RSS MiB at the end."""
    run_dir = Path(tempfile.mkdtemp(dir=work, prefix=program + "-"))
    copy = run_dir / "hosts.toml"
    copy.write_text(config.read_text() + f'\n[[notify]]\nkind = "webhook"\nurl = "{hook}"\n')
    if program == "console":
        subprocess.run(
            [*TMUX, "new-session", "-d", "-x", "160", "-y", "48", f"{POOLCONSOLE} --config {copy}"], check=True
        )
        out = subprocess.run([*TMUX, "list-panes", "-F", "#{pane_pid}"], capture_output=True, text=True, check=True)
        pid = int(out.stdout.split()[0])
        proc = None
    else:
        proc = subprocess.Popen(
            [POOLCONSOLE, "watch", "--config", str(copy), "--store", str(run_dir / "watch.sqlite3")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        pid = proc.pid
    try:
        time.sleep(warmup)
        before, started = cpu_seconds(pid), time.monotonic()
        time.sleep(seconds)
        used, elapsed = cpu_seconds(pid) - before, time.monotonic() - started
        return 100.0 * used / elapsed, rss_mib(pid)
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=30)
        else:
            subprocess.run([*TMUX, "kill-server"], check=False)
        shutil.rmtree(run_dir, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[0, 32])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--warmup", type=float, default=15.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    hook = f"http://127.0.0.1:{server.server_address[1]}/hook"
    work = Path(tempfile.mkdtemp(prefix="watch-cost-"))
    results: list[Result] = []
    try:
        for nodes in args.nodes:
            pool, config, targets = start_pool(nodes, work)
            try:
                runs: dict[str, list[tuple[float, float]]] = {"console": [], "watch": []}
                for _ in range(args.rounds):
                    for program in ("console", "watch"):
                        runs[program].append(run_one(program, config, hook, work, args.warmup, args.seconds))
                        cpu_pct, rss = runs[program][-1]
                        print(f"  {targets} targets, {program}: {cpu_pct:.1f} % CPU, {rss:.0f} MiB")
            finally:
                pool.terminate()
                pool.wait(timeout=30)
            results.append(
                Result(
                    nodes,
                    targets,
                    {p: statistics.mean(c for c, _ in r) for p, r in runs.items()},
                    {p: max(m for _, m in r) for p, r in runs.items()},
                    runs,
                )
            )
    finally:
        server.shutdown()
        shutil.rmtree(work, ignore_errors=True)
    print(
        f"{'targets':>8} {'console CPU':>12} {'watch CPU':>10} {'watch/console':>14} {'RSS console':>12} {'watch':>6}"
    )
    for r in results:
        cpu, mib = r.cpu_pct, r.rss_mib
        ratio = cpu["watch"] / cpu["console"] if cpu["console"] else float("nan")
        print(
            f"{r.targets:>8} {cpu['console']:>11.1f}% {cpu['watch']:>9.1f}% {ratio:>13.2f}"
            f" {mib['console']:>10.0f}Mi {mib['watch']:>4.0f}Mi"
        )
    print(f"notifications received: {Receiver.received}")
    if args.json:
        args.json.write_text(json.dumps([dataclasses.asdict(r) for r in results], indent=1))


if __name__ == "__main__":
    main()
