"""`poolconsole export`: the history store's rows as JSON lines or CSV."""

from __future__ import annotations

import argparse
import sys

from poolconsole.commands.common import EXIT_CONFIG, EXIT_OK, TIME_VALUE, Subparsers, default_config_path, history_path
from poolconsole.config import load_config


def add_parser(sub: Subparsers) -> None:
    export_cmd = sub.add_parser("export", help="the history store's rows as JSON lines or CSV")
    export_cmd.add_argument("--config", metavar="FILE", default=argparse.SUPPRESS)
    export_cmd.add_argument("--store", metavar="PATH", help="history store (default: [store] path, else user data dir)")
    export_cmd.add_argument("--format", choices=["jsonl", "csv"], default="jsonl", help="default jsonl")
    export_cmd.add_argument("--from", dest="start", metavar="TIME", help="ISO 8601 (UTC if no offset), -10m, -7d")
    export_cmd.add_argument("--to", dest="end", metavar="TIME", help="end, exclusive (same forms; default now)")
    export_cmd.add_argument("--target", action="append", metavar="NAME", help="only this engine or host (repeatable)")
    # `--from -10m` is a value, not an option: argparse takes only negative numbers as values
    export_cmd._negative_number_matcher = TIME_VALUE
    export_cmd.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """The history store's rows, one per poll (or 1-minute rollup) per target, as JSON lines or CSV."""
    import math
    import time

    from poolconsole.runtime.store import StoreProblem, export, parse_time

    chosen = None if args.store else (args.config or default_config_path())
    path = history_path(load_config(chosen) if chosen else None, args)
    now = time.time()
    try:
        start = parse_time(args.start, now) if args.start else -math.inf
        end = parse_time(args.end, now) if args.end else math.inf
    except ValueError as exc:
        print(f"poolconsole export: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    try:
        export(path, args.format, sys.stdout, start, end, args.target)
    except StoreProblem as exc:
        print(f"poolconsole export: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    sys.stdout.flush()  # a closed pipe raises here, inside main's handler, not at the interpreter's exit
    return EXIT_OK
