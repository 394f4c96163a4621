"""Detect, act and serve again for the demo's wedge (issue 38), beside benchmarks/heal_real.py's real engines.

Run by hand: `python benchmarks/heal_demo.py [stall_s, default 30]`.

The demo pool (`--scenario wedge`, its hosts over SSH on loopback) and `poolconsole watch` in this process
with `[remediation]` on for the wedged engine (on_stalled = "restart", grace_s 2, polls each second). A few
seconds in, the engine wedges (/health 200, requests running, no token); times from that moment to the
watcher's notice, its action (`docker restart` on the simulated host) and its "serving again".
"""

from __future__ import annotations

import asyncio
import signal
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from poolconsole.config import parse_config  # noqa: E402
from poolconsole.config.models import EngineRemediation, Remediation  # noqa: E402
from poolconsole.sim.demo import WEDGE_ENGINE, SimPool  # noqa: E402
from tests.helpers.healrig import Watcher  # noqa: E402
from tests.helpers.simpools import answering  # noqa: E402


async def measure(stall_s: float, tmp: Path) -> None:
    pool = SimPool("wedge", seed=5)
    pool.wedge_after_s = 3600.0  # wedged by hand below, at a known moment
    async with answering(pool, tmp / "keys"):
        text = pool.config_toml() + f"\n[alerts]\nstall_s = {stall_s}\n"
        config = parse_config(text, "hosts.toml")
        engines = [
            e.model_copy(update={"remediation": EngineRemediation(on_stalled="restart")})
            if e.name == WEDGE_ENGINE
            else e
            for e in config.engines
        ]
        policy = Remediation(enabled=True, max_actions_per_hour=3, cooldown_s=0.0, grace_s=2.0)
        config = config.model_copy(update={"engines": engines, "remediation": policy})
        async with Watcher(config, tmp) as w:
            await asyncio.sleep(5.0)
            pool.wedge(WEDGE_ENGINE)
            t0 = time.monotonic()
            notice, _ = await w.until(f"restarting {WEDGE_ENGINE} in", timeout_s=stall_s + 60, after=t0)
            acting, _ = await w.until(f"remediation: restart {WEDGE_ENGINE}: ", timeout_s=60, after=notice)
            served, line = await w.until(f"restarted {WEDGE_ENGINE}", timeout_s=240, after=t0)
    print(
        f"demo wedge (stall_s {stall_s:g}): detect {notice - t0:.1f} s, act {acting - t0:.1f} s, "
        f"serving {served - t0:.1f} s\n    {line}",
        flush=True,
    )


def main() -> None:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    stall_s = float(sys.argv[1]) if len(sys.argv) > 1 else 30.0
    asyncio.run(measure(stall_s, Path(tempfile.mkdtemp(prefix="pc-heal-demo-"))))


if __name__ == "__main__":
    main()
