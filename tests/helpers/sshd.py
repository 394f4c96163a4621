"""Real OpenSSH sshd instances on loopback, one per test "host", each with throwaway host and client
keys, its own known_hosts, an ssh_config-style file, and playback shims on the session's PATH."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.helpers.rawhttp import free_port

SSHD = "/usr/sbin/sshd"
PLAYBACK = Path(__file__).parent / "shims" / "playback.py"


def keygen(path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)


@dataclass
class FakeHost:
    """One sshd on 127.0.0.1:port playing a GPU host."""

    name: str
    root: Path
    scenario: dict[str, Any]
    tools: tuple[str, ...]
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    address: str = "127.0.0.1"
    netns: str | None = None
    """Run sshd inside this network namespace (made by the test), listening on `address`."""
    log_level: str | None = None
    """sshd's LogLevel (its default, INFO, when None); the log is `root / "sshd.log"`."""
    record_commands: bool = False
    """Append every command line a session asks for to `root / "commands.log"` (sshd's ForceCommand runs
    a recorder that then runs the command with bash, the login shell, its stdin untouched)."""

    @property
    def host_key(self) -> Path:
        return self.root / "host_ed25519"

    def setup(self, client_pub: str) -> None:
        if not Path(SSHD).exists():
            raise RuntimeError("openssh-server is not installed (scripts/test.sh installs it)")
        Path("/run/sshd").mkdir(parents=True, exist_ok=True)
        self.root.mkdir(parents=True, exist_ok=True)
        if not self.host_key.exists():
            keygen(self.host_key)
        (self.root / "authorized_keys").write_text(client_pub + "\n")
        (self.root / "home").mkdir(exist_ok=True)
        bin_dir = self.root / "bin"
        shutil.rmtree(bin_dir, ignore_errors=True)
        bin_dir.mkdir()
        for tool in self.tools:
            wrapper = bin_dir / tool
            wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} {PLAYBACK} {tool} "$@"\n')
            wrapper.chmod(0o755)
        (self.root / "scenario.json").write_text(json.dumps(self.scenario))
        recorder = self.root / "record-command.sh"
        if self.record_commands:
            recorder.write_text(
                f"#!/bin/sh\nprintf '%s\\n' \"$SSH_ORIGINAL_COMMAND\" >> {self.root / 'commands.log'}\n"
                'exec /bin/bash -c "$SSH_ORIGINAL_COMMAND"\n'
            )
            recorder.chmod(0o755)
        (self.root / "sshd_config").write_text(
            f"Port {self.port}\nListenAddress {self.address}\nHostKey {self.host_key}\n"
            f"AuthorizedKeysFile {self.root / 'authorized_keys'}\nPidFile {self.root / 'sshd.pid'}\n"
            "PasswordAuthentication no\nKbdInteractiveAuthentication no\nPubkeyAuthentication yes\n"
            "PermitRootLogin prohibit-password\nUsePAM no\nStrictModes no\nMaxSessions 64\nMaxStartups 100\n"
            # HOME: the session's shell must not source this machine's ~/.bashrc. Its `pyenv init` takes a lock;
            # a session killed in the middle (the "host dies" tests) leaves it behind and every later login hangs.
            f"SetEnv PATH={bin_dir}:/usr/local/bin:/usr/bin:/bin SHIM_SCENARIO={self.root / 'scenario.json'} "
            f"HOME={self.root / 'home'}\n"
            + (f"LogLevel {self.log_level}\n" if self.log_level else "")
            + (f"ForceCommand {recorder}\n" if self.record_commands else "")
        )

    def set_scenario(self, scenario: dict[str, Any]) -> None:
        self.scenario = scenario
        (self.root / "scenario.json").write_text(json.dumps(scenario))

    def start(self) -> None:
        prefix = ["ip", "netns", "exec", self.netns] if self.netns else []
        self.proc = subprocess.Popen(
            [*prefix, SSHD, "-D", "-e", "-f", str(self.root / "sshd_config")],
            stdout=subprocess.DEVNULL,
            stderr=(self.root / "sshd.log").open("wb"),
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with socket.socket() as s:
                s.settimeout(0.5)
                if s.connect_ex((self.address, self.port)) == 0:
                    return
            time.sleep(0.05)
        raise RuntimeError(f"sshd did not start: {(self.root / 'sshd.log').read_text()[-2000:]}")

    @property
    def log(self) -> Path:
        return self.root / "sshd.log"

    def commands(self) -> str:
        """Every command line the sessions asked for (with record_commands), one after another."""
        path = self.root / "commands.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self) -> None:
        """Kill sshd and every session it forked (the host goes away), and the playback shims of sessions
        that already ended: a command the client gave up on (a hanging nvidia-smi) outlives its session,
        reparented away from sshd, and would sleep on for an hour after the test."""
        if self.proc is not None:
            for pid in [*descendants(self.proc.pid), self.proc.pid]:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            self.proc.wait(5)
            self.proc = None
        for pid in leftover_shims(self.root / "scenario.json"):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)

    def known_hosts_line(self) -> str:
        return f"[{self.address}]:{self.port} {Path(f'{self.host_key}.pub').read_text().strip()}"


class Lab:
    """A client identity and several fake hosts."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.client_key = root / "client_ed25519"
        keygen(self.client_key)
        self.client_pub = Path(f"{self.client_key}.pub").read_text().strip()
        self.known_hosts = root / "known_hosts"
        self.known_hosts.write_text("")
        self.hosts: dict[str, FakeHost] = {}

    def add(
        self,
        name: str,
        scenario: dict[str, Any],
        tools: tuple[str, ...],
        trust: bool = True,
        address: str = "127.0.0.1",
        netns: str | None = None,
        log_level: str | None = None,
        record_commands: bool = False,
    ) -> FakeHost:
        host = FakeHost(
            name,
            self.root / name,
            scenario,
            tools,
            address=address,
            netns=netns,
            log_level=log_level,
            record_commands=record_commands,
        )
        host.setup(self.client_pub)
        host.start()
        if trust:
            with self.known_hosts.open("a") as fh:
                fh.write(host.known_hosts_line() + "\n")
        self.hosts[name] = host
        return host

    def toml(self, engines: str = "", **per_host: str) -> str:
        lines = ["[settings]", "ssh_timeout_s = 3.0", ""]
        for host in self.hosts.values():
            lines += [
                "[[hosts]]",
                f'name = "{host.name}"',
                f'address = "{host.address}"',
                f"port = {host.port}",
                'user = "root"',
                f'identity_file = "{self.client_key}"',
                f'known_hosts = "{self.known_hosts}"',
            ]
            lines += [per_host[host.name]] if host.name in per_host else []
            lines.append("")
        return "\n".join(lines) + engines

    def stop(self) -> None:
        for host in self.hosts.values():
            host.stop()


def h200_catalog(capture: Path) -> list[dict[str, str]]:
    """Rows of an all-fields `--format=csv` capture as {field: value-with-units}."""
    lines = capture.read_text().splitlines()
    header = [h.strip().split(" [")[0] for h in lines[0].split(", ")]
    return [dict(zip(header, (v.strip() for v in line.split(", ")), strict=False)) for line in lines[1:] if line]


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (sshd's per-connection children and the commands they run)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry.name))
    out: list[int] = []
    stack = [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            out.append(child)
            stack.append(child)
    return out


def leftover_shims(scenario: Path) -> list[int]:
    """Playback shims that one fake host's sessions started and that outlived their session (a command the
    client gave up on), with the session shells above them, shells first (killed first, a shell cannot
    start the next shim). sshd's SetEnv gives them this host's SHIM_SCENARIO, a path in the test's own
    directory. Anything else a session started (a container's conmon) is left alone."""
    marker = f"SHIM_SCENARIO={scenario}".encode()
    parent: dict[int, int] = {}
    marked: set[int] = set()
    shims: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        try:
            environ = (entry / "environ").read_bytes()
            cmdline = (entry / "cmdline").read_bytes()
            parent[pid] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if marker in environ.split(b"\0"):
            marked.add(pid)
            if str(PLAYBACK).encode() in cmdline.split(b"\0"):
                shims.append(pid)
    shells: list[int] = []
    for shim in shims:
        up = parent.get(shim, 0)
        while up in marked and up not in shells and up != os.getpid():
            shells.append(up)
            up = parent.get(up, 0)
    return [*shells, *shims]


class NetNamespace:
    """A network namespace joined to this one by a veth pair: a test host whose link can be cut.

    Addresses are on the namespace's own /30, which exists only inside this test's sandbox.
    """

    def __init__(self, name: str, host_ip: str = "10.250.77.1", ns_ip: str = "10.250.77.2") -> None:
        self.name, self.host_ip, self.ns_ip = name, host_ip, ns_ip
        self.veth = f"v{name[:10]}"

    def _ip(self, *args: str) -> None:
        subprocess.run(["ip", *args], check=True, capture_output=True)

    def up(self) -> NetNamespace:
        self.down()
        self._ip("netns", "add", self.name)
        self._ip("link", "add", self.veth, "type", "veth", "peer", "name", "eth0", "netns", self.name)
        self._ip("addr", "add", f"{self.host_ip}/30", "dev", self.veth)
        self._ip("link", "set", self.veth, "up")
        self._ip("-n", self.name, "addr", "add", f"{self.ns_ip}/30", "dev", "eth0")
        self._ip("-n", self.name, "link", "set", "eth0", "up")
        self._ip("-n", self.name, "link", "set", "lo", "up")
        # Safety net: if the veth route ever disappears, packets for this range die here instead of
        # following the default route off the machine.
        self._ip("route", "add", "blackhole", self.blackhole, "metric", "4000")
        return self

    @property
    def blackhole(self) -> str:
        return ".".join(self.host_ip.split(".")[:3]) + ".0/24"

    def cut(self) -> None:
        """The namespace's end goes down: packets vanish, nothing is refused (a host off the network)."""
        self._ip("-n", self.name, "link", "set", "eth0", "down")

    def down(self) -> None:
        subprocess.run(["ip", "route", "del", "blackhole", self.blackhole], capture_output=True, check=False)
        subprocess.run(["ip", "link", "del", self.veth], capture_output=True, check=False)
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True, check=False)
