"""`poolconsole smoke`: engines and gateway routes tested (TTFT, tok/s, SLOs), stored and compared; with
--ab PROFILE, speculative decoding measured with and without (workflows/smoke_ab.py)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

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

if TYPE_CHECKING:
    from poolconsole.workflows.smoke_options import SmokeOptions
    from poolconsole.workflows.workspace import Workspace


def _levels(text: str) -> tuple[int, ...]:
    try:
        levels = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError("--concurrency takes numbers separated by commas, e.g. 1,4,16") from None
    if not levels or any(n < 1 or n > 1024 for n in levels):
        raise argparse.ArgumentTypeError("--concurrency levels must be between 1 and 1024")
    return levels


def add_parser(sub: Subparsers) -> None:
    smoke = sub.add_parser("smoke", help="smoke-test engines and gateway routes: TTFT, tok/s, SLOs")
    smoke.add_argument("targets", nargs="*", metavar="TARGET", help="engine names (default: every engine)")
    smoke.add_argument("--config", metavar="FILE", default=argparse.SUPPRESS)
    smoke.add_argument("--via-gateway", action="store_true", help="also test every model through the gateway(s)")
    smoke.add_argument("--json", action="store_true", help="print one JSON document")
    smoke.add_argument("--concurrency", type=_levels, default=(1,), metavar="1,4,16", help="streams in flight")
    smoke.add_argument("--requests", type=int, default=4, metavar="N", help="timed requests per level (default 4)")
    smoke.add_argument("--compare", action="store_true", help="compare with each target's last passing run")
    smoke.add_argument("--db", metavar="PATH", help="SQLite file for stored runs (default: user data dir)")
    smoke.add_argument("--audit-db", metavar="PATH", help="audit database: the profiles active after rollovers")
    smoke.add_argument("--seed", type=int, help="prompt seed (default: random per run)")
    smoke.add_argument("--stall-timeout", type=float, default=15.0, metavar="S", help="max silence in a stream")
    smoke.add_argument("--timeout", type=float, default=120.0, metavar="S", help="max time of one request")
    smoke.add_argument(
        "--workload",
        metavar="NAME[,NAME]",
        help="speculative decoding per workload: code, chat, summarize, json or a JSONL prompt set (a path)",
    )
    smoke.add_argument(
        "--context", metavar="1k,8k,32k,max", help="the servable context: these lengths at the first --concurrency"
    )
    smoke.add_argument(
        "--ab",
        metavar="PROFILE",
        help="--workload with and without: measure, roll over to PROFILE, measure, roll back (needs --yes)",
    )
    smoke.add_argument("--yes", action="store_true", help="confirm --ab's two rollovers (printed first)")
    smoke.set_defaults(func=run)


def _to_stderr(line: str) -> None:
    with contextlib.suppress(OSError):  # a closed stderr does not end the run
        print(line, file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    from poolconsole.model.smoke import CheckResult
    from poolconsole.workflows import stores
    from poolconsole.workflows.smoke_options import SmokeRefused, smoke_options

    config = load(args.config)
    try:
        options = smoke_options(
            config,
            tuple(args.targets),
            via_gateway=args.via_gateway,
            concurrency=args.concurrency,
            requests=args.requests,
            seed=args.seed,
            stall_s=args.stall_timeout,
            total_s=args.timeout,
            workload=args.workload,
            context=args.context,
        )
    except SmokeRefused as exc:
        print(f"poolconsole smoke: {exc}", file=sys.stderr)
        return EXIT_CONFIG

    def progress(result: CheckResult) -> None:
        if not args.json:
            mark = "PASS" if result.passed else "FAIL"
            level = f" c={result.concurrency}" if result.concurrency else ""
            print(
                f"{mark}  {result.target:20s} {result.model[:28]:28s} {result.check}{level}: {result.reason}",
                flush=True,
            )

    demo = demo_stores_of(args.config)
    audit_path = audit_read(args, demo, writes=bool(args.audit_db or args.ab))  # --ab's rollovers are audited
    db = Path(args.db) if args.db else demo[1] if demo else stores.default_runs_path()
    stores.require_runs_writable(db)  # before the checks run for minutes: their results must have a place to go
    from poolconsole.workflows.workspace import Workspace

    ws = Workspace(config, audit_path, read_only=getattr(args, "read_only", False))
    if args.ab:
        return _ab(ws, options, args, db)
    from poolconsole.workflows import smoke

    command = " ".join(sys.argv[1:])
    done = asyncio.run(
        smoke.run(ws, options, db, landed=progress, command=command, compare=args.compare, say=_to_stderr)
    )
    doc, changes, found, results, seed = done.doc, done.changes, done.found, done.results, done.seed
    if args.compare and done.store_error is None:
        doc["comparison"] = [c.to_json() for c in changes]
    if args.json:
        print(json.dumps(doc, indent=2, allow_nan=False))
    else:
        for change in changes:  # in the console's words and units (ms, tok/s)
            print(f"{'REGRESSION' if change.regression else 'ok':10s} {change.words()}")
        for entry in found["spec_decode"] + found["context"]:
            print(f"{entry['target']} {entry['model']}: {entry['verdict']}")
        print(("passed" if doc["passed"] else "FAILED") + f" ({len(results)} checks, seed {seed})")
    return EXIT_OK if doc["passed"] else EXIT_PROBLEM


def _ab(ws: Workspace, options: SmokeOptions, args: argparse.Namespace, db: Path) -> int:
    """`smoke ENGINE --workload ... --ab PROFILE [--yes]`: the plan first, then --yes (or an answer at a
    terminal) confirms; exit 0 when every workload passed on both profiles and both rollovers were ok, 1 when
    anything failed (a rollover rolled back included), 2 for a refusal before anything ran."""
    from poolconsole.workflows import smoke_ab
    from poolconsole.workflows.plan import ActionRefused, Refusal

    def err(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    plan = smoke_ab.plan(ws, options, args.ab)
    if plan.refused is not None:
        if plan.refusal is Refusal.CONFIG:
            err(f"poolconsole smoke: {plan.refused}")
            return 2
        err(f"refused: {plan.refused}")
        return 1
    say = err if args.json else print
    say(plan.question)
    for line in plan.text():
        say(line)
    refused = confirm(args.yes)
    if refused is not None:
        return refused

    try:
        outcome = asyncio.run(smoke_ab.run(ws, plan, options, lambda line: say(f"  {line}")))
    except ActionRefused as exc:
        err(f"refused: {exc}")
        return 1
    stored = smoke_ab.store(db, outcome, " ".join(sys.argv[1:]))
    if stored.store_error is not None:
        err(stored.store_error)
    if args.json:
        print(json.dumps(stored.doc, indent=2, allow_nan=False))
    else:
        print("\n".join(stored.text_lines()))
    return 0 if stored.passed else 1
