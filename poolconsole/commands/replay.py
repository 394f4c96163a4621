"""`poolconsole replay`: the console on a recording: what the pool looked like then."""

from __future__ import annotations

import argparse
import asyncio
import sys

from poolconsole.commands.common import EXIT_CONFIG, EXIT_OK, TIME_VALUE, Subparsers, default_config_path, history_path
from poolconsole.config import load_config


def add_parser(sub: Subparsers) -> None:
    replay = sub.add_parser("replay", help="the console on a recording: what the pool looked like then")
    replay.add_argument("--config", metavar="FILE", default=argparse.SUPPRESS)
    replay.add_argument("--store", metavar="PATH", help="history store (default: [store] path, else user data dir)")
    replay.add_argument("--from", dest="start", metavar="TIME", help="where to start: ISO 8601 (UTC), -10m, -2h")
    replay.add_argument("--speed", type=float, default=1.0, metavar="N", help="recorded seconds per second (1)")
    replay._negative_number_matcher = TIME_VALUE
    replay.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """The console on recorded data, read-only, with pause, seek and speed; the time shown is the recording's."""
    import time

    from poolconsole.runtime.replay import Replay
    from poolconsole.runtime.store import StoreProblem, parse_time

    if not 0 < args.speed <= 1000:
        print("poolconsole replay: --speed must be above 0 and at most 1000", file=sys.stderr)
        return EXIT_CONFIG
    chosen = args.config or (None if args.store else default_config_path())
    config = load_config(chosen) if chosen else None  # its engines' model and profile, where they match
    path = history_path(config, args)
    try:
        start = parse_time(args.start, time.time()) if args.start else None
        replay = Replay(path, start, args.speed, config)
    except (StoreProblem, ValueError) as exc:
        print(f"poolconsole replay: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    try:
        from poolconsole.ui.app import PoolApp
        from poolconsole.ui.launch import run_app

        asyncio.run(run_app(PoolApp(replay.config, replay=replay, subtitle=f"replay of {path}")))
    finally:
        replay.close()
    return EXIT_OK
