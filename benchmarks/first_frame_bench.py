"""First frame with data (issue 14): the console against the floor its libraries set, side by side in one run.

`python benchmarks/first_frame_bench.py [--engines 32] [--rounds 8] [--checkout NAME=DIR ...] [--consoles-only]`

N engines replay the real vLLM 0.32.0 capture (tests/fixtures/real/vllm-0.32.0-cpu: /metrics, /v1/models,
/version) from aiohttp servers on 127.0.0.1. Each program starts in a tmux pane of 160x48, as the peers harness
runs it (`../shared/peers/measure.sh`), and its time is from just before `tmux new-session` to the first
capture-pane (every 20 ms) that shows its marker. The programs, interleaved round by round:

- textual: a bare Textual app (Header, one Static, Footer), the marker its Static;
- textual+aiohttp, textual+config: the same app after importing aiohttp as the console does
  (collect.tls.import_aiohttp: without loading the CA store into the two TLS contexts aiohttp builds at
  import), or pydantic with the console's config models and the hosts.toml loaded, before it runs (the
  collector paused meanwhile, as the console's start-up has it);
- textual+stack: both: what the console cannot start without, the floor under its first frame with these
  libraries;
- poolconsole: `python -m poolconsole --config FILE` on the N engines, the marker the model name
  ("tiny", from /v1/models) in the overview;
- poolconsole@NAME, for each `--checkout NAME=DIR`: the same console from another checkout (a `git worktree`
  of an older commit: its poolconsole on PYTHONPATH, run in DIR), so a regression is measured side by side
  (issue 36: no regression against the starting commit). `--consoles-only` leaves out the bare programs.

Each program's CPU time (user + system, from /proc) when its marker showed is printed beside its time.

The interpreter runs with the environment's PYTHONDONTWRITEBYTECODE as it is; the console's bytecode is
written once first (README's install command does the same), so no program compiles its sources here.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from aiohttp import web

ROOT = Path(__file__).resolve().parents[1]
VLLM = ROOT / "tests" / "fixtures" / "real" / "vllm-0.32.0-cpu"
TMUX = ["tmux", "-L", "firstframe", "-f", "/dev/null"]
BASE_PORT = 18600

BARE_APP = """
from textual.app import App
from textual.widgets import Footer, Header, Static
{stack}
class Bare(App[None]):
    BINDINGS = [("q", "quit", "Quit")]
    def compose(self):
        yield Header()
        yield Static("first-frame-marker")
        yield Footer()
Bare().run()
"""
PAUSED = "import gc\ngc.disable()  # as the console's start-up does (poolconsole/__main__.py)\n"
AIOHTTP = "from poolconsole.collect.tls import import_aiohttp\nimport_aiohttp()\n"
PYDANTIC = "from poolconsole.config import load_config\nload_config({config!r})\n"
RESUMED = "gc.freeze()\ngc.enable()\n"


async def serve(engines: int) -> web.AppRunner:
    pages = {
        "/metrics": ((VLLM / "metrics.load.txt").read_bytes(), "text/plain; version=0.0.4"),
        "/v1/models": ((VLLM / "v1_models.json").read_bytes(), "application/json"),
        "/version": ((VLLM / "version.json").read_bytes(), "application/json"),
    }

    async def answer(request: web.Request) -> web.Response:
        body, kind = pages.get(request.path, (b"not found", "text/plain"))
        return web.Response(body=body, content_type=kind.split(";")[0], status=200 if request.path in pages else 404)

    app = web.Application()
    app.router.add_get("/{tail:.*}", answer)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    for i in range(engines):
        await web.TCPSite(runner, "127.0.0.1", BASE_PORT + i).start()
    return runner


def cpu_s(session: str) -> float:
    """CPU time so far (user + system) of the pane's process (`exec`: the program itself)."""
    pid = subprocess.run([*TMUX, "display", "-p", "-t", session, "#{pane_pid}"], capture_output=True, text=True)
    fields = Path(f"/proc/{pid.stdout.strip()}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def first_frame(
    name: str, argv: list[str], marker: str, env: dict[str, str], cwd: str | None = None
) -> tuple[float, float] | None:
    """Seconds to the first capture showing `marker`, and the program's CPU seconds then."""
    session = f"ff-{name.replace('+', '-').replace('@', '-')}"
    command = shlex.join(argv)
    started = time.perf_counter()
    pane = ["-c", cwd] if cwd else []
    subprocess.run(
        [*TMUX, "new-session", "-d", "-s", session, "-x", "160", "-y", "48", *pane, f"exec {command}"], env=env
    )
    seen = None
    try:
        while time.perf_counter() - started < 15:
            done = subprocess.run([*TMUX, "capture-pane", "-p", "-t", session], capture_output=True, text=True)
            if marker in done.stdout:
                seen = (time.perf_counter() - started, cpu_s(session))
                break
            time.sleep(0.02)
    finally:
        subprocess.run([*TMUX, "kill-session", "-t", session], capture_output=True)
    time.sleep(0.3)  # the killed process leaves the cores
    return seen


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engines", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument(
        "--checkout", action="append", default=[], metavar="NAME=DIR", help="also this checkout's console"
    )
    parser.add_argument("--consoles-only", action="store_true", help="only the consoles, no bare programs")
    args = parser.parse_args()
    checkouts = dict(item.split("=", 1) for item in args.checkout)
    if shutil.which("tmux") is None:
        raise SystemExit("first_frame_bench needs tmux (the programs run in a pane, as the peers harness runs them)")
    for tree in [ROOT, *map(Path, checkouts.values())]:
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(Path(tree) / "poolconsole")], check=True)
    runner = await serve(args.engines)
    with tempfile.TemporaryDirectory() as work:
        config = Path(work) / "hosts.toml"
        config.write_text(
            "".join(
                f'[[engines]]\nname = "eng{i:02d}"\nkind = "vllm"\nurl = "http://127.0.0.1:{BASE_PORT + i}"\n\n'
                for i in range(args.engines)
            )
        )
        stacks = {
            "bare": "",
            "aiohttp": PAUSED + AIOHTTP + RESUMED,
            "pydantic": PAUSED + PYDANTIC.format(config=str(config)) + RESUMED,
            "stack": PAUSED + AIOHTTP + PYDANTIC.format(config=str(config)) + RESUMED,
        }
        for name, stack in stacks.items():
            (Path(work) / f"ff_{name}.py").write_text(textwrap.dedent(BARE_APP.format(stack=stack)))
        env = {**os.environ, **{f"XDG_{d}_HOME": f"{work}/{d.lower()}" for d in ("CONFIG", "DATA", "STATE", "CACHE")}}
        bare = {
            "textual": ([sys.executable, f"{work}/ff_bare.py"], "first-frame-marker", None, env),
            "textual+aiohttp": ([sys.executable, f"{work}/ff_aiohttp.py"], "first-frame-marker", None, env),
            "textual+config": ([sys.executable, f"{work}/ff_pydantic.py"], "first-frame-marker", None, env),
            "textual+stack": ([sys.executable, f"{work}/ff_stack.py"], "first-frame-marker", None, env),
        }
        console = [sys.executable, "-m", "poolconsole", "--config", str(config)]
        programs: dict[str, tuple[list[str], str, str | None, dict[str, str]]] = {
            **({} if args.consoles_only else bare),
            "poolconsole": (console, "tiny", None, env),
            **{
                f"poolconsole@{name}": (console, "tiny", tree, {**env, "PYTHONPATH": tree})
                for name, tree in checkouts.items()
            },
        }
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in programs}
        loop = asyncio.get_running_loop()
        for round_ in range(args.rounds):
            order = list(programs.items())
            for name, (argv, marker, cwd, program_env) in order if round_ % 2 == 0 else reversed(order):
                # every other round reversed: the first program of a round starts later (cold caches)
                took = await loop.run_in_executor(None, first_frame, name, argv, marker, program_env, cwd)
                if took is not None:
                    times[name].append(took)
    await runner.cleanup()
    print(
        f"first frame (s) and CPU then (s) at {args.engines} engines, {args.rounds} interleaved rounds, "
        f"{os.cpu_count()} cores"
    )
    median = statistics.median
    for name, runs in times.items():
        if not runs:
            print(f"  {name:20s} never showed its marker")
            continue
        walls = [wall for wall, _ in runs]
        spread = f"min {min(walls):.3f}  max {max(walls):.3f}  n={len(runs)}"
        print(f"  {name:20s} median {median(walls):.3f}  CPU {median(cpu for _, cpu in runs):.3f}  {spread}")
    ours, floor, textual = (times.get(n) for n in ("poolconsole", "textual+stack", "textual"))
    if ours and floor and textual:
        print(
            f"console / floor {median(w for w, _ in ours) / median(w for w, _ in floor):.2f}x, "
            f"floor / bare Textual {median(w for w, _ in floor) / median(w for w, _ in textual):.2f}x "
            "(medians, one run)"
        )


if __name__ == "__main__":
    asyncio.run(main())
