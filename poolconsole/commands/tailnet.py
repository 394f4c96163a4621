"""`poolconsole tailnet`: each host on the tailnet: direct or relayed, online, last handshake (ops/tailnet.py)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

from poolconsole.commands.common import Subparsers, load


def add_parser(sub: Subparsers) -> None:
    tailnet_cmd = sub.add_parser("tailnet", help="each host's Tailscale path: direct or via DERP, online, handshake")
    tailnet_cmd.add_argument("--config", metavar="FILE", default=argparse.SUPPRESS)
    tailnet_cmd.add_argument("--json", action="store_true", help="print one JSON document")
    tailnet_cmd.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Exit 0 every host on the tailnet and direct (or idle), 1 a host flagged, 2 no host configured."""
    from poolconsole.ops import tailnet

    config = load(args.config)
    if not config.hosts:
        print("poolconsole tailnet: the config has no [[hosts]]", file=sys.stderr)
        return 2
    results = asyncio.run(tailnet.survey(config))
    if args.json:
        print(json.dumps(tailnet.document(results), indent=2))
    else:
        for line in tailnet.text_lines(results):
            print(line)
    return tailnet.exit_code(results)
