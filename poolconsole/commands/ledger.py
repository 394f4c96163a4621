"""`poolconsole ledger`: tokens, busy hours, energy per engine and day: does the pool pay off."""

from __future__ import annotations

import argparse
import json
import sys

from poolconsole.commands.common import EXIT_CONFIG, EXIT_OK, Subparsers, default_config_path, history_path
from poolconsole.config import load_config


def add_parser(sub: Subparsers) -> None:
    ledger = sub.add_parser("ledger", help="tokens, busy hours, energy per engine and day: does the pool pay off")
    ledger.add_argument("--config", metavar="FILE", default=argparse.SUPPRESS, help="hosts.toml: its [ledger] prices")
    ledger.add_argument("--store", metavar="PATH", help="history store (default: [store] path, else user data dir)")
    ledger.add_argument("--days", type=int, default=14, metavar="N", help="UTC days up to today (default 14)")
    ledger.add_argument("--json", action="store_true", help="print one JSON document")
    ledger.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Tokens, busy hours, energy and the decision per engine and UTC day, from the history store."""
    import time

    from poolconsole.config.models import LedgerSettings
    from poolconsole.model.ledger_report import text
    from poolconsole.runtime.ledger import read_ledger
    from poolconsole.runtime.store import StoreProblem

    if not 1 <= args.days <= 3660:
        print("poolconsole ledger: --days must be between 1 and 3660", file=sys.stderr)
        return EXIT_CONFIG
    chosen = args.config or default_config_path()  # [ledger] prices; the store too unless --store names it
    config = load_config(chosen) if chosen else None
    path = history_path(config, args)
    try:
        doc = read_ledger(
            path,
            args.days,
            time.time(),
            config.ledger if config else LedgerSettings(),
            str(chosen) if chosen else None,
        )
    except StoreProblem as exc:
        print(f"poolconsole ledger: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    print(json.dumps(doc, indent=2, allow_nan=False) if args.json else text(doc))
    return EXIT_OK
