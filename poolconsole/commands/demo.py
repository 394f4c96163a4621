"""`poolconsole demo`: a simulated pool on 127.0.0.1, with the console on it (or only the pool)."""

from __future__ import annotations

import argparse
import sys

from poolconsole.commands import launch
from poolconsole.commands.common import EXIT_CONFIG, Subparsers
from poolconsole.sim.demo_files import SCENARIOS


def add_parser(sub: Subparsers) -> None:
    demo = sub.add_parser("demo", help="a simulated pool on 127.0.0.1, with the console on it")
    demo.add_argument("--serve-only", action="store_true", help="only run the pool (for tests and tools)")
    demo.add_argument("--config-out", metavar="FILE", help="write the pool's hosts.toml here once it answers")
    demo.add_argument("--scenario", choices=SCENARIOS, default="normal")
    demo.add_argument("--nodes", type=int, default=0, metavar="N", help="extra replicated nodes (up to 256)")
    demo.add_argument("--seed", type=int, default=1, help="random seed (repeatable runs)")
    demo.add_argument(
        "--read-only",
        action="store_true",
        default=argparse.SUPPRESS,
        help="hide and refuse every action that changes anything",
    )
    demo.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from poolconsole.sim.demo_run import BackgroundPool, demo_config_path, serve_only

    if not 0 <= args.nodes <= 256:
        print("poolconsole demo: --nodes must be between 0 and 256", file=sys.stderr)
        return EXIT_CONFIG
    if args.serve_only:
        from poolconsole.runtime.stopping import stop_on_signals

        return serve_only(args, stop_on_signals)
    if args.config_out is None:
        args.config_out = str(demo_config_path())
    with BackgroundPool(args) as config_path:
        demo = launch.demo_console(config_path, args.scenario)
        return launch.open_console(
            demo.config, args.read_only, demo.subtitle, demo.hint, store=demo.store, stores=demo.stores
        )
