"""`poolconsole check-config`: every problem of a hosts.toml in one run. Loads neither Textual nor Rich."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from poolconsole.commands.common import EXIT_OK, Subparsers, default_config_path, load
from poolconsole.config import ConfigError
from poolconsole.config.load import key_problems


def add_parser(sub: Subparsers) -> None:
    check = sub.add_parser("check-config", help="validate hosts.toml, listing every problem")
    check.add_argument("file", nargs="?", metavar="FILE")
    check.add_argument("--config", metavar="FILE", default=argparse.SUPPRESS)
    check.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Every problem of the file in one run, each with its line: the fields', the whole file's and `[keys]`."""
    from poolconsole.model.actions import keymap_problems

    source = args.file or args.config
    path = Path(source) if source else default_config_path()
    keys = key_problems(path, keymap_problems) if path is not None else []
    try:
        config = load(source)
    except ConfigError as exc:
        if keys:
            placed = sorted(exc.problems + keys, key=lambda p: (p.line is None, p.line or 0))
            raise ConfigError(exc.source, placed) from None
        raise
    if keys:
        raise ConfigError(str(path), keys)
    warnings = config.warnings()
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    counted = f", {len(warnings)} warning(s) above (the console starts anyway)" if warnings else ""
    print(f"ok: {len(config.hosts)} host(s), {len(config.engines)} engine(s){counted}")
    return EXIT_OK
