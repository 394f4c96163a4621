"""`poolconsole logs ENGINE`: an engine's log over SSH (collect.engine_logs), with the failure modes it
shows (model.failure_modes), as text, JSON, or followed line by line."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

from poolconsole.collect.engine_logs import LogRead, LogsUnavailable, follow_logs, log_plan, parse_since, read_logs
from poolconsole.collect.ssh import SSHFailure, SSHPool
from poolconsole.config.models import PoolConfig
from poolconsole.model.failure_modes import Finding


def _print_findings(findings: tuple[Finding, ...] | list[Finding]) -> None:
    for f in findings:
        print(f"!! {f.title} (x{f.count}, last at line {f.line_no}): {f.diagnosis}")
        print(f"   change: {f.adjustment}")
        print(f"   line: {f.line[:400]}")


def cli(config: PoolConfig, args: argparse.Namespace) -> int:
    """`poolconsole logs ENGINE [--since 10m] [--follow] [--json] [--lines N]`: 0 no failure mode found, 1 a
    failure mode found or the log unreadable, 2 a config or usage problem."""
    engine = next((e for e in config.engines if e.name == args.engine), None)
    if engine is None:
        print(f"poolconsole logs: no engine named {args.engine} in the config", file=sys.stderr)
        return 2
    host = config.host(engine.host)
    if host is None:
        print(f"poolconsole logs: engine {engine.name} names no [[hosts]] entry to read its log on", file=sys.stderr)
        return 2
    try:
        since_s = parse_since(args.since) if args.since else None
        plan = log_plan(engine, since_s, args.lines, args.max_bytes, follow=args.follow)
    except (ValueError, LogsUnavailable) as exc:
        print(f"poolconsole logs: {exc}", file=sys.stderr)
        return 2
    pool = SSHPool([host], config.settings.ssh_timeout_s, 2)
    conn = pool[host.name]

    if not args.follow:

        async def once() -> LogRead:
            try:
                return await read_logs(conn, engine, since_s=since_s, lines=args.lines, max_bytes=args.max_bytes)
            finally:
                await pool.close()

        got = asyncio.run(once())
        if args.json:
            print(json.dumps(got.to_json(), indent=2))
        else:
            print(f"# {got.source} on {got.host}" + (f" ({got.note})" if got.note else ""), file=sys.stderr)
            for line in got.lines:
                print(line)
            _print_findings(got.findings)
            if got.error:
                print(f"poolconsole logs: {got.error}", file=sys.stderr)
        return 1 if got.error or got.findings else 0

    found: list[Finding] = []

    def show(line: str, finding: Finding | None) -> None:
        if finding is not None:
            found.append(finding)
        if args.json:
            print(json.dumps({"line": line, "finding": finding.to_json() if finding else None}), flush=True)
        else:
            print(line, flush=True)
            if finding is not None:
                _print_findings([finding])

    async def follow() -> None:
        try:
            await follow_logs(conn, engine, show, since_s=since_s, lines=args.lines, max_bytes=args.max_bytes)
        finally:
            await pool.close()

    print(f"# following {plan.source} on {host.name} (Ctrl-C stops)", file=sys.stderr)
    try:
        asyncio.run(follow())
    except SSHFailure as exc:
        print(f"poolconsole logs: {exc.message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        pass
    return 1 if found else 0
