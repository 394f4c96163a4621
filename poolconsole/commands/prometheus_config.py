"""`poolconsole prometheus-config`: scrape configs for a Prometheus watching the pool
(workflows/prometheus_config.py)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from poolconsole.commands.common import EXIT_OK, Subparsers, load


def add_parser(sub: Subparsers) -> None:
    prom_config = sub.add_parser("prometheus-config", help="scrape configs for a Prometheus watching the pool")
    prom_config.add_argument("--config", metavar="FILE", default=argparse.SUPPRESS)
    prom_config.add_argument("--file-sd", metavar="DIR", help="targets as file_sd JSON files in DIR")
    prom_config.add_argument(
        "--credentials-dir", default="credentials", metavar="DIR", help="API keys' files (default ./credentials)"
    )
    prom_config.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Print the YAML (stdout), write the file_sd and credentials files, and say on stderr what was written."""
    from poolconsole.workflows import prometheus_config

    config = load(args.config)
    file_sd = Path(args.file_sd) if args.file_sd else None
    generated = prometheus_config.generate(config, file_sd, Path(args.credentials_dir))
    sys.stdout.write(generated.yaml)
    for path in generated.written:
        print(f"wrote {path}", file=sys.stderr)
    for comment in generated.reminders:
        print(f"reminder: {comment}", file=sys.stderr)
    for note in generated.notes:
        print(f"note: {note}", file=sys.stderr)
    return EXIT_OK
