"""A container's own restart record, for engines run by docker or podman: `inspect` gives the restart
count and the start time, so a restart the engine's counters cannot show (an idle engine, whose
counters were 0, or llama.cpp, which exports no start time) is still seen. Read only when an engine
comes back from being down, and once for a baseline: never on the poll path."""

from __future__ import annotations

import datetime as dt
import re
import shlex
from dataclasses import dataclass

from poolconsole.config.models import Control

FORMAT = "{{.RestartCount}} {{.State.StartedAt}}"


@dataclass(frozen=True)
class ContainerStart:
    restart_count: int | None
    started_at: str

    @property
    def started_epoch(self) -> float | None:
        """StartedAt as Unix seconds (docker and podman write nanoseconds and a zone); None if unreadable."""
        text = re.sub(r"(\.\d{6})\d+", r"\1", self.started_at.replace("Z", "+00:00"))
        try:
            return dt.datetime.fromisoformat(text).timestamp()
        except ValueError:
            return None


def inspect_command(control: Control | None) -> str | None:
    """The fixed inspect command line for a docker / podman control table (None for other backends)."""
    if control is None or control.backend not in ("docker", "podman"):
        return None
    return shlex.join([control.binary or control.backend, "inspect", "--format", FORMAT, control.name])


def parse_inspect(text: str) -> ContainerStart | None:
    """`RestartCount StartedAt`, e.g. "2 2026-12-01T09:40:12.123456789Z"; None when it is not that."""
    parts = text.strip().split()
    if len(parts) != 2 or not parts[1][:4].isdigit():
        return None
    return ContainerStart(int(parts[0]) if parts[0].isdigit() else None, parts[1])


def restarted(before: ContainerStart | None, after: ContainerStart | None) -> str | None:
    """Why `after` is a restart of `before`, in words (None when it is the same start, or unknown)."""
    if before is None or after is None or before.started_at == after.started_at:
        return None
    if before.restart_count is not None and after.restart_count is not None:
        return f"container restarted, restart count {before.restart_count} -> {after.restart_count}"
    return "container restarted, new start time"
