"""`poolconsole logs ENGINE`: an engine's log over SSH, diagnosed with the failure-mode library
(workflows/logs.py), as text, JSON, or followed line by line."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING

from poolconsole.commands.common import Subparsers, load

if TYPE_CHECKING:
    from poolconsole.model.failure_modes import Finding


def add_parser(sub: Subparsers) -> None:
    logs_cmd = sub.add_parser("logs", help="an engine's log over SSH, with the failure modes it shows")
    logs_cmd.add_argument("engine")
    logs_cmd.add_argument("--config", metavar="FILE", default=argparse.SUPPRESS)
    logs_cmd.add_argument("--since", metavar="10m", help="only lines this recent (s, m, h, d)")
    logs_cmd.add_argument("--follow", action="store_true", help="keep printing new lines until Ctrl-C")
    logs_cmd.add_argument("--json", action="store_true", help="one JSON document (with --follow: one per line)")
    logs_cmd.add_argument("--lines", type=int, default=500, metavar="N", help="newest lines to read (default 500)")
    logs_cmd.add_argument("--max-bytes", type=int, default=2 * 1024 * 1024, metavar="N", help=argparse.SUPPRESS)
    logs_cmd.set_defaults(func=run)


def _print_findings(findings: Iterable[Finding]) -> None:
    from poolconsole.workflows.logs import finding_lines

    for f in findings:
        for line in finding_lines(f):
            print(line)


def run(args: argparse.Namespace) -> int:
    """`poolconsole logs ENGINE [--since 10m] [--follow] [--json] [--lines N]`: 0 no failure mode found, 1 a
    failure mode found or the log unreadable, 2 a config or usage problem."""
    from poolconsole.workflows import logs

    config = load(args.config)
    try:
        job = logs.job(config, args.engine, args.since, args.lines, args.max_bytes, follow=args.follow)
    except logs.LogsRefused as exc:
        print(f"poolconsole logs: {exc}", file=sys.stderr)
        return 2

    if not args.follow:
        got = asyncio.run(logs.read_once(job))
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

    print(f"# following {job.source} on {job.host.name} (Ctrl-C stops)", file=sys.stderr)
    try:
        asyncio.run(logs.follow(job, show))
    except logs.LogsFailed as exc:
        print(f"poolconsole logs: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        pass
    return 1 if found else 0
