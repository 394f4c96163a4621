"""Actions on real parts: a real sshd, a real supervisord running a real llama-server whose profiles are two
tiny GGUFs of different types (f32, f16). A rollover succeeds and the engine serves the new profile; a
broken profile fails and is rolled back automatically; a restart under load; the audit log."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.helpers.engines import llama_server_binary, model_path
from tests.helpers.rawhttp import free_port
from tests.helpers.sshd import Lab

pytestmark = pytest.mark.engine


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[dict[str, object]]:
    lab = Lab(tmp_path / "lab")
    host = lab.add("box", {}, ())
    port = free_port()
    profile = tmp_path / "profile.env"
    f32 = model_path("tiny", seed=1)
    f16 = model_path("tiny-f16", f16=True, seed=1)
    profile.write_text(f"POOL_PROFILE=f32\nPOOL_ARGS='-m {f32}'\n")
    sock = tmp_path / "supervisor.sock"
    conf = tmp_path / "supervisord.conf"
    conf.write_text(
        f"[unix_http_server]\nfile={sock}\n\n[supervisord]\nlogfile={tmp_path}/supervisord.log\n"
        f"pidfile={tmp_path}/supervisord.pid\nchildlogdir={tmp_path}\n\n"
        "[rpcinterface:supervisor]\n"
        "supervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface\n\n"
        f"[supervisorctl]\nserverurl=unix://{sock}\n\n"
        f"[program:llama]\ncommand=/bin/sh -c '. {profile}; exec {llama_server_binary()} $POOL_ARGS --host 127.0.0.1 "
        f"--port {port} --metrics -c 2048 -np 2 -t 1 --threads-http 8'\n"
        "startsecs=1\nstartretries=0\nautorestart=false\nstopasgroup=true\nkillasgroup=true\n"
        f"stdout_logfile={tmp_path}/llama.log\nredirect_stderr=true\n"
    )
    subprocess.run(["supervisord", "-c", str(conf)], check=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/health", timeout=1, trust_env=False).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.2)
    config = tmp_path / "pool.toml"
    config.write_text(
        lab.toml(
            f'[[engines]]\nname = "llama"\nkind = "llamacpp"\nurl = "{url}"\nhost = "box"\nprofile = "f32"\n'
            f'[engines.control]\nbackend = "supervisor"\nname = "llama"\nsupervisor_conf = "{conf}"\n'
            f'profile_file = "{profile}"\nhealth_timeout_s = 20\ndrain_timeout_s = 5\n'
            f'[[engines.profiles]]\nname = "f32"\nformat = "GGUF F32"\nweights_gib = 0.001\nargs = ["-m", "{f32}"]\n'
            f'[[engines.profiles]]\nname = "f16"\nformat = "GGUF F16"\nweights_gib = 0.001\nargs = ["-m", "{f16}"]\n'
            f'[[engines.profiles]]\nname = "broken"\nformat = "GGUF Q4_K_M"\nweights_gib = 0.001\n'
            f'args = ["-m", "/nonexistent/model-that-is-not-there.gguf"]\n'
        ).replace("[[hosts]]", "[[hosts]]\ngpu_memory_gib = [24]", 1)
    )
    yield {"config": config, "url": url, "audit": tmp_path / "audit.sqlite3", "f16": f16.name, "f32": f32.name}
    subprocess.run(["supervisorctl", "-c", str(conf), "shutdown"], capture_output=True, check=False)
    lab.stop()
    del host


def cli(rig: dict[str, object], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "poolconsole", *args, "--config", str(rig["config"]), "--audit-db", str(rig["audit"])],
        capture_output=True,
        text=True,
        timeout=300,
    )


def serving(url: object) -> str:
    return str(httpx.get(f"{url}/v1/models", timeout=5, trust_env=False).json()["data"][0]["id"])


def test_rollover_then_broken_profile_rolls_back(rig: dict[str, object]) -> None:
    assert rig["f32"] in serving(rig["url"])
    without_yes = cli(rig, "rollover", "llama", "f16", "--no-smoke")
    assert without_yes.returncode == 1 and "--yes" in without_yes.stderr and rig["f32"] in serving(rig["url"])
    ok = cli(rig, "rollover", "llama", "f16", "--no-smoke", "--yes")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "rollover llama: ok" in ok.stdout and rig["f16"] in serving(rig["url"])
    broken = cli(rig, "rollover", "llama", "broken", "--no-smoke", "--yes")
    assert broken.returncode == 1, broken.stdout
    assert "rolled back" in broken.stdout
    assert rig["f16"] in serving(rig["url"])  # the previous profile serves again
    log = subprocess.run(
        [sys.executable, "-m", "poolconsole", "audit", "--json", "--db", str(rig["audit"])],
        capture_output=True,
        text=True,
        timeout=60,
    )
    entries = json.loads(log.stdout)
    assert [e["outcome"] for e in entries] == ["rolled back", "ok"]
    assert entries[0]["profile_from"] == "f16" and entries[0]["profile_to"] == "broken"
    assert any("supervisorctl" in c and "restart llama" in c for c in entries[0]["commands"])


def test_restart_under_load_and_read_only(rig: dict[str, object]) -> None:
    url = rig["url"]

    async def load() -> list[int]:
        async with httpx.AsyncClient(timeout=60, trust_env=False) as client:

            async def one(i: int) -> int:
                try:
                    r = await client.post(f"{url}/v1/completions", json={"prompt": f"{i} hello", "max_tokens": 400})
                    return r.status_code
                except httpx.HTTPError:
                    return 0

            return list(await asyncio.gather(*(one(i) for i in range(6))))

    async def both() -> tuple[list[int], subprocess.CompletedProcess[str]]:
        loader = asyncio.create_task(load())
        await asyncio.sleep(0.2)
        proc = await asyncio.to_thread(cli, rig, "restart", "llama", "--yes")
        return await loader, proc

    statuses, proc = asyncio.run(both())
    assert proc.returncode == 0 and "restart llama: ok: healthy after" in proc.stdout, proc.stdout + proc.stderr
    assert statuses  # in-flight requests finished or were cut by the restart: nothing hung
    assert httpx.get(f"{url}/health", timeout=5, trust_env=False).status_code == 200
    refused = cli(rig, "restart", "llama", "--yes", "--read-only")
    assert refused.returncode == 1 and "read-only" in refused.stderr
