"""`poolconsole schema`: the JSON Schema of hosts.toml."""

from __future__ import annotations

import argparse

from poolconsole.commands.common import EXIT_OK, Subparsers


def add_parser(sub: Subparsers) -> None:
    schema = sub.add_parser("schema", help="print the JSON Schema of hosts.toml")
    schema.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from poolconsole.config.schema import json_schema

    print(json_schema())
    return EXIT_OK
