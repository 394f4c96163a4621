"""A real llama-server in a real podman container (runc, cgroupfs, lowered ulimits and a locally built
image, as shared/reference/real-engines.md found it runs here), driven through the `command` control
backend over a real sshd: a restart really restarts the container and waits until it serves; a rollover
to a profile that cannot load (the container exits) is rolled back, and the container serves the old
profile's model again."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers.podman import F16, F32, LIMITS, PODMAN, import_llama_image, launcher, missing_tools, podman
from tests.helpers.rawhttp import free_port
from tests.helpers.sshd import Lab
from tests.helpers.supervised import wait_healthy

pytestmark = pytest.mark.engine
BROKEN = "/nonexistent/model-that-is-not-there.gguf"


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    missing = missing_tools()
    if missing:
        raise RuntimeError(f"{', '.join(missing)} needed (scripts/test.sh installs podman, runc and busybox-static)")
    tag = f"localhost/poolconsole-test-llama:{uuid.uuid4().hex[:12]}"
    import_llama_image(tmp_path_factory.mktemp("image"), tag)
    try:
        yield tag
    finally:
        podman("rmi", "-f", tag, check=False)


@dataclass
class Boxed:
    name: str
    url: str
    profile: Path
    """The host's profile file, in the directory bind-mounted at /profile."""
    lab: Lab
    audit: Path

    def config(self, engine: str) -> Path:
        argv = json.dumps([*PODMAN, "restart", "{name}"])
        path = self.profile.parent.parent / f"pool-{self.name}.toml"
        path.write_text(
            self.lab.toml(engine.format(url=self.url, argv=argv, name=self.name, profile=self.profile)).replace(
                "[[hosts]]", "[[hosts]]\ngpu_memory_gib = [24]", 1
            )
        )
        return path

    def cli(self, config: Path, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "poolconsole", *args, "--config", str(config), "--audit-db", str(self.audit)],
            capture_output=True,
            text=True,
            timeout=300,
        )


@pytest.fixture
def boxed(image: str, tmp_path: Path) -> Iterator[Boxed]:
    name = f"pc-test-{uuid.uuid4().hex[:10]}"
    port = free_port()
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    profile = profiles / "profile.env"
    profile.write_text(f"POOL_PROFILE=f32\nPOOL_ARGS='-m {F32}'\n")
    lab = Lab(tmp_path / "lab")
    try:
        podman(
            "run",
            "-d",
            "--name",
            name,
            "--network=host",
            "--stop-timeout",
            "2",
            *LIMITS,
            "-v",
            f"{profiles}:/profile",  # the directory: a rename into it (the atomic write) shows inside
            image,
            *launcher(port),
        )
        url = f"http://127.0.0.1:{port}"
        wait_healthy(url)
        lab.add("box", {}, ())
        yield Boxed(name, url, profile, lab, tmp_path / "audit.sqlite3")
    finally:
        lab.stop()
        podman("rm", "-f", "-t", "0", name, check=False)


def state(name: str) -> dict[str, Any]:
    out = podman("inspect", "--format", "{{json .State}}", name).stdout
    doc: dict[str, Any] = json.loads(out)
    return doc


def served(url: str) -> str:
    return str(httpx.get(f"{url}/v1/models", timeout=5, trust_env=False).json()["data"][0]["id"])


def test_real_container_restart_over_ssh(boxed: Boxed) -> None:
    before = state(boxed.name)["StartedAt"]
    assert served(boxed.url) == F32
    config = boxed.config(
        '[[engines]]\nname = "boxed"\nkind = "openai"\nurl = "{url}"\nhost = "box"\n'
        '[engines.control]\nbackend = "command"\nname = "{name}"\ncommand = {argv}\nhealth_timeout_s = 30\n'
    )
    proc = boxed.cli(config, "restart", "boxed", "--yes")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"podman --runtime /usr/sbin/runc --cgroup-manager=cgroupfs restart {boxed.name}" in proc.stdout
    assert f"boxed serves {F32}: health 200, model listed, one token generated" in proc.stdout, proc.stdout
    assert "restart boxed: ok: serving after" in proc.stdout
    after = state(boxed.name)
    assert after["Running"] and after["StartedAt"] != before  # the container really restarted
    assert served(boxed.url) == F32


def test_rollover_to_a_profile_that_cannot_load_is_rolled_back_in_the_container(boxed: Boxed) -> None:
    before = state(boxed.name)["StartedAt"]
    original = boxed.profile.read_text()
    config = boxed.config(
        '[[engines]]\nname = "boxed"\nkind = "llamacpp"\nurl = "{url}"\nhost = "box"\nprofile = "f32"\n'
        '[engines.control]\nbackend = "command"\nname = "{name}"\ncommand = {argv}\nprofile_file = "{profile}"\n'
        "health_timeout_s = 15\ndrain_timeout_s = 5\n"
        f'[[engines.profiles]]\nname = "f32"\nformat = "GGUF F32"\nweights_gib = 0.001\nargs = ["-m", "{F32}"]\n'
        f'[[engines.profiles]]\nname = "f16"\nformat = "GGUF F16"\nweights_gib = 0.001\nargs = ["-m", "{F16}"]\n'
        f'[[engines.profiles]]\nname = "broken"\nformat = "GGUF Q4_K_M"\nweights_gib = 0.001\n'
        f'args = ["-m", "{BROKEN}"]\n'
    )
    proc = boxed.cli(config, "rollover", "boxed", "broken", "--no-smoke", "--yes")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert proc.stdout.strip().splitlines()[-1].startswith("rollover boxed: rolled back: boxed not serving"), out
    # the broken profile reached the container, which exited: llama-server could not load the model
    logs = podman("logs", boxed.name)
    assert BROKEN in logs.stdout + logs.stderr
    # the old profile is back, the container runs again (podman restart starts an exited container) and serves
    assert boxed.profile.read_text() == original
    after = state(boxed.name)
    assert after["Running"] and after["StartedAt"] != before
    assert served(boxed.url) == F32
    audit = subprocess.run(
        [sys.executable, "-m", "poolconsole", "audit", "--json", "--db", str(boxed.audit)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    (entry,) = json.loads(audit.stdout)
    assert entry["action"] == "rollover" and entry["outcome"] == "rolled back", entry
    assert entry["profile_from"] == "f32" and entry["profile_to"] == "broken"
    assert entry["detail"].endswith("f32 restored and serving"), entry
    restart = f"podman --runtime /usr/sbin/runc --cgroup-manager=cgroupfs restart {boxed.name}"
    assert entry["commands"].count(restart) == 2  # once to apply the broken profile, once to restore f32
