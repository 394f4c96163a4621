"""The watcher's heal behind a real gateway (issue 38): how many of the gateway's callers' requests fail while
`poolconsole watch` restarts an engine by itself, with the router settings the Plan prints and without retries.

Run by hand: `python benchmarks/heal_gateway.py [killed|wedged ...]` (default both; about 1.5 minutes a run).

Each run: tests.helpers.healgateway's pool (llama-server `llama` under supervisord over a loopback sshd, a
second llama-server `b`, both serving `tiny` through LiteLLM 1.108.7 without a database), the watcher with
`on_down = "restart"` (polls each 1 s, HTTP timeout 2 s, grace_s 2); a client sends a request through the
gateway each 0.2 s from 1 s before the fault until 2 s after the watcher says it serves again. Faults: killed
(`kill -9`, supervisord's autorestart off) and wedged (`kill -STOP`). Router settings: the Plan's (num_retries
3, allowed_fails 1, cooldown_time 30, a fallback group on b) and `num_retries: 0`."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.helpers.healgateway import client, gateway_heal_rig  # noqa: E402
from tests.helpers.healrig import ENGINE, Watcher  # noqa: E402
from tests.integration.test_drain_real import PLANNED  # noqa: E402

ROUTERS = {"planned": PLANNED, "no retries": "router_settings: {num_retries: 0}"}


async def measure(case: str, router: str, tmp: Path) -> dict[str, object]:
    with gateway_heal_rig(tmp, policy='on_down = "restart"', router=ROUTERS[router]) as (rig, gw):
        async with Watcher(rig.config(), tmp) as w:
            await asyncio.sleep(3.0)
            stop = asyncio.Event()
            sending = asyncio.create_task(client(gw, stop))
            await asyncio.sleep(1.0)
            os.kill(rig.supervisor.pid(ENGINE), signal.SIGKILL if case == "killed" else signal.SIGSTOP)
            t0 = time.monotonic()
            notice, _ = await w.until("if it still holds", timeout_s=120, after=t0)
            acting, _ = await w.until(f"restart {ENGINE}: ", timeout_s=180, after=notice + 0.01)
            served, line = await w.until(f"restarted {ENGINE}", timeout_s=300, after=t0)
            await asyncio.sleep(2.0)
            stop.set()
            failed, sent = await sending
    return {
        "case": case,
        "router": router,
        "detect_s": round(notice - t0, 1),
        "act_s": round(acting - t0, 1),
        "serving_s": round(served - t0, 1),
        "failed": failed,
        "sent": sent,
        "line": line,
    }


def main() -> None:
    # a `timeout` or kill -TERM still stops the engines, supervisord, sshd and LiteLLM it started (finally)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    cases = sys.argv[1:] or ["killed", "wedged"]
    unknown = [c for c in cases if c not in ("killed", "wedged")]
    if unknown:
        sys.exit(f"unknown case(s) {', '.join(unknown)}: killed, wedged")
    rows = []
    for case in cases:
        for router in ROUTERS:
            tmp = Path(tempfile.mkdtemp(prefix=f"pc-heal-gw-{case}-"))
            row = asyncio.run(measure(case, router, tmp))
            rows.append(row)
            print(f"{case}, {router}: detect {row['detect_s']} s, act {row['act_s']} s, serving {row['serving_s']} s; "
                  f"{row['failed']} of {row['sent']} requests failed", flush=True)  # fmt: skip
            print(f"    {row['line']}", flush=True)
    out = Path(tempfile.gettempdir()) / "heal_gateway.json"
    out.write_text(json.dumps(rows, indent=1) + "\n")
    print(f"rows: {out}")


if __name__ == "__main__":
    main()
