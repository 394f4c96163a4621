"""A host connection answering HostPoller's fixed commands from canned outputs (real captures or minimal
variants of them), recording every command it was asked to run: the poller's logic without sshd (the
real sshd path is tests/integration/test_hosts_ssh.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from poolconsole.collect.hosts import nvidia_smi as nv
from poolconsole.collect.hosts import xid
from poolconsole.collect.hosts.poll import MARK, PROBE, HostPoller
from poolconsole.collect.ssh import CommandResult, HostConnection, SSHFailure
from poolconsole.config import parse_config
from poolconsole.model.hosts import HostSnapshot

Answer = str | Callable[[], str] | SSHFailure


class FakeConnection:
    """`answers` maps the start of a command to its output (a callable is asked each time; an SSHFailure
    is raised). Commands of a batch are answered one by one, each followed by its exit-status marker."""

    timeout_s = 5.0

    def __init__(self, answers: dict[str, Answer]) -> None:
        self.answers = answers
        self.commands: list[str] = []

    def _answer(self, command: str) -> str:
        for start, answer in self.answers.items():
            if command.startswith(start):
                if isinstance(answer, SSHFailure):
                    raise answer
                return answer() if callable(answer) else answer
        raise AssertionError(f"unexpected command: {command!r}")

    async def run(self, command: str, timeout_s: float | None = None) -> CommandResult:
        self.commands.append(command)
        if MARK not in command:
            return CommandResult(command, 0, self._answer(command), "", 0.001)
        parts = [c for c in command.split(f" 2>&1; echo {MARK}$?;") if c.strip()]
        out = "".join(f"{self._answer(c.strip())}\n{MARK}0\n" for c in parts)
        return CommandResult(command, 0, out, "", 0.001)

    async def start(self, command: str) -> Any:
        raise AssertionError("no streaming in these tests")


def nvidia_answers(
    gpu_rows: list[dict[str, str]], apps_csv: str | Callable[[], str], meminfo: str
) -> dict[str, Answer]:
    """An NVIDIA host: `gpu_rows` as {field: value} (h200_catalog's shape), compute apps as noheader CSV."""

    def query() -> str:
        return "\n".join(", ".join(row.get(f, "[N/A]") for f in nv.FULL_FIELDS) for row in gpu_rows)

    return {
        PROBE: "nvidia-smi\nLinux\n",
        "nvidia-smi --query-gpu=": query,
        "nvidia-smi --query-compute-apps=": apps_csv,
        "cat /proc/meminfo": meminfo,
        xid.COMMAND: "86400.00 1296000.00\n",  # the kernel log read, no Xid in it
    }


def poller(toml: str, host: str, conn: FakeConnection) -> HostPoller:
    config = parse_config(toml)
    chosen = next(h for h in config.hosts if h.name == host)
    return HostPoller(chosen, cast(HostConnection, conn), config.engines)


async def poll(toml: str, host: str, conn: FakeConnection) -> HostSnapshot:
    return await poller(toml, host, conn).poll()
