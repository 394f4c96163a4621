"""Failed client requests during a rollover behind a real LiteLLM, with the drain and without it (issue 38).

Run by hand: `python benchmarks/drain_rollover.py [seconds per run, default 20]` (env REPEAT, LOAD_S).

Two real llama-servers (the tiny GGUF the tests use) under a real supervisord serve the same model name
`tiny` behind the real LiteLLM proxy (1.108.7, no database); a client sends 5 requests/s (128 tokens each)
through the gateway. Each engine takes LOAD_S (3) seconds to start, a sleep before llama-server: the tiny
model loads in 0.02 s, a real one in seconds to minutes. Three seconds in, poolconsole's rollover workflow
(workflows.rollover over SSH to a loopback sshd: write the profile file, `supervisorctl restart`, serving,
smoke gate, promote) switches engine a between its f32 and f16 profiles. "drain" runs it with the gateway
in poolconsole's config (workflows.drain: the callers' outlook read from the gateway, then the wait for a's
requests to finish); "no drain" with a config that does not name the gateway. Each under three gateway
settings: `num_retries: 0`; LiteLLM's defaults; the settings the Plan prints (num_retries 3, allowed_fails 1,
cooldown_time 30, a fallback group of b alone); and LiteLLM's health-check routing without retries.
Counted: requests that did not answer 200.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from poolconsole.config import parse_config  # noqa: E402
from poolconsole.workflows import rollover  # noqa: E402
from poolconsole.workflows.workspace import Workspace  # noqa: E402
from tests.helpers.engines import litellm_binary, model_path, running  # noqa: E402
from tests.helpers.rawhttp import free_port  # noqa: E402
from tests.helpers.sshd import Lab  # noqa: E402
from tests.helpers.supervised import Supervisor, llama_program, wait_healthy  # noqa: E402

RATE = 5.0
REPEAT = int(os.environ.get("REPEAT", "2"))
"""Rollovers per settings and drain."""
LOAD_S = float(os.environ.get("LOAD_S", "3"))
"""Seconds the engine takes to start (a sleep before llama-server): the time its port refuses connections."""
KEY = "sk-drain-bench"
SETTINGS = {
    "num_retries 0": ("router_settings: {num_retries: 0}\n", ""),
    "LiteLLM defaults": ("", ""),
    "retries+fallbacks": (
        "router_settings: {num_retries: 3, allowed_fails: 1, cooldown_time: 30, fallbacks: [{tiny: [tiny-spare]}]}\n",
        "",
    ),
    # LiteLLM's own health-check routing: a probe of every deployment each second, and a deployment whose
    # probe failed left out of routing until one passes (no retries, to see what it gives on its own)
    "health-check routing": (
        "router_settings: {num_retries: 0}\n",
        ", background_health_checks: true, health_check_interval: 1, enable_health_check_routing: true",
    ),
}


@dataclass
class Run:
    settings: str
    drain: bool
    sent: int = 0
    failed: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    outcome: str = ""
    seconds: float = 0.0


def gateway_config(path: Path, a: str, b: str, settings: tuple[str, str]) -> None:
    def deployment(name: str, url: str, ident: str) -> str:
        return (
            f"  - model_name: {name}\n"
            f'    litellm_params: {{model: openai/tiny, api_base: "{url}/v1", api_key: "none"}}\n'
            f"    model_info: {{id: {ident}}}\n"
        )

    path.write_text(
        "model_list:\n"
        + deployment("tiny", a, "eng-a")
        + deployment("tiny", b, "eng-b")
        + deployment("tiny-spare", b, "eng-b-spare")
        + "litellm_settings: {telemetry: false, drop_params: true}\n"
        + settings[0]
        + f"general_settings: {{master_key: {KEY}{settings[1]}}}\n"
    )


async def client(gateway: str, run: Run, stop: asyncio.Event) -> None:
    body = {"model": "tiny", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 128}
    tasks: list[asyncio.Task[None]] = []

    async def one(c: httpx.AsyncClient) -> None:
        try:
            reply = await c.post("/v1/chat/completions", json=body)
            if reply.status_code != 200:
                run.failed += 1
                run.errors[f"{reply.status_code} {reply.text[:80]}"] += 1
        except httpx.HTTPError as exc:
            run.failed += 1
            run.errors[type(exc).__name__] += 1

    headers = {"Authorization": f"Bearer {KEY}"}
    async with httpx.AsyncClient(base_url=gateway, headers=headers, timeout=60, trust_env=False) as c:
        start = time.monotonic()
        while not stop.is_set():
            tasks.append(asyncio.create_task(one(c)))
            run.sent += 1
            await asyncio.sleep(max(0.0, start + run.sent / RATE - time.monotonic()))
        await asyncio.gather(*tasks)


async def one_run(config_text: str, audit: Path, gateway: str, run: Run, to: str, seconds: float) -> None:
    ws = Workspace(parse_config(config_text), audit)
    stop = asyncio.Event()
    load = asyncio.create_task(client(gateway, run, stop))
    await asyncio.sleep(3.0)
    said: list[str] = []
    started = time.monotonic()
    try:
        active = await rollover.active_profile(ws, "a")
        plan = rollover.plan(ws, "a", to, active=active, force=True)
        outcome = await rollover.run(ws, plan, said.append)
        run.outcome = f"{outcome.outcome}: {outcome.detail}"
    finally:
        run.seconds = time.monotonic() - started
        await ws.close()
    await asyncio.sleep(max(0.0, seconds - 3.0 - run.seconds))
    stop.set()
    await load
    drained = [line for line in said if line.startswith("drain:")]
    print(f"  {run.settings:20} {'drain' if run.drain else 'no drain':8} sent {run.sent:3} failed {run.failed:3} "
          f"rollover {run.seconds:.1f} s {run.outcome[:60]}", flush=True)  # fmt: skip
    for line in drained:
        print(f"      {line}", flush=True)
    for error, n in run.errors.most_common(3):
        print(f"      {n} x {error}", flush=True)


def main() -> None:
    # a `timeout` or kill -TERM still stops the engines, supervisord, sshd and LiteLLM it started (finally)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 20.0
    tmp = Path(tempfile.mkdtemp(prefix="pc-drain-"))
    os.environ["PC_DRAIN_GATEWAY_KEY"] = KEY
    f32, f16 = model_path("tiny", seed=1), model_path("tiny-f16", f16=True, seed=1)
    ports = {"a": free_port(), "b": free_port()}
    programs: dict[str, dict[str, str]] = {}
    for name, port in ports.items():
        profile = tmp / f"{name}.env"
        profile.write_text(f"POOL_PROFILE=f32\nPOOL_ARGS='-m {f32}'\n")
        command = llama_program(profile, port, "--alias tiny -c 2048 -np 2 -t 1 --threads-http 8")
        # the tiny model loads in 0.02 s; a real one takes seconds to minutes, while its port refuses callers
        command = command.replace("/bin/sh -c '", f"/bin/sh -c 'sleep {LOAD_S:g}; ", 1)
        options = {"command": command, "startsecs": "1", "startretries": "0", "autorestart": "false"}
        programs[name] = options | {"stopwaitsecs": "4"}
    supervisor = Supervisor(tmp / "supervisor", programs)
    lab = Lab(tmp / "lab")
    runs: list[Run] = []
    try:
        lab.add("box", {}, ())
        supervisor.start()
        urls = {name: f"http://127.0.0.1:{port}" for name, port in ports.items()}
        for url in urls.values():
            wait_healthy(url)
        engine_a = (
            f'[[engines]]\nname = "a"\nkind = "llamacpp"\nurl = "{urls["a"]}"\nhost = "box"\nmodel = "tiny"\n'
            f'profile = "f32"\n[engines.control]\nbackend = "supervisor"\nname = "a"\n'
            f'supervisor_conf = "{supervisor.conf}"\nprofile_file = "{tmp / "a.env"}"\nhealth_timeout_s = 30\n'
            f"drain_timeout_s = 10\n"
            f'[[engines.profiles]]\nname = "f32"\nformat = "GGUF F32"\nweights_gib = 0.001\nargs = ["-m", "{f32}"]\n'
            f'[[engines.profiles]]\nname = "f16"\nformat = "GGUF F16"\nweights_gib = 0.001\nargs = ["-m", "{f16}"]\n'
            f'[[engines]]\nname = "b"\nkind = "llamacpp"\nurl = "{urls["b"]}"\nmodel = "tiny"\n'
        )
        base = lab.toml(engine_a).replace("[[hosts]]", "[[hosts]]\ngpu_memory_gib = [24]", 1)
        env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_TELEMETRY": "False"}
        to = "f16"
        for label, settings in SETTINGS.items():
            port = free_port()
            conf = tmp / f"litellm-{port}.yaml"
            gateway_config(conf, urls["a"], urls["b"], settings)
            cmd = [litellm_binary(), "--config", str(conf), "--host", "127.0.0.1", "--port", str(port)]
            with running(cmd, "/health/liveliness", port, tmp / f"litellm-{port}.log", 120, env) as gateway:
                with_gateway = base + (
                    f'[[engines]]\nname = "gw"\nkind = "litellm"\nurl = "{gateway}"\n'
                    'api_key_env = "PC_DRAIN_GATEWAY_KEY"\n'
                )
                # no drain, drain, drain, no drain: each side rolls once each way (f32 -> f16 and back)
                for drain in ((False, True, True, False) * REPEAT)[: 2 * REPEAT]:
                    run = Run(label, drain)
                    text = with_gateway if drain else base
                    asyncio.run(one_run(text, tmp / "audit.sqlite3", gateway, run, to, seconds))
                    runs.append(run)
                    to = "f32" if to == "f16" else "f16"
    finally:
        supervisor.stop()
        lab.stop()
    out = tmp / "drain_rollover.json"
    rows = [{k: v for k, v in r.__dict__.items() if k != "errors"} | {"errors": dict(r.errors)} for r in runs]
    out.write_text(json.dumps(rows, indent=1) + "\n")
    print(f"{'settings':20} {'no drain':>14} {'drain':>14}  (failed of sent, each rollover)")
    for label in SETTINGS:
        cells = [
            " ".join(f"{r.failed}/{r.sent}" for r in runs if r.settings == label and r.drain is d)
            for d in (False, True)
        ]
        print(f"{label:20} {cells[0]:>14} {cells[1]:>14}")
    print(f"rows: {out}")


if __name__ == "__main__":
    main()
