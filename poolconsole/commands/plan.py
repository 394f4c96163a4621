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
    from poolconsole.model.hosts import HostSnapshot
    from poolconsole.ops import audit
    from poolconsole.ops.fit import KvCapacity
    from poolconsole.ops.planning import plan_lines, poll_hosts, read_kv

    config = load(args.config)
    audit_path = audit_read(args, demo_stores_of(args.config), writes=False)
    active = {e.name: audit.active_profile(audit_path, e.name) or e.profile or "" for e in config.engines}
    snapshots: dict[str, HostSnapshot] = {}
    kv: dict[str, KvCapacity | None] = {}
    if not args.offline:

        async def read() -> tuple[dict[str, HostSnapshot], dict[str, KvCapacity | None]]:
            return await asyncio.gather(
                poll_hosts(config, {h.name for h in config.hosts}),
                read_kv([e for e in config.engines if e.profiles], config),
            )

        snapshots, kv = asyncio.run(read())
    for line in plan_lines(config, snapshots, kv, active, args.offline):
        print(line)
    return EXIT_OK
