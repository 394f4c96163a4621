"""`poolconsole exporter`: the pool on /metrics for Prometheus."""

from __future__ import annotations

import argparse
import sys

from poolconsole.commands.common import EXIT_CONFIG, EXIT_OK, Subparsers, empty, load


def add_parser(sub: Subparsers) -> None:
    exporter = sub.add_parser("exporter", help="serve the pool on /metrics for Prometheus")
    exporter.add_argument("--config", metavar="FILE", default=argparse.SUPPRESS)
    exporter.add_argument(
        "--listen", default="127.0.0.1:9877", metavar="HOST:PORT", help="address to serve (default 127.0.0.1:9877)"
    )
    exporter.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """The pool on /metrics for Prometheus, built from the live pool's state at each scrape."""
    from poolconsole.runtime.exporter import ListenError, parse_listen, run

    try:
        host, port = parse_listen(args.listen)
        config = load(args.config)
        if empty(config, args, "poll"):
            return EXIT_CONFIG
        run(config, host, port)
    except ListenError as exc:
        print(f"poolconsole exporter: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    return EXIT_OK
