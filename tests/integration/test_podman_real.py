"""A real container restart with podman (runc, cgroupfs, lowered ulimits and a locally built image, as
shared/reference/real-engines.md found it runs here), through the `command` control backend over SSH."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.helpers.rawhttp import free_port
from tests.helpers.sshd import Lab

pytestmark = pytest.mark.engine
PODMAN = ["podman", "--runtime", "/usr/sbin/runc", "--cgroup-manager=cgroupfs"]
IMAGE = "localhost/poolconsole-test-busybox:1"


def podman(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*PODMAN, *args], capture_output=True, text=True, timeout=120, check=check)


@pytest.fixture
def container(tmp_path: Path) -> Iterator[tuple[str, int]]:
    if shutil.which("podman") is None or shutil.which("busybox") is None:
        raise RuntimeError("podman, runc and busybox-static are needed (scripts/test.sh installs them)")
    root = tmp_path / "rootfs"
    (root / "bin").mkdir(parents=True)
    shutil.copy(shutil.which("busybox") or "", root / "bin" / "busybox")
    for tool in ("sh", "httpd", "sleep"):
        (root / "bin" / tool).symlink_to("busybox")
    (root / "www" / "v1").mkdir(parents=True)
    (root / "www" / "v1" / "models").write_text(json.dumps({"object": "list", "data": [{"id": "in-a-box"}]}))
    subprocess.run(["tar", "-C", str(root), "-cf", str(tmp_path / "rootfs.tar"), "."], check=True)
    podman("import", str(tmp_path / "rootfs.tar"), IMAGE)
    name = f"pc-test-{tmp_path.name[-8:].replace('_', '-')}"
    port = free_port()
    podman(
        "run",
        "-d",
        "--name",
        name,
        "--network=host",
        "--stop-timeout",
        "1",
        "--ulimit",
        "nofile=1024:1024",
        "--ulimit",
        "nproc=1024:1024",
        IMAGE,
        "/bin/httpd",
        "-f",
        "-p",
        f"127.0.0.1:{port}",
        "-h",
        "/www",
    )
    try:
        yield name, port
    finally:
        podman("rm", "-f", name, check=False)


def started_at(name: str) -> str:
    return podman("inspect", "--format", "{{.State.StartedAt}}", name).stdout.strip()


def test_real_container_restart_over_ssh(container: tuple[str, int], tmp_path: Path) -> None:
    name, port = container
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/v1/models", timeout=1, trust_env=False).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.2)
    before = started_at(name)
    lab = Lab(tmp_path / "lab")
    try:
        lab.add("box", {}, ())
        argv = json.dumps([*PODMAN, "restart", "{name}"])
        config = tmp_path / "pool.toml"
        config.write_text(
            lab.toml(
                f'[[engines]]\nname = "boxed"\nkind = "openai"\nurl = "{url}"\nhost = "box"\n'
                f'[engines.control]\nbackend = "command"\nname = "{name}"\ncommand = {argv}\nhealth_timeout_s = 30\n'
            )
        )
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "poolconsole",
                "restart",
                "boxed",
                "--yes",
                "--config",
                str(config),
                "--audit-db",
                str(tmp_path / "audit.sqlite3"),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        lab.stop()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"podman --runtime /usr/sbin/runc --cgroup-manager=cgroupfs restart {name}" in proc.stdout
    assert "restart boxed: ok: healthy after" in proc.stdout
    assert started_at(name) != before  # the container really restarted
