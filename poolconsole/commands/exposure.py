"""`poolconsole exposure`: what answers without a key, listens beyond loopback or the tailnet
(workflows/exposure.py)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import TYPE_CHECKING

from poolconsole.commands.common import Subparsers, load

if TYPE_CHECKING:
    from poolconsole.config import PoolConfig


def add_parser(sub: Subparsers) -> None:
    exposure_cmd = sub.add_parser("exposure", help="audit what answers without a key or listens publicly")
    exposure_cmd.add_argument("--config", metavar="FILE", default=argparse.SUPPRESS)
    exposure_cmd.add_argument("--json", action="store_true", help="print one JSON document")
    exposure_cmd.add_argument("--no-completion", action="store_true", help="skip the one-token completion probe")
    exposure_cmd.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    return audited(load(args.config), args)


def audited(config: PoolConfig, args: argparse.Namespace) -> int:
    """Exit 0 every engine checked and nothing exposed, 1 something exposed (each with the fix) or not checked,
    2 no engine to check."""
    from poolconsole.workflows import exposure

    try:
        report = asyncio.run(exposure.audit(config, not args.no_completion))
    except exposure.NoEngines as exc:
        print(f"poolconsole exposure: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report.document(), indent=2))
    else:
        print("\n".join(report.text_lines()))
    return report.exit_code
