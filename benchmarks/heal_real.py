"""How long the watcher's remediation takes to notice, act and see a real engine serve again (issue 38).

Run by hand: `python benchmarks/heal_real.py [case ...]` (cases: wedged, killed, crash_loop; default all).

Each case: a real llama-server (the tests' tiny GGUF) under a real supervisord, reached over a loopback sshd;
`poolconsole watch` in this process with `[remediation]` on (poll each 1 s, HTTP timeout 2 s, grace_s 2,
cooldown 0, 3 actions an hour). Times are from the fault to the watcher's lines:
- wedged: `kill -STOP` of the llama-server; on_down = "restart" (supervisord SIGKILLs the stopped process after
  stopwaitsecs 2 s, then starts it);
- killed: `kill -9` with supervisord's autorestart off, so only poolconsole brings it back; on_down = "restart";
- crash_loop: after an operator's rollover f32 -> f16, the profile file is made to name a model that is not
  there (the engine exits at start: supervisord's spawn error) and the engine is killed; restarting does not
  help, so the ladder climbs to on_crash_loop = "rollback", back to f32 (the rollover's profile_from).
detect: the notice ("restarting X in 2 s if it still holds"); act: the action starts; serving: the watcher's
"restarted/rolled back X ... serving again"; checked: a chat answer from the engine seen by this script.
"""

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

from poolconsole.ops import audit  # noqa: E402
from poolconsole.workflows import rollover  # noqa: E402
from poolconsole.workflows.workspace import Workspace  # noqa: E402
from tests.helpers.healrig import ENGINE, Rig, Watcher, heal_rig, serves  # noqa: E402

POLICY = {
    "wedged": 'on_down = "restart"\non_stalled = "restart"',
    "killed": 'on_down = "restart"',
    "crash_loop": 'on_down = "restart"\non_crash_loop = "rollback"',
}


async def fault(case: str, rig: Rig) -> None:
    pid = rig.supervisor.pid(ENGINE)
    if case == "wedged":
        os.kill(pid, signal.SIGSTOP)
    elif case == "killed":
        os.kill(pid, signal.SIGKILL)
    else:
        rig.profile.write_text("POOL_PROFILE=broken\nPOOL_ARGS='-m /nonexistent/model-that-is-not-there.gguf'\n")
        os.kill(pid, signal.SIGKILL)


async def measure(case: str, tmp: Path) -> dict[str, object]:
    with heal_rig(tmp, policy=POLICY[case]) as rig:
        if case == "crash_loop":  # an operator's rollover f32 -> f16 first: the rollback goes back to f32
            ws = Workspace(rig.config(), rig.audit)
            plan = rollover.plan(ws, ENGINE, "f16", active="f32", force=True, smoke=False)
            outcome = await rollover.run(ws, plan, lambda _: None)
            await ws.close()
            assert outcome.outcome == "ok", outcome.detail
        async with Watcher(rig.config(), tmp) as w:
            await asyncio.sleep(3.0)
            assert await serves(rig.url), "the engine does not serve before the fault"
            await fault(case, rig)
            t0 = time.monotonic()
            notice, _ = await w.until("if it still holds", timeout_s=120, after=t0)
            acting, _ = await w.until(f" {ENGINE}: ", "remediation: r", timeout_s=180, after=notice + 0.01)
            done = "rolled back" if case == "crash_loop" else "restarted"
            served, line = await w.until(f"{done} {ENGINE}", timeout_s=300, after=t0)
            while not await serves(rig.url):
                await asyncio.sleep(0.1)
            checked = time.monotonic()
            said = [f"{s - t0:6.1f} s  {text}" for s, text in w.said if s >= t0]
        entries = [(e.action, e.outcome, e.rule, e.automatic) for e in audit.entries(rig.audit)]
    return {
        "case": case,
        "detect_s": round(notice - t0, 1),
        "act_s": round(acting - t0, 1),
        "serving_s": round(served - t0, 1),
        "checked_s": round(checked - t0, 1),
        "said": said,
        "audit": entries,
        "line": line,
    }


def main() -> None:
    # a `timeout` or kill -TERM still stops the engines, supervisord, sshd and LiteLLM it started (finally)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    cases = sys.argv[1:] or list(POLICY)
    rows = []
    for case in cases:
        tmp = Path(tempfile.mkdtemp(prefix=f"pc-heal-{case}-"))
        row = asyncio.run(measure(case, tmp))
        rows.append(row)
        print(f"{case}: detect {row['detect_s']} s, act {row['act_s']} s, serving {row['serving_s']} s "
              f"(a chat answer at {row['checked_s']} s)", flush=True)  # fmt: skip
        for line in row["said"]:  # type: ignore[attr-defined]
            print(f"    {line}", flush=True)
        print(f"    audit: {row['audit']}", flush=True)
    out = Path(tempfile.gettempdir()) / "heal_real.json"
    out.write_text(json.dumps(rows, indent=1) + "\n")
    print(f"rows: {out}")


if __name__ == "__main__":
    main()
