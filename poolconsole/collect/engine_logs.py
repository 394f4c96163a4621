"""Engine logs over SSH, read through the engine's control backend (docker / podman / compose logs,
journalctl for a systemd unit, supervisorctl tail) or a declared `[engines.logs]` source (those, or a file
on the host), and diagnosed with the failure-mode library.

Reads are bounded twice: by lines (`--tail`, `-n`) in the command, and by bytes on the host (`tail -c`
keeps the newest bytes) so a log of endless lines cannot flood the SSH channel; each line is cut at
MAX_LINE_CHARS here. Every argument is shell-quoted (shlex); the log's text only ever travels back over the
channel, to be redacted (model.redaction) before it is shown, diagnosed or stored; it never reaches a shell.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, replace

from poolconsole.collect.ssh import HostConnection, SSHFailure
from poolconsole.config.models import Engine, LogSource
from poolconsole.model.failure_modes import Finding, diagnose
from poolconsole.model.log_read import LogRead
from poolconsole.model.redaction import redact

DEFAULT_LINES = 500
MAX_LINES = 100_000
DEFAULT_BYTES = 2 * 1024 * 1024
MAX_LINE_CHARS = 4096
READ_TIMEOUT_S = 30.0
EXIT_MARK = "poolconsole-log-exit:"
SINCE = re.compile(r"^(\d{1,7})\s*(s|m|min|h|d)$")
CONTROL = re.compile(r"\x1b\[[0-9;?]*+[A-Za-z]|[\x00-\x08\x0b-\x1f\x7f]")
"""A terminal escape or a control character (tab kept)."""
UNITS = {"s": 1, "m": 60, "min": 60, "h": 3600, "d": 86400}


class LogsUnavailable(Exception):
    """The engine has no log source this can read (the message says what to declare); `short` in a few words
    for a toast, which cuts a long message (the CLI prints it whole)."""

    def __init__(self, message: str, short: str | None = None) -> None:
        super().__init__(message)
        self.short = short or message


def parse_since(text: str) -> int:
    """`10m`, `2h`, `30s`, `1d` as seconds; ValueError otherwise."""
    found = SINCE.match(text.strip())
    if found is None:
        raise ValueError(f"--since takes a duration such as 30s, 10m, 2h or 1d, not {text!r}")
    return int(found.group(1)) * UNITS[found.group(2)]


@dataclass(frozen=True)
class LogPlan:
    """The argv that prints the engine's log on its host, and what it reads."""

    source: str
    """In words: "docker logs vllm-qwen", "journalctl -u llama.service", "file /var/log/x.log"."""
    argv: tuple[str, ...]
    since_applies: bool
    """False for supervisorctl tail and files (no timestamps to select by): `--since` is then not applied."""


def log_source(engine: Engine) -> LogSource:
    """The declared source, else the one the control backend implies; LogsUnavailable when neither."""
    if engine.logs is not None:
        return engine.logs
    control = engine.control
    if control is None:
        raise LogsUnavailable(
            f"engine {engine.name} has neither [engines.logs] nor [engines.control]: declare where its log is "
            '(e.g. [engines.logs] source = "docker", name = "CONTAINER", or source = "file", path = "/var/log/...")',
            f"{engine.name}: no log source; declare [engines.logs] (`poolconsole logs {engine.name}` shows how)",
        )
    match control.backend:
        case "docker" | "podman":
            return LogSource(source=control.backend, name=control.name, binary=control.binary)
        case "systemd":
            return LogSource(source="journald", name=control.name, user_unit=control.user_unit)
        case "supervisor":
            return LogSource(
                source="supervisor", name=control.name, binary=control.binary, supervisor_conf=control.supervisor_conf
            )
        case "compose":
            # compose logs are read through compose itself, see log_plan
            return LogSource(source="docker", name=control.name, binary=control.binary)
    raise LogsUnavailable(
        f"engine {engine.name} is controlled by a custom command, whose log poolconsole cannot guess: declare "
        "[engines.logs] (source docker, podman, journald, supervisor or file)",
        f"{engine.name}: a custom command's log cannot be guessed; declare [engines.logs]",
    )


def has_log_source(engine: Engine) -> bool:
    try:
        log_source(engine)
    except LogsUnavailable:
        return False
    return True


def log_plan(engine: Engine, since_s: int | None, lines: int, max_bytes: int, follow: bool = False) -> LogPlan:
    """The argv for the engine's log: the newest `lines` lines (since `since_s` seconds ago where the source
    has timestamps), following new ones with `follow`."""
    lines = max(1, min(lines, MAX_LINES))
    src = log_source(engine)
    control = engine.control
    compose = engine.logs is None and control is not None and control.backend == "compose"
    since = ["--since", f"{since_s}s"] if since_s is not None else []
    match src.source:
        case "docker" | "podman" if compose:
            assert control is not None and control.compose_dir is not None
            argv = [src.binary or "docker", "compose", "--project-directory", control.compose_dir, "logs"]
            argv += ["--no-color", "--tail", str(lines), *since, *(["--follow"] if follow else []), control.name]
            return LogPlan(f"docker compose logs {control.name}", tuple(argv), True)
        case "docker" | "podman":
            binary = src.binary or src.source
            argv = [binary, "logs", "--tail", str(lines), *since, *(["--follow"] if follow else [])]
            assert src.name is not None
            return LogPlan(f"{src.source} logs {src.name}", (*argv, src.name), True)
        case "journald":
            assert src.name is not None
            argv = [src.binary or "journalctl", *(["--user"] if src.user_unit else []), "-u", src.name]
            argv += ["--no-pager", "-o", "short-iso", "-n", str(lines)]
            argv += [*(["--since", f"-{since_s}s"] if since_s is not None else []), *(["-f"] if follow else [])]
            return LogPlan(f"journalctl -u {src.name}", tuple(argv), True)
        case "supervisor":
            assert src.name is not None
            conf = ["-c", src.supervisor_conf] if src.supervisor_conf else []
            tail = ["tail", "-f", src.name] if follow else ["tail", f"-{max_bytes}", src.name]
            return LogPlan(f"supervisorctl tail {src.name}", (src.binary or "supervisorctl", *conf, *tail), False)
        case "file":
            assert src.path is not None
            argv = ["tail", "-n", str(lines), *(["-F"] if follow else []), "--", src.path]
            return LogPlan(f"file {src.path}", tuple(argv), False)
    raise LogsUnavailable(f"unknown log source {src.source}")


def read_command(plan: LogPlan, max_bytes: int) -> str:
    """The one-shot read as a shell line: the log (stderr too: containers log there), then its exit status on
    a line of its own, and only the newest `max_bytes` (plus that line) leave the host."""
    return f"{{ {shlex.join(plan.argv)} 2>&1; printf '\\n{EXIT_MARK}%s\\n' \"$?\"; }} | tail -c {int(max_bytes) + 64}"


def follow_command(plan: LogPlan) -> str:
    return f"{shlex.join(plan.argv)} 2>&1"


def clean(line: str) -> str:
    """A line as it may be shown: cut to MAX_LINE_CHARS, control characters (terminal escapes) dropped,
    secrets redacted. Linear in the line (a caller's prompt can be in it): about a millisecond for the longest,
    which times a read's hundreds of lines is still too long for the event loop, so reads clean in a thread."""
    line = line[:MAX_LINE_CHARS].rstrip("\r")
    return redact(CONTROL.sub("", line))


def parse_read(stdout: str, max_bytes: int) -> tuple[list[str], int | None, bool]:
    """(lines, the command's exit status, truncated) from a read_command's output."""
    at = stdout.rfind("\n" + EXIT_MARK)
    status: int | None = None
    body = stdout
    if at >= 0:
        tail = stdout[at + 1 + len(EXIT_MARK) :].strip()
        status = int(tail) if tail.isdigit() else None
        body = stdout[:at]
    truncated = len(stdout.encode()) >= max_bytes + 64
    lines = body.split("\n")
    if truncated and lines:
        lines = lines[1:]  # tail -c cut the oldest line somewhere in its middle
    if lines and lines[-1] == "":
        lines = lines[:-1]  # the log's own last newline (printf's newline keeps an unterminated line whole)
    return [clean(line) for line in lines], status, truncated


def _parse_and_diagnose(stdout: str, max_bytes: int) -> tuple[list[str], int | None, bool, list[Finding]]:
    """parse_read, and the failure modes its lines show: the CPU part of a read, for a thread."""
    lines, status, truncated = parse_read(stdout, max_bytes)
    return lines, status, truncated, diagnose(lines)


def _seen(raws: list[str]) -> list[tuple[str, Finding | None]]:
    """Each followed line cleaned, with the failure mode it shows: for a thread, like a read's."""
    out: list[tuple[str, Finding | None]] = []
    for raw in raws:
        line = clean(raw)
        found = diagnose([line])
        out.append((line, found[0] if found else None))
    return out


async def read_logs(
    conn: HostConnection,
    engine: Engine,
    *,
    since_s: int | None = None,
    lines: int = DEFAULT_LINES,
    max_bytes: int = DEFAULT_BYTES,
    timeout_s: float = READ_TIMEOUT_S,
) -> LogRead:
    """The engine's newest log lines over SSH, diagnosed; failure (SSH, the log command) is in `error`."""
    plan = log_plan(engine, since_s, lines, max_bytes)
    command = read_command(plan, max_bytes)
    note = None if plan.since_applies or since_s is None else f"{plan.source} has no timestamps: --since not applied"
    host = conn.host.name
    try:
        result = await conn.run(command, timeout_s)
    except SSHFailure as exc:
        return LogRead(engine.name, host, plan.source, redact(command), (), (), error=exc.message, note=note)
    got, status, truncated, findings = await asyncio.to_thread(_parse_and_diagnose, result.stdout, max_bytes)
    error = None
    if status is None:
        error = f"{plan.source}: no exit status came back (stderr: {clean(result.stderr.strip())[:300]})"
    elif status != 0:
        last = next((line for line in reversed(got) if line.strip()), "no output")
        error = f"{plan.source} exited {status}: {last[:300]}"
    return LogRead(engine.name, host, plan.source, redact(command), tuple(got), tuple(findings), truncated, error, note)


async def follow_logs(
    conn: HostConnection,
    engine: Engine,
    on_line: Callable[[str, Finding | None], None],
    *,
    since_s: int | None = None,
    lines: int = DEFAULT_LINES,
    max_bytes: int = DEFAULT_BYTES,
) -> None:
    """Each new line (cleaned, with the failure mode it shows, if any) to `on_line` until cancelled or the
    log command ends. A line without an end is cut at MAX_LINE_CHARS, never buffered without bound."""
    plan = log_plan(engine, since_s, lines, max_bytes, follow=True)
    process = await conn.start(follow_command(plan))
    pending = ""
    number = 0

    async def emit(raws: list[str]) -> None:
        nonlocal number
        if not raws:
            return
        for line, seen in await asyncio.to_thread(_seen, raws):
            number += 1
            on_line(line, replace(seen, line_no=number) if seen is not None else None)

    try:
        while True:
            chunk = await process.stdout.read(65536)
            if not chunk:
                break
            pending += chunk
            *complete, pending = pending.split("\n")
            if len(pending) > MAX_LINE_CHARS:
                complete.append(pending)
                pending = ""
            await emit(complete)
        if pending:
            await emit([pending])
    finally:
        process.close()
        with contextlib.suppress(Exception):
            async with asyncio.timeout(2):
                await process.wait_closed()
