"""`poolconsole prometheus-rules`: the pager rules (down, stalled, slo_burn, DCGM gpu_xid/gpu_ecc) as a Prometheus
rule file."""

from __future__ import annotations

import argparse
import sys

from poolconsole.commands.common import EXIT_OK, Subparsers, load


def add_parser(sub: Subparsers) -> None:
    prom_rules = sub.add_parser(
        "prometheus-rules", help="the pager rules (down, stalled, slo_burn, gpu_xid, gpu_ecc) as a Prometheus rule file"
    )
    prom_rules.add_argument("--config", metavar="FILE", default=argparse.SUPPRESS)
    prom_rules.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """The watcher's pager rules (down, stalled, slo_burn, DCGM gpu_xid/gpu_ecc) as a Prometheus rule file on stdout."""
    from poolconsole.workflows.prometheus_config import rule_file

    sys.stdout.write(rule_file(load(args.config)))
    return EXIT_OK
