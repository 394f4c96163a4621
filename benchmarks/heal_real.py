"""How long the watcher's remediation takes to notice, act and see a real engine serve again (issue 38).

Run by hand: `python benchmarks/heal_real.py [--manager podman] [case ...]` (cases: wedged, killed,
crash_loop; default all; under podman: wedged and killed).

Each case: a real llama-server (the tests' tiny GGUF) under a real supervisord (or, with `--manager podman`, as
PID 1 of a real podman container restarted through the podman backend, `podman restart`, with --stop-timeout 2
and no restart policy: tests.helpers.healpodman), reached over a loopback sshd;
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

import argparse
import asyncio
import json
import os
import signal
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from poolconsole.config.models import PoolConfig  # noqa: E402
from poolconsole.ops import audit  # noqa: E402
from poolconsole.workflows import rollover  # noqa: E402
from poolconsole.workflows.workspace import Workspace  # noqa: E402
from tests.helpers.healpodman import podman_heal_rig, podman_reason  # noqa: E402
from tests.helpers.healrig import ENGINE, Rig, Watcher, heal_rig, serves  # noqa: E402
from tests.helpers.podman import import_llama_image, podman  # noqa: E402

POLICY = {
    "wedged": 'on_down = "restart"\non_stalled = "restart"',
    "killed": 'on_down = "restart"',
    "crash_loop": 'on_down = "restart"\non_crash_loop = "rollback"',
}


async def fault(case: str, rig: Rig | None, pid: int) -> None:
    if case == "wedged":
        os.kill(pid, signal.SIGSTOP)
    elif case == "killed":
        os.kill(pid, signal.SIGKILL)
    else:
        assert rig is not None
        rig.profile.write_text("POOL_PROFILE=broken\nPOOL_ARGS='-m /nonexistent/model-that-is-not-there.gguf'\n")
        os.kill(pid, signal.SIGKILL)


@contextmanager
def built_image(manager: str) -> Iterator[str]:
    """The llama-server image under podman (removed after), else ""."""
    if manager != "podman":
        yield ""
        return
    reason = podman_reason()
    if reason is not None:
        sys.exit(f"--manager podman: {reason}")
    tag = f"localhost/poolconsole-heal-llama:{uuid.uuid4().hex[:12]}"
    import_llama_image(Path(tempfile.mkdtemp(prefix="pc-heal-image-")), tag)
    try:
        yield tag
    finally:
        podman("rmi", "-f", tag, check=False)


async def measure(case: str, tmp: Path, image: str) -> dict[str, object]:
    if image:
        with podman_heal_rig(tmp, image, policy=POLICY[case]) as box:
            return await watched(case, tmp, box.config(), box.url, None, box.pid, box.audit)
    with heal_rig(tmp, policy=POLICY[case]) as rig:
        return await watched(case, tmp, rig.config(), rig.url, rig, lambda: rig.supervisor.pid(ENGINE), rig.audit)


async def watched(
    case: str, tmp: Path, config: PoolConfig, url: str, rig: Rig | None, pid: Callable[[], int], audit_path: Path
) -> dict[str, object]:
    if case == "crash_loop":  # an operator's rollover f32 -> f16 first: the rollback goes back to f32
        assert rig is not None
        ws = Workspace(config, audit_path)
        plan = rollover.plan(ws, ENGINE, "f16", active="f32", force=True, smoke=False)
        outcome = await rollover.run(ws, plan, lambda _: None)
        await ws.close()
        assert outcome.outcome == "ok", outcome.detail
    async with Watcher(config, tmp) as w:
        await asyncio.sleep(3.0)
        assert await serves(url), "the engine does not serve before the fault"
        await fault(case, rig, pid())
        t0 = time.monotonic()
        notice, _ = await w.until("if it still holds", timeout_s=120, after=t0)
        acting, _ = await w.until(f" {ENGINE}: ", "remediation: r", timeout_s=180, after=notice + 0.01)
        done = "rolled back" if case == "crash_loop" else "restarted"
        served, line = await w.until(f"{done} {ENGINE}", timeout_s=300, after=t0)
        while not await serves(url):
            await asyncio.sleep(0.1)
        checked = time.monotonic()
        said = [f"{s - t0:6.1f} s  {text}" for s, text in w.said if s >= t0]
    entries = [(e.action, e.outcome, e.rule, e.automatic, e.commands) for e in audit.entries(audit_path)]
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
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--manager", choices=("supervisor", "podman"), default="supervisor")
    parser.add_argument("cases", nargs="*", help=f"of {', '.join(POLICY)}")
    args = parser.parse_args()
    unknown = [c for c in args.cases if c not in POLICY]
    if unknown:
        parser.error(f"unknown case(s) {', '.join(unknown)}; cases: {', '.join(POLICY)}")
    cases = args.cases or [c for c in POLICY if args.manager == "supervisor" or c != "crash_loop"]
    if args.manager == "podman" and "crash_loop" in cases:
        sys.exit("--manager podman: crash_loop is measured under supervisord only (a profile's rollback)")
    rows = []
    with built_image(args.manager) as image:
        for case in cases:
            tmp = Path(tempfile.mkdtemp(prefix=f"pc-heal-{case}-"))
            rows.append(asyncio.run(measure(case, tmp, image)))
            report(rows[-1])
    out = Path(tempfile.gettempdir()) / f"heal_real{'_podman' if image else ''}.json"
    out.write_text(json.dumps(rows, indent=1) + "\n")
    print(f"rows: {out}")


def report(row: dict[str, object]) -> None:
    print(f"{row['case']}: detect {row['detect_s']} s, act {row['act_s']} s, serving {row['serving_s']} s "
          f"(a chat answer at {row['checked_s']} s)", flush=True)  # fmt: skip
    for line in row["said"]:  # type: ignore[attr-defined]
        print(f"    {line}", flush=True)
    print(f"    audit: {row['audit']}", flush=True)


if __name__ == "__main__":
    main()
