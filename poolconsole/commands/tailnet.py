"""`poolconsole tailnet`: each host on the tailnet: direct or relayed, online, last handshake
(workflows/tailnet.py)."""

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
    from poolconsole.workflows import tailnet

    config = load(args.config)
    try:
        report = asyncio.run(tailnet.survey(config))
    except tailnet.NoHosts as exc:
        print(f"poolconsole tailnet: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report.document(), indent=2))
    else:
        for line in report.text_lines():
            print(line)
    return report.exit_code
