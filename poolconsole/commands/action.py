"""`poolconsole restart` and `poolconsole rollover`: the workflow's plan printed, confirmed (--yes, or a yes at
the terminal), run, and its outcome said; the console runs the same plan (poolconsole.workflows)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from poolconsole.commands.common import (
    EXIT_CONFIG,
    EXIT_OK,
    EXIT_PROBLEM,
    Subparsers,
    audit_read,
    confirm,
    demo_stores_of,
    load,
)


def add_parser(sub: Subparsers) -> None:
    for name, text in (
        ("restart", "restart an engine and wait until it serves again"),
        ("rollover", "switch an engine's profile; roll back on any failure"),
    ):
        action = sub.add_parser(name, help=text)
        action.add_argument("engine")
        if name == "rollover":
            action.add_argument("profile")
            action.add_argument("--force", action="store_true", help="switch even if the fit check says no")
            action.add_argument("--no-smoke", action="store_true", help="skip the smoke test before promoting")
        action.add_argument("--config", metavar="FILE", default=argparse.SUPPRESS)
        action.add_argument("--yes", action="store_true", help="confirm (the commands are printed first)")
        action.add_argument("--audit-db", metavar="PATH", help="audit database (default: user data dir)")
        action.add_argument("--read-only", action="store_true", default=argparse.SUPPRESS)
        action.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """restart / rollover from the command line: the workflow's plan printed, confirmed (--yes, or a yes at the
    terminal), run, and its outcome said; the console runs the same plan (poolconsole.workflows)."""
    from poolconsole.workflows import audit_log, restart, rollover
    from poolconsole.workflows.plan import ActionRefused, Outcome, Plan, Refusal
    from poolconsole.workflows.workspace import Workspace

    config = load(args.config)
    demo = demo_stores_of(args.config)
    chosen = Path(args.audit_db) if args.audit_db else demo[0] if demo else audit_log.default_path()
    ws = Workspace(config, chosen, read_only=args.read_only)

    async def planned() -> Plan:
        if args.command == "restart":
            return restart.plan(ws, args.engine)
        first = rollover.plan(ws, args.engine, args.profile, active=None)
        if first.refused is not None:  # refused before the host is polled
            return first
        active = await rollover.active_profile(ws, args.engine)
        live, kv = await rollover.measure(ws, args.engine)
        return rollover.plan(
            ws, args.engine, args.profile, active=active, live=live, kv=kv, force=args.force, smoke=not args.no_smoke
        )

    plan = asyncio.run(planned())
    if plan.refused is not None:
        if plan.refusal is Refusal.CONFIG:
            print(f"poolconsole {args.command}: {plan.refused}", file=sys.stderr)
            return EXIT_CONFIG
        print(f"refused: {plan.refused}", file=sys.stderr)
        return EXIT_PROBLEM
    print(f"{plan.action} {plan.engine} on {plan.where} will run:")
    for line in plan.text():
        print(f"  {line}")
    if plan.blocked:
        print(f"  note: {plan.blocked}")
    audit_read(args, demo, writes=True)  # an action that could not be audited is not run
    refused = confirm(args.yes)
    if refused is not None:
        return refused

    async def run() -> Outcome:
        try:

            def say(line: str) -> None:
                print(f"  {line}")

            if plan.action == "restart":
                return await restart.run(ws, plan, say)
            return await rollover.run(ws, plan, say)
        finally:
            await ws.close()

    try:
        outcome = asyncio.run(run())
    except ActionRefused as exc:
        print(f"refused: {exc}", file=sys.stderr)
        return EXIT_PROBLEM
    print(f"{outcome.action} {outcome.engine}: {outcome.outcome}: {outcome.detail} ({outcome.seconds:.1f} s)")
    return EXIT_OK if outcome.outcome == "ok" else EXIT_PROBLEM
