"""Actions on real parts: a real sshd, a real supervisord running a real llama-server whose profiles are two
tiny GGUFs of different types (f32, f16). A rollover succeeds and the engine serves the new profile; a
broken profile fails and is rolled back automatically; a profile that loads but fails the smoke test's
correctness probe is rolled back; a secret from the operator's environment reaches the host's profile
file and nothing else; a restart under load; a crash loop under supervisord seen as restarts and raising
the restart-loop alert; the audit log."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from poolconsole.collect.engines.poll import EnginePoller
from poolconsole.config import parse_config
from poolconsole.model.alerts import Alerts
from poolconsole.model.pool_state import PoolState
from poolconsole.model.snapshots import EngineSnapshot
from tests.helpers.engines import model_path
from tests.helpers.rawhttp import free_port
from tests.helpers.sshd import Lab
from tests.helpers.supervised import Supervisor, llama_program, wait_healthy

pytestmark = pytest.mark.engine
PROBE_PROMPT = "What is 2 + 2? Answer with the digit only."
PROBE_EXPECT = "^4$"
"""A correctness probe the tiny random-weight model cannot pass: its greedy answer is 32 tokens of word salad."""


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[dict[str, Any]]:
    port = free_port()
    profile = tmp_path / "profile.env"
    f32 = model_path("tiny", seed=1)
    f16 = model_path("tiny-f16", f16=True, seed=1)
    profile.write_text(f"POOL_PROFILE=f32\nPOOL_ARGS='-m {f32}'\n")
    command = llama_program(profile, port, "-c 2048 -np 2 -t 1 --threads-http 8")
    # stopwaitsecs: llama-server does not exit on SIGTERM while requests are in flight (it hangs after
    # "cleaning up before exit..."); supervisord kills it after this long, so a restart under load takes
    # longer than the SSH timeout of one command (3 s in the lab's config)
    options = {"command": command, "startsecs": "1", "startretries": "0", "autorestart": "false", "stopwaitsecs": "4"}
    supervisor = Supervisor(tmp_path / "supervisor", {"llama": options})
    url = f"http://127.0.0.1:{port}"
    lab = Lab(tmp_path / "lab")
    try:
        # DEBUG3: sshd logs all it knows of each session (channels, requests, environment), though not a
        # command's text (OpenSSH 9, at any level): the host records those itself
        host = lab.add("box", {}, (), log_level="DEBUG3", record_commands=True)
        supervisor.start()
        wait_healthy(url)
        engines = (
            f'[[engines]]\nname = "llama"\nkind = "llamacpp"\nurl = "{url}"\nhost = "box"\nprofile = "f32"\n'
            f'[engines.control]\nbackend = "supervisor"\nname = "llama"\nsupervisor_conf = "{supervisor.conf}"\n'
            f'profile_file = "{profile}"\nhealth_timeout_s = 20\ndrain_timeout_s = 5\n'
            f'[[engines.profiles]]\nname = "f32"\nformat = "GGUF F32"\nweights_gib = 0.001\nargs = ["-m", "{f32}"]\n'
            f'[[engines.profiles]]\nname = "f16"\nformat = "GGUF F16"\nweights_gib = 0.001\nargs = ["-m", "{f16}"]\n'
            f'[[engines.profiles]]\nname = "broken"\nformat = "GGUF Q4_K_M"\nweights_gib = 0.001\n'
            f'args = ["-m", "/nonexistent/model-that-is-not-there.gguf"]\n'
            # the token comes from the operator's environment when the profile is applied
            f'[[engines.profiles]]\nname = "canary"\nformat = "GGUF F16"\nweights_gib = 0.001\n'
            f'args = ["-m", "{f16}"]\nenv = {{ HF_TOKEN = {{ env = "POOL_CANARY" }} }}\n'
        )
        config = tmp_path / "pool.toml"
        config.write_text(lab.toml(engines).replace("[[hosts]]", "[[hosts]]\ngpu_memory_gib = [24]", 1))
        yield {
            "config": config,
            "url": url,
            "audit": tmp_path / "audit.sqlite3",
            "f16": f16.name,
            "f32": f32.name,
            "f16_path": str(f16),
            "profile": profile,
            "host": host,
            "supervisor": supervisor,
        }
    finally:
        supervisor.stop()
        lab.stop()


def cli(
    rig: dict[str, Any], *args: str, config: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "poolconsole",
            *args,
            "--config",
            str(config or rig["config"]),
            "--audit-db",
            str(rig["audit"]),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


def audit_log(rig: dict[str, Any]) -> list[dict[str, Any]]:
    log = subprocess.run(
        [sys.executable, "-m", "poolconsole", "audit", "--json", "--db", str(rig["audit"])],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert log.returncode == 0, log.stderr
    entries: list[dict[str, Any]] = json.loads(log.stdout)
    return entries


def serving(url: object) -> str:
    return str(httpx.get(f"{url}/v1/models", timeout=5, trust_env=False).json()["data"][0]["id"])


def test_rollover_then_broken_profile_rolls_back(rig: dict[str, Any]) -> None:
    assert rig["f32"] in serving(rig["url"])
    without_yes = cli(rig, "rollover", "llama", "f16", "--no-smoke")
    assert without_yes.returncode == 2 and "--yes" in without_yes.stderr and rig["f32"] in serving(rig["url"])
    ok = cli(rig, "rollover", "llama", "f16", "--no-smoke", "--yes")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "rollover llama: ok" in ok.stdout and rig["f16"] in serving(rig["url"])
    broken = cli(rig, "rollover", "llama", "broken", "--no-smoke", "--yes")
    assert broken.returncode == 1, broken.stdout
    assert "rolled back" in broken.stdout
    assert rig["f16"] in serving(rig["url"])  # the previous profile serves again
    entries = audit_log(rig)
    assert [e["outcome"] for e in entries] == ["rolled back", "ok"]
    assert entries[0]["profile_from"] == "f16" and entries[0]["profile_to"] == "broken"
    assert any("supervisorctl" in c and "restart llama" in c for c in entries[0]["commands"])


def test_profile_that_loads_but_fails_the_correctness_probe_is_rolled_back(rig: dict[str, Any]) -> None:
    before = rig["profile"].read_text()
    probing = rig["config"].with_name("pool-probe.toml")
    probing.write_text(
        rig["config"].read_text()
        + f"[engines.smoke]\nprobe_prompt = {json.dumps(PROBE_PROMPT)}\nprobe_expect = {json.dumps(PROBE_EXPECT)}\n"
    )
    assert rig["f32"] in serving(rig["url"])
    proc = cli(rig, "rollover", "llama", "f16", "--yes", config=probing)  # with the smoke test
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    # the new profile loaded and served before the smoke test judged it
    assert f"llama serves {rig['f16_path']}: health 200, model listed, one token generated" in proc.stdout, out
    assert "smoke test of the new profile" in proc.stdout, out
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith("rollover llama: rolled back: smoke test failed: chat: correctness probe failed"), out
    assert rig["f32"] in serving(rig["url"])  # the old profile's model serves again
    assert rig["profile"].read_text() == before  # the profile file is the one from before, byte for byte
    (entry,) = audit_log(rig)
    assert entry["action"] == "rollover" and entry["outcome"] == "rolled back"
    assert entry["profile_from"] == "f32" and entry["profile_to"] == "f16"
    assert "correctness probe failed" in entry["detail"] and entry["detail"].endswith("f32 restored and serving")
    # one write and one restart to apply f16, the same two to restore f32
    assert sum("restart llama" in c for c in entry["commands"]) == 2


class ProcessLister(threading.Thread):
    """`ps -eo args` about every 20 ms until stopped: every command line seen while the CLI runs."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.samples: list[str] = []
        self.done = threading.Event()

    def sample(self) -> None:
        self.samples.append(subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, timeout=60).stdout)

    def run(self) -> None:
        while not self.done.is_set():
            self.sample()
            self.done.wait(0.02)

    def stop(self) -> list[str]:
        self.done.set()
        self.join(60)
        return self.samples


def test_a_secret_from_the_environment_reaches_the_profile_file_only(rig: dict[str, Any]) -> None:
    canary = f"hf_canary_{uuid.uuid4().hex}"
    env = {**os.environ, "POOL_CANARY": canary}
    command = [sys.executable, "-m", "poolconsole", "rollover", "llama", "canary", "--no-smoke", "--yes"]
    command += ["--config", str(rig["config"]), "--audit-db", str(rig["audit"])]
    lister = ProcessLister()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    lister.sample()  # the CLI is running: this list holds its command line at least
    lister.start()
    try:
        stdout, stderr = proc.communicate(timeout=300)
    finally:
        samples = lister.stop()
    assert proc.returncode == 0, stdout + stderr
    assert "rollover llama: ok" in stdout and rig["f16"] in serving(rig["url"])
    assert "HF_TOKEN" in stdout  # progress names the variable...
    assert canary not in stdout and canary not in stderr  # ...never its value
    # the value reached the host's profile file, a file only its owner can read
    assert f"HF_TOKEN={canary}\n" in rig["profile"].read_text()
    assert rig["profile"].stat().st_mode & 0o077 == 0
    # and nowhere else: not the audit database (nor its WAL), not any command line, not sshd's log
    audit_files = [p for p in rig["audit"].parent.glob(rig["audit"].name + "*") if p.is_file()]
    assert rig["audit"] in audit_files
    for path in audit_files:
        assert canary.encode() not in path.read_bytes(), path
    assert len(samples) >= 2 and any("poolconsole rollover llama canary" in s for s in samples)
    assert not [s for s in samples if canary in s]
    ran = rig["host"].commands()  # every command line the host was asked to run, however short-lived
    assert "head -c" in ran and "restart llama" in ran and canary not in ran
    sshd_log = rig["host"].log.read_text(errors="replace")
    assert "Starting session: " in sshd_log  # the log covers the rollover's sessions
    assert canary not in sshd_log
    for log in rig["supervisor"].root.glob("*.log"):
        assert canary not in log.read_text(errors="replace"), log
    assert all(canary not in json.dumps(e) for e in audit_log(rig))


def test_restart_under_load_and_read_only(rig: dict[str, Any]) -> None:
    """Six clients send requests back to back (two run, four wait in the queue) until the restart is over,
    then one more each. Nothing hangs: every request comes back, finished (200), cut with the old
    process, refused while no process listens or answered 503 while the new one loads; then every client
    is served again."""
    url = rig["url"]
    allowed = {"200", "503", "cut", "refused"}

    async def one(client: httpx.AsyncClient, i: int) -> str:
        try:
            r = await client.post(f"{url}/v1/completions", json={"prompt": f"{i} hello", "max_tokens": 200})
            return str(r.status_code)
        except httpx.TimeoutException as exc:
            return f"hung ({type(exc).__name__})"
        except httpx.ConnectError:
            return "refused"
        except httpx.TransportError:
            return "cut"  # the connection went away with the old process

    async def both() -> tuple[list[list[str]], list[str], subprocess.CompletedProcess[str]]:
        done = asyncio.Event()
        async with httpx.AsyncClient(timeout=120, trust_env=False, limits=httpx.Limits(max_connections=12)) as client:

            async def worker(i: int) -> list[str]:
                seen: list[str] = []
                while not done.is_set():
                    seen.append(await one(client, i))
                    if seen[-1] in ("refused", "503"):
                        await asyncio.sleep(0.05)
                return seen

            workers = [asyncio.create_task(worker(i)) for i in range(6)]
            await asyncio.sleep(0.5)
            proc = await asyncio.to_thread(cli, rig, "restart", "llama", "--yes")
            done.set()
            during = await asyncio.wait_for(asyncio.gather(*workers), 300)
            after = await asyncio.gather(*(one(client, i) for i in range(6)))
        return list(during), list(after), proc

    during, after, proc = asyncio.run(both())
    assert proc.returncode == 0 and "restart llama: ok: serving after" in proc.stdout, proc.stdout + proc.stderr
    outcomes = [o for seen in during for o in seen]
    counts = {o: outcomes.count(o) for o in set(outcomes)}
    assert all(seen for seen in during) and set(outcomes) <= allowed, counts  # nothing hung, nothing else
    assert after == ["200"] * 6, (after, counts)  # and the new process serves every client
    assert httpx.get(f"{url}/health", timeout=5, trust_env=False).status_code == 200
    refused = cli(rig, "restart", "llama", "--yes", "--read-only")
    assert refused.returncode == 1 and "read-only" in refused.stderr


@pytest.fixture
def crashy(tmp_path: Path) -> Iterator[tuple[Supervisor, str]]:
    """llama-server under supervisord with autorestart: each time it dies, supervisord starts it again."""
    port = free_port()
    profile = tmp_path / "profile.env"
    profile.write_text(f"POOL_ARGS='-m {model_path('tiny', seed=1)}'\n")
    options = {
        "command": llama_program(profile, port, "-c 512 -np 1 -t 1"),
        "autorestart": "true",
        "startsecs": "0",  # running as soon as it started: a crash is an exit, never a failed start (no backoff)
        "startretries": "3",
    }
    supervisor = Supervisor(tmp_path / "supervisor", {"crashy": options}).start()
    try:
        yield supervisor, f"http://127.0.0.1:{port}"
    finally:
        supervisor.stop()


async def test_a_crash_loop_under_supervisord_is_seen_as_restarts_and_raises_the_alert(
    crashy: tuple[Supervisor, str],
) -> None:
    """Killed with SIGKILL right after serving, three times, supervisord starting it again each time. llama.cpp
    has no process start time metric: a restart shows as its counters going down (and, on its own as well,
    as a new Process-Start-Time-Unix header on /metrics)."""
    supervisor, url = crashy
    config = parse_config(f'[[engines]]\nname = "crashy"\nkind = "llamacpp"\nurl = "{url}"\n', "crashy.toml")
    state = PoolState(config)
    alerts = Alerts(config.alerts)
    poller = EnginePoller(config.engines[0], settings=config.settings)
    fired: list[str] = []

    async def poll() -> EngineSnapshot:
        snap = await poller.poll()
        view = state.apply_engine(snap)
        fired.extend(e.rule for e in alerts.engine(view, snap.fetched_at) if e.fired)
        return snap

    async def serving_pid(old: int) -> int:
        """The program's new process, once it answers /health (supervisord restarted it after a kill)."""
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            pid = await asyncio.to_thread(supervisor.pid, "crashy")
            if pid not in (0, old):
                try:
                    if (await client.get(f"{url}/health")).status_code == 200:
                        return pid
                except httpx.HTTPError:
                    pass
            await asyncio.sleep(0.1)
        raise AssertionError(f"crashy did not come back after pid {old} was killed: {supervisor.ctl('status')}")

    async def counted() -> float:
        """Poll until the poll reads the traffic just served (its counters count when a request ends)."""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            snap = await poll()
            tokens = snap.metrics.get("generation_tokens_total") if snap.metrics else None
            if tokens:
                return tokens
            await asyncio.sleep(0.2)
        raise AssertionError(f"the poller never read the served tokens: {snap.error}")

    pids: list[int] = []
    try:
        async with httpx.AsyncClient(timeout=60, trust_env=False) as client:
            pids.append(await serving_pid(0))
            for kill in range(3):
                answer = await client.post(f"{url}/v1/completions", json={"prompt": "hello", "max_tokens": 8})
                assert answer.status_code == 200, answer.text
                assert await counted() > 0
                assert "restart_loop" not in fired, (kill, fired)
                os.kill(pids[-1], signal.SIGKILL)  # right after it served: no goodbye, counters lost
                pids.append(await serving_pid(pids[-1]))
                await poll()  # the new process's counters are 0: a restart
                assert len(state.engines["crashy"].history.restarts) == kill + 1, (kill, fired)
                await asyncio.sleep(1.0)  # restarts further apart than the alert's half-second debounce
    finally:
        await poller.aclose()
    assert len(set(pids)) == 4  # supervisord really started it four times
    assert len(state.engines["crashy"].history.restarts) == 3
    assert fired.count("restart_loop") == 1
