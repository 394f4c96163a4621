"""A real engine for the watcher's remediation (issue 38): llama-server under a real supervisord, reached over a
loopback sshd, with `poolconsole watch` and its remediation companion in this process. Every line the watcher
says is stamped (time.monotonic), so a test or benchmarks/heal_real.py reads when it noticed, acted and saw
the engine serve again."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from poolconsole.config import parse_config
from poolconsole.config.models import PoolConfig
from poolconsole.runtime.notifier import Notifier
from poolconsole.runtime.watch import Watching, watch
from poolconsole.workflows.remediation import remediation
from tests.helpers.engines import model_path
from tests.helpers.rawhttp import free_port
from tests.helpers.sshd import Lab
from tests.helpers.supervised import Supervisor, llama_program, wait_healthy

ENGINE = "llama"


@dataclass
class Rig:
    config_text: str
    url: str
    supervisor: Supervisor
    audit: Path
    profile: Path
    tmp: Path

    def config(self, extra: str = "") -> PoolConfig:
        return parse_config(self.config_text + extra, "hosts.toml")


@contextmanager
def heal_rig(tmp: Path, *, policy: str, autorestart: bool = False, startretries: int = 0) -> Iterator[Rig]:
    """`policy`: the `[engines.remediation]` lines; the pool polls each second, acts after a 2 s grace."""
    port = free_port()
    profile = tmp / "profile.env"
    f32 = model_path("tiny", seed=1)
    f16 = model_path("tiny-f16", f16=True, seed=1)
    profile.write_text(f"POOL_PROFILE=f32\nPOOL_ARGS='-m {f32}'\n")
    command = llama_program(profile, port, "-c 2048 -np 2 -t 1")
    # stopwaitsecs: a stopped (SIGSTOP) process keeps its SIGTERM pending; supervisord SIGKILLs it after this
    options = {
        "command": command,
        "startsecs": "1",
        "startretries": str(startretries),
        "autorestart": "true" if autorestart else "false",
        "stopwaitsecs": "2",
    }
    supervisor = Supervisor(tmp / "supervisor", {ENGINE: options})
    lab = Lab(tmp / "lab")
    url = f"http://127.0.0.1:{port}"
    try:
        lab.add("box", {}, ())
        supervisor.start()
        wait_healthy(url)
        engines = (
            f"[settings]\npoll_interval_s = 1.0\nhttp_timeout_s = 2.0\n"
            f'[[engines]]\nname = "{ENGINE}"\nkind = "llamacpp"\nurl = "{url}"\nhost = "box"\nprofile = "f32"\n'
            f'[engines.control]\nbackend = "supervisor"\nname = "{ENGINE}"\nsupervisor_conf = "{supervisor.conf}"\n'
            f'profile_file = "{profile}"\nhealth_timeout_s = 30\ndrain_timeout_s = 0\n'
            f"[engines.remediation]\n{policy}\n"
            f'[[engines.profiles]]\nname = "f32"\nformat = "GGUF F32"\nweights_gib = 0.001\nargs = ["-m", "{f32}"]\n'
            f'[[engines.profiles]]\nname = "f16"\nformat = "GGUF F16"\nweights_gib = 0.001\nargs = ["-m", "{f16}"]\n'
            f'[[engines.profiles]]\nname = "broken"\nformat = "GGUF Q4_K_M"\nweights_gib = 0.001\n'
            f'args = ["-m", "/nonexistent/model-that-is-not-there.gguf"]\n'
            "[remediation]\nenabled = true\nmax_actions_per_hour = 3\ncooldown_s = 0\ngrace_s = 2\n"
        )
        # lab.toml starts with its own [settings]: ours replaces it (the SSH timeout kept)
        text = lab.toml(engines).replace("[[hosts]]", "[[hosts]]\ngpu_memory_gib = [24]", 1)
        text = text.replace("[settings]\nssh_timeout_s = 3.0\n", "", 1).replace(
            "[settings]\npoll_interval_s", "[settings]\nssh_timeout_s = 3.0\npoll_interval_s", 1
        )
        yield Rig(text, url, supervisor, tmp / "audit.sqlite3", profile, tmp)
    finally:
        supervisor.stop()
        lab.stop()


@dataclass
class Watcher:
    """`poolconsole watch` with the remediation as its companion, in this process; `said` is stamped."""

    config: PoolConfig
    tmp: Path
    said: list[tuple[float, str]] = field(default_factory=list)
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    watching: Watching | None = None
    task: asyncio.Task[Notifier] | None = None

    def say(self, line: str) -> None:
        self.said.append((time.monotonic(), line))

    async def __aenter__(self) -> Watcher:
        def ready(w: Watching) -> None:
            self.watching = w

        heal = remediation(self.config, self.tmp / "audit.sqlite3", self.say)
        store = self.tmp / "history.sqlite3"
        self.task = asyncio.create_task(
            watch(self.config, store, self.stop, ready=ready, gather_s=0.2, settle_gc=False, companions=[heal])
        )
        deadline = time.monotonic() + 30
        while self.watching is None and not self.task.done() and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        if self.task.done():
            self.task.result()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.stop.set()
        assert self.task is not None
        await asyncio.wait_for(self.task, 60)

    def first(self, *needles: str, after: float = 0.0) -> tuple[float, str] | None:
        """The first stamped line after `after` that holds every needle."""
        return next((s for s in self.said if s[0] >= after and all(n in s[1] for n in needles)), None)

    async def until(self, *needles: str, timeout_s: float, after: float = 0.0) -> tuple[float, str]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            found = self.first(*needles, after=after)
            if found is not None:
                return found
            await asyncio.sleep(0.1)
        lines = "\n".join(line for _, line in self.said[-10:])
        raise AssertionError(f"the watcher did not say {needles} within {timeout_s:g} s; it said:\n{lines}")


async def serves(url: str) -> bool:
    """One chat answer from the engine itself (not only /health)."""
    body = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
    try:
        async with httpx.AsyncClient(trust_env=False, timeout=5.0) as client:
            return (await client.post(url + "/v1/chat/completions", json=body)).status_code == 200
    except httpx.HTTPError:
        return False
