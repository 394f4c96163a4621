"""`poolconsole watch`: poll, record and page: alerts to webhook, Alertmanager or ntfy."""

from __future__ import annotations

import argparse
import asyncio
import sys

from poolconsole.commands.common import EXIT_CONFIG, EXIT_OK, Subparsers, default_config_path, empty, history_path, load


def add_parser(sub: Subparsers) -> None:
    watch_cmd = sub.add_parser("watch", help="poll, record and page: alerts to webhook, Alertmanager or ntfy")
    watch_cmd.add_argument("--config", metavar="FILE", default=argparse.SUPPRESS)
    watch_cmd.add_argument("--store", metavar="PATH", help="history store (default: [store] path, else user data dir)")
    watch_cmd.add_argument("--listen", metavar="HOST:PORT", help="also serve the exporter's /metrics here")
    watch_cmd.add_argument("--dry-run", action="store_true", help="say what [remediation] would do, and do nothing")
    watch_cmd.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """The headless runtime as a service (issue 37): polls, records, evaluates the alert rules and delivers
    them to the [[notify]] receivers; with --listen also serves /metrics. Until SIGINT, SIGTERM or SIGHUP."""
    from poolconsole.runtime.alerts_canary import canary, cost
    from poolconsole.runtime.alerts_slo import slo_burn
    from poolconsole.runtime.exporter import ListenError, parse_listen
    from poolconsole.runtime.store import StoreProblem
    from poolconsole.runtime.watch import Companions, Watching, watch
    from poolconsole.workflows import remediation, remediation_start

    try:
        listen = parse_listen(args.listen) if args.listen else None
    except ListenError as exc:
        print(f"poolconsole watch: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    config = load(args.config)
    if empty(config, args, "watch"):
        return EXIT_CONFIG
    source = args.config or default_config_path()
    path = history_path(config, args)
    audit_path = remediation_start.audit_path_of(args.config)

    def problem(message: str) -> None:
        print(f"poolconsole watch: {message}", file=sys.stderr, flush=True)

    def said(line: str) -> None:  # the remediation's steps, as they happen
        print(line, flush=True)

    def ready(w: Watching) -> None:
        nobody = f"nobody: {source} has no [[notify]] (alerts are only recorded)"
        kept = f" ({w.still_firing} alert(s) still firing from the last run, not paged again)" if w.still_firing else ""
        lines = [
            f"watching {w.engines} engine(s) and {w.hosts} host(s) of {source} every "
            f"{config.settings.poll_interval_s:g} s",
            f"recording into {w.store}; notifications' state in {w.state}{kept}",
            f"notifying {'; '.join(w.receivers) if w.receivers else nobody}",
        ]
        if w.metrics:
            lines.append(f"serving {w.metrics}")
        alerts = config.alerts
        for slo in config.slo:
            lines.append(
                f"slo: {slo.target}: {slo.objective * 100:g}% of requests' TTFT within {slo.ttft_s:g} s (slo_burn: "
                "1 h and 5 min over 14.4x page, 6 h and 30 min over 6x warn)"
            )
        if alerts.canary_interval_s is not None:
            lines.append(cost(alerts.canary_interval_s, alerts.canary_timeout_s))
        lines.append(remediation_start.said_at_start(config, audit_path, dry_run=args.dry_run))
        print("\n".join(lines) + "\nSIGINT, SIGTERM or SIGHUP stops", flush=True)

    async def run() -> None:
        heal = remediation.remediation(config, audit_path, said, dry_run=args.dry_run)
        companions: Companions = [heal] if config.alerts.canary_interval_s is None else [canary, heal]
        if config.slo:
            companions = [slo_burn, *companions]
        await watch(
            config, path, asyncio.Event(), listen=listen, ready=ready, on_problem=problem, companions=companions
        )

    try:
        asyncio.run(run())
    except (StoreProblem, ListenError) as exc:
        print(f"poolconsole watch: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    print("stopped", flush=True)
    return EXIT_OK
