"""`poolconsole plan`: what runs where and what fits."""

from __future__ import annotations

import argparse
import asyncio

from poolconsole.commands.common import EXIT_OK, Subparsers, audit_read, demo_stores_of, load


def add_parser(sub: Subparsers) -> None:
    plan = sub.add_parser("plan", help="what runs where and what fits, from the live pool")
    plan.add_argument("--config", metavar="FILE", default=argparse.SUPPRESS)
    plan.add_argument("--offline", action="store_true", help="the config's figures only; poll nothing")
    plan.add_argument("--audit-db", metavar="PATH", help="audit database: the profiles active after rollovers")
    plan.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """What runs where and what fits: every engine's profiles through the fit check, against a poll of
    the pool (each host's GPUs and what other processes hold on them, the engines' own KV figures), or
    with --offline against the config alone."""
    from poolconsole.workflows import fit

    config = load(args.config)
    audit_path = audit_read(args, demo_stores_of(args.config), writes=False)
    active = fit.active_profiles(config, audit_path)  # read first: an unreadable log is said before any poll
    measured = None if args.offline else asyncio.run(fit.measure(config))
    for line in fit.instance_map(config, active, measured):
        print(line)
    return EXIT_OK
