"""An engine's log over SSH (collect.engine_logs), with the failure modes it shows (model.failure_modes): the
engine and host chosen from the config and the reading bounded (`job`), then read once or followed line by
line. `poolconsole logs` prints what these return (commands/logs.py); the console's log screen reads the same
engine through its own SSH pool (pass `ssh`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial

from poolconsole.collect.engine_logs import LogsUnavailable, follow_logs, log_plan, parse_since, read_logs
from poolconsole.collect.ssh import SSHFailure, SSHPool
from poolconsole.config.models import Engine, Host, PoolConfig
from poolconsole.model.failure_modes import Finding
from poolconsole.model.log_read import LogRead

__all__ = [
    "ConsoleLog",
    "LogJob",
    "LogsFailed",
    "LogsRefused",
    "console_log",
    "finding_lines",
    "follow",
    "job",
    "read_once",
]


class LogsRefused(Exception):
    """A config or usage problem, in words (no such engine, no host, a bad --since): nothing was read."""


class LogsFailed(Exception):
    """The followed log's SSH session failed, in words."""


@dataclass(frozen=True)
class LogJob:
    """What to read: the engine, its host and the reading's bounds, checked against the config."""

    config: PoolConfig
    engine: Engine
    host: Host
    since_s: int | None
    lines: int
    max_bytes: int
    source: str
    """The log's source in words ("docker logs vllm-qwen")."""


def job(config: PoolConfig, name: str, since: str | None, lines: int, max_bytes: int, *, follow: bool) -> LogJob:
    """The reading of engine `name`'s log, or LogsRefused saying why not."""
    engine = next((e for e in config.engines if e.name == name), None)
    if engine is None:
        raise LogsRefused(f"no engine named {name} in the config")
    host = config.host(engine.host)
    if host is None:
        raise LogsRefused(f"engine {engine.name} names no [[hosts]] entry to read its log on")
    try:
        since_s = parse_since(since) if since else None
        plan = log_plan(engine, since_s, lines, max_bytes, follow=follow)
    except (ValueError, LogsUnavailable) as exc:
        raise LogsRefused(str(exc)) from None
    return LogJob(config, engine, host, since_s, lines, max_bytes, plan.source)


def _pool(j: LogJob) -> SSHPool:
    return SSHPool([j.host], j.config.settings.ssh_timeout_s, 2)


async def read_once(j: LogJob, ssh: SSHPool | None = None) -> LogRead:
    """The newest lines with their findings; a failure to read is the LogRead's `error`. `ssh`: the asker's
    pool (the console's, left open); None: one is opened for this read and closed after."""
    pool = ssh or _pool(j)
    conn = pool.connections.get(j.host.name) or pool.add(j.host)
    try:
        return await read_logs(conn, j.engine, since_s=j.since_s, lines=j.lines, max_bytes=j.max_bytes)
    finally:
        if ssh is None:
            await pool.close()


async def follow(j: LogJob, show: Callable[[str, Finding | None], None], ssh: SSHPool | None = None) -> None:
    """Each new line (with its finding, if any) to `show` until cancelled; LogsFailed when SSH fails. `ssh`: as
    for `read_once`."""
    pool = ssh or _pool(j)
    conn = pool.connections.get(j.host.name) or pool.add(j.host)
    try:
        await follow_logs(conn, j.engine, show, since_s=j.since_s, lines=j.lines, max_bytes=j.max_bytes)
    except SSHFailure as exc:
        raise LogsFailed(exc.message) from None
    finally:
        if ssh is None:
            await pool.close()


@dataclass(frozen=True)
class ConsoleLog:
    """An engine's log as the console's log screen reads it, on the console's SSH pool."""

    source: str
    """The log's source in words ("docker logs vllm-qwen")."""
    read: Callable[[], Awaitable[LogRead]]
    """The newest lines (the default bounds), with their findings."""
    follow: Callable[[Callable[[str, Finding | None], None]], Awaitable[None]]
    """Each new line after the newest one, until cancelled."""


def console_log(engine: Engine, host: Host, ssh: SSHPool) -> ConsoleLog:
    """The reading of `engine`'s log on `host` through `ssh`; LogsRefused, in a few words for a toast, where the
    engine has no log source to read."""
    try:
        source = log_plan(engine, None, 1, 1).source
    except LogsUnavailable as exc:
        raise LogsRefused(exc.short) from None
    conn = ssh.connections.get(host.name) or ssh.add(host)
    return ConsoleLog(
        source,
        partial(read_logs, conn, engine),
        lambda on_line: follow_logs(conn, engine, on_line, lines=1),
    )


def finding_lines(f: Finding) -> list[str]:
    """A finding in the three lines `logs` prints under the log."""
    return [
        f"!! {f.title} (x{f.count}, last at line {f.line_no}): {f.diagnosis}",
        f"   change: {f.adjustment}",
        f"   line: {f.line[:400]}",
    ]
