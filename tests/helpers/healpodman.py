"""A real engine in a real podman container for the watcher's remediation (issue 38): llama-server as the
container's PID 1 (tests.helpers.podman's image and launcher), reached over a loopback sshd, restarted through the
`podman` control backend (`podman restart NAME`; `binary` is a two-line wrapper adding the flags podman needs in
this sandbox). `podman_reason()` says why a container cannot run here, for a test to skip with."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from poolconsole.config import parse_config
from poolconsole.config.models import PoolConfig
from tests.helpers.healrig import ENGINE
from tests.helpers.podman import F32, LIMITS, PODMAN, launcher, missing_tools, podman
from tests.helpers.rawhttp import free_port
from tests.helpers.sshd import Lab
from tests.helpers.supervised import wait_healthy


def podman_reason() -> str | None:
    """None where podman runs a container here, else why not (the tools missing, or a container that fails)."""
    missing = missing_tools()
    if missing:
        return f"{', '.join(missing)} needed (scripts/test.sh installs podman, runc and busybox-static)"
    try:
        podman("info", timeout=60)
    except Exception as exc:  # not installed right, no storage, no permission: the reason is in its words
        return f"podman cannot run here: {exc}"
    return None


@dataclass
class Boxed:
    config_text: str
    url: str
    name: str
    """The container's name."""
    audit: Path
    tmp: Path

    def config(self, extra: str = "") -> PoolConfig:
        return parse_config(self.config_text + extra, "hosts.toml")

    def pid(self) -> int:
        """The container's PID 1 (llama-server) as the host sees it; 0 while it is not running."""
        return int(podman("inspect", "--format", "{{.State.Pid}}", self.name).stdout.strip() or 0)

    def started_at(self) -> str:
        return podman("inspect", "--format", "{{.State.StartedAt}}", self.name).stdout.strip()


@contextmanager
def podman_heal_rig(tmp: Path, image: str, *, policy: str) -> Iterator[Boxed]:
    """`policy`: the `[engines.remediation]` lines; the pool polls each second, acts after a 2 s grace. The
    container has no restart policy, so only poolconsole brings it back; `--stop-timeout 2`: a SIGSTOPped
    llama-server keeps podman's SIGTERM pending, podman SIGKILLs it after 2 s."""
    name = f"pc-heal-{uuid.uuid4().hex[:10]}"
    port = free_port()
    profiles = tmp / "profiles"
    profiles.mkdir()
    (profiles / "profile.env").write_text(f"POOL_PROFILE=f32\nPOOL_ARGS='-m {F32}'\n")
    wrapper = tmp / "podman-here"
    wrapper.write_text(f'#!/bin/sh\nexec {" ".join(PODMAN)} "$@"\n')
    wrapper.chmod(0o755)
    lab = Lab(tmp / "lab")
    url = f"http://127.0.0.1:{port}"
    try:
        run = ["run", "-d", "--name", name, "--network=host", "--stop-timeout", "2", *LIMITS]
        podman(*run, "-v", f"{profiles}:/profile", image, *launcher(port))
        wait_healthy(url)
        lab.add("box", {}, ())
        engines = (
            f"[settings]\npoll_interval_s = 1.0\nhttp_timeout_s = 2.0\n"
            f'[[engines]]\nname = "{ENGINE}"\nkind = "llamacpp"\nurl = "{url}"\nhost = "box"\n'
            f'[engines.control]\nbackend = "podman"\nname = "{name}"\nbinary = "{wrapper}"\n'
            "health_timeout_s = 30\ndrain_timeout_s = 0\n"
            f"[engines.remediation]\n{policy}\n"
            "[remediation]\nenabled = true\nmax_actions_per_hour = 3\ncooldown_s = 0\ngrace_s = 2\n"
        )
        # lab.toml starts with its own [settings]: ours replaces it (the SSH timeout kept), as healrig's does
        text = lab.toml(engines).replace("[[hosts]]", "[[hosts]]\ngpu_memory_gib = [24]", 1)
        text = text.replace("[settings]\nssh_timeout_s = 3.0\n", "", 1).replace(
            "[settings]\npoll_interval_s", "[settings]\nssh_timeout_s = 3.0\npoll_interval_s", 1
        )
        yield Boxed(text, url, name, tmp / "audit.sqlite3", tmp)
    finally:
        lab.stop()
        podman("rm", "-f", "-t", "0", name, check=False)
