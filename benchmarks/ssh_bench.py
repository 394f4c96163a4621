"""SSH benchmark (issue 3), run by hand as root: `python benchmarks/ssh_bench.py [HOSTS] [CYCLES]`.

One poll cycle of 32 hosts over real sshd instances on loopback, with persistent connections (the
console's way) against a new connection per poll, measured side by side in one run: wall time per
cycle and the console process's CPU time per cycle. The hosts are meminfo-only (`cat /proc/meminfo`
after the probe), so the numbers are SSH's own cost, not a GPU tool's.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from poolconsole.collect.hosts.poll import HostPoller  # noqa: E402
from poolconsole.collect.ssh import SSHPool  # noqa: E402
from poolconsole.config import parse_config  # noqa: E402
from poolconsole.model.hosts import HostState  # noqa: E402
from tests.helpers.sshd import Lab  # noqa: E402


async def cycle(pollers: list[HostPoller]) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    snaps = await asyncio.gather(*(p.poll() for p in pollers))
    bad = [s.error for s in snaps if s.state is not HostState.OK]
    if bad:
        raise RuntimeError(f"{len(bad)} hosts failed: {bad[:3]}")
    return time.perf_counter() - wall, time.process_time() - cpu


async def main(hosts: int, cycles: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        lab = Lab(Path(tmp))
        try:
            for i in range(hosts):
                lab.add(f"h{i:02d}", {}, ())
            config = parse_config(lab.toml().replace("ssh_timeout_s = 3.0", "ssh_timeout_s = 30.0"))
            concurrency = hosts
            pool = SSHPool(config.hosts, 30.0, concurrency)
            persistent = [HostPoller(h, pool[h.name]) for h in config.hosts]
            await cycle(persistent)  # connect and probe once
            kept = [await cycle(persistent) for _ in range(cycles)]
            await pool.close()
            fresh: list[tuple[float, float]] = []
            for _ in range(cycles):
                pool = SSHPool(config.hosts, 30.0, concurrency)
                pollers = [HostPoller(h, pool[h.name]) for h in config.hosts]
                fresh.append(await cycle(pollers))
                await pool.close()
        finally:
            lab.stop()
    for label, runs in (("persistent connections", kept), ("reconnect every poll", fresh)):
        walls = [w for w, _ in runs]
        cpus = [c for _, c in runs]
        print(
            f"{label:24s} {hosts} hosts: wall median {statistics.median(walls) * 1000:7.1f} ms "
            f"(min {min(walls) * 1000:.1f}), console CPU median {statistics.median(cpus) * 1000:7.1f} ms per cycle"
        )
    ratio_wall = statistics.median(w for w, _ in fresh) / statistics.median(w for w, _ in kept)
    ratio_cpu = statistics.median(c for _, c in fresh) / statistics.median(c for _, c in kept)
    print(f"reconnect / persistent: wall x{ratio_wall:.1f}, CPU x{ratio_cpu:.1f} ({cycles} cycles each)")


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 32, int(sys.argv[2]) if len(sys.argv) > 2 else 5))
