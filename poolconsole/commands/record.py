"""`poolconsole record`: the pool polled headless into the history store until stopped."""

from __future__ import annotations

import argparse
import asyncio
import sys

from poolconsole.commands.common import EXIT_CONFIG, EXIT_OK, Subparsers, default_config_path, empty, history_path, load
from poolconsole.config.example import EXAMPLE_DOMAIN, names_example_hosts


def add_parser(sub: Subparsers) -> None:
    record = sub.add_parser("record", help="poll the pool headless into the history store until stopped")
    record.add_argument("--config", metavar="FILE", default=argparse.SUPPRESS)
    record.add_argument("--store", metavar="PATH", help="history store (default: [store] path, else user data dir)")
    record.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """The live pool polled headless into the history store until SIGINT, SIGTERM (systemd's stop) or SIGHUP."""
    from poolconsole.runtime.live import LivePool
    from poolconsole.runtime.stopping import stop_on_signals
    from poolconsole.runtime.store import Store, StoreProblem, record

    config = load(args.config)
    if empty(config, args, "record"):
        return EXIT_CONFIG
    source = args.config or default_config_path()
    if names_example_hosts(config):
        print(
            f"poolconsole record: {source} names the example pool's fictional hosts ({EXAMPLE_DOMAIN}): "
            "nothing to record; point --config at your pool",
            file=sys.stderr,
        )
        return EXIT_CONFIG
    path = history_path(config, args)

    def problem(message: str) -> None:
        print(f"poolconsole record: {message}", file=sys.stderr, flush=True)

    try:
        store = Store.for_config(config, path, on_problem=problem)
    except StoreProblem as exc:
        print(f"poolconsole record: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    pool = LivePool(config, recorder=store)
    kept = config.store
    print(
        f"recording {len(config.engines)} engine(s) and {len(config.hosts)} host(s) of {source} every "
        f"{config.settings.poll_interval_s:g} s into {path} (every poll for {kept.full_resolution_hours:g} h, "
        f"then 1-minute rollups for {kept.rollup_days:g} days); SIGINT, SIGTERM or SIGHUP stops",
        flush=True,
    )

    async def run() -> None:
        stop = asyncio.Event()
        with stop_on_signals(stop):
            await record(pool, store, stop)

    try:
        asyncio.run(run())
    finally:
        store.close()  # already closed by record(); here for an interrupt before the loop ran
    print(f"stopped: {store.polls_written} polls written to {path}", flush=True)
    return EXIT_OK
