"""`poolconsole audit`: the audit log of every action."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from poolconsole.commands.common import EXIT_OK, Subparsers, stores_read


def add_parser(sub: Subparsers) -> None:
    audit_cmd = sub.add_parser("audit", help="the audit log of every action")
    audit_cmd.add_argument("--config", metavar="FILE", default=argparse.SUPPRESS)
    audit_cmd.add_argument("--json", action="store_true")
    audit_cmd.add_argument("--limit", type=int, default=50)
    audit_cmd.add_argument(
        "--db", metavar="PATH", help="audit database (default: user data dir; the demo's for its hosts.toml)"
    )
    audit_cmd.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from poolconsole.workflows import audit_log
    from poolconsole.workflows.stores import StoreUnusable

    demo = None if args.db else stores_read(args)
    path = Path(args.db) if args.db else demo[0] if demo else audit_log.default_path()
    if args.db and not path.exists():  # a path typed on the command line: a typo, not an empty log
        raise StoreUnusable(f"no audit log at {path}")
    rows = audit_log.entries(path, args.limit)
    if args.json:
        print(json.dumps([e.to_json() for e in rows], indent=2))
        return EXIT_OK
    for e in rows:
        print(e.text())
    if not rows:
        print(f"no actions recorded in {path}")
        if not args.db and demo is None:
            from poolconsole.sim.demo_run import latest_demo_audit

            latest = latest_demo_audit()
            if latest is not None:  # the demo console's actions are kept apart from the user's
                print(f"the demo console records its own: poolconsole audit --db {latest}")
    return EXIT_OK
