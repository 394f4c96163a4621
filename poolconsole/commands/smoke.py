"""`poolconsole smoke`: engines and gateway routes tested (TTFT, tok/s, SLOs), stored and compared; with
--ab PROFILE, speculative decoding measured with and without (ops/smoke/ab.py)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
from pathlib import Path
from typing import Any

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
from poolconsole.config import PoolConfig
from poolconsole.ops.sqlite import StoreUnusable


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
    from poolconsole.ops.smoke import store
    from poolconsole.ops.smoke.context import LengthError, parse_lengths
    from poolconsole.ops.smoke.runner import SmokeOptions, choose_targets
    from poolconsole.ops.smoke.workloads import WorkloadError, parse_workloads

    config = load(args.config)
    try:
        workloads = parse_workloads(args.workload) if args.workload is not None else ()
        lengths = parse_lengths(args.context) if args.context is not None else ()
    except (WorkloadError, LengthError) as exc:
        print(f"poolconsole smoke: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    options = SmokeOptions(
        tuple(args.targets),
        args.via_gateway,
        args.concurrency,
        args.requests,
        args.seed,
        args.stall_timeout,
        args.timeout,
        workloads=workloads,
        context=lengths,
    )
    unknown = [t for t in args.targets if t not in {e.name for e in config.engines}]
    if unknown:
        print(f"poolconsole smoke: no engine named {', '.join(unknown)} in the config", file=sys.stderr)
        return EXIT_CONFIG
    targets = choose_targets(config, options)
    if not targets:
        print("poolconsole smoke: nothing to test (no engine; gateways need --via-gateway)", file=sys.stderr)
        return EXIT_CONFIG

    def progress(result: Any) -> None:
        if not args.json:
            mark = "PASS" if result.passed else "FAIL"
            level = f" c={result.concurrency}" if result.concurrency else ""
            print(
                f"{mark}  {result.target:20s} {result.model[:28]:28s} {result.check}{level}: {result.reason}",
                flush=True,
            )

    demo = demo_stores_of(args.config)
    audit_path = audit_read(args, demo, writes=bool(args.audit_db or args.ab))  # --ab's rollovers are audited
    db = Path(args.db) if args.db else demo[1] if demo else store.default_db()
    store.require_writable(db)  # before the checks run for minutes: their results must have a place to go
    if args.ab:
        return _ab(config, options, args, audit_path, db)
    from poolconsole.workflows import smoke
    from poolconsole.workflows.workspace import Workspace

    ws = Workspace(config, audit_path, read_only=getattr(args, "read_only", False))
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


def _ab(config: PoolConfig, options: Any, args: argparse.Namespace, audit_path: Path, db: Path) -> int:
    """`smoke ENGINE --workload ... --ab PROFILE [--yes]`: the plan first, then --yes (or an answer at a
    terminal) confirms; exit 0 when every workload passed on both profiles and both rollovers were ok, 1 when
    anything failed (a rollover rolled back included), 2 for a refusal before anything ran."""
    from poolconsole.ops import audit, lifecycle
    from poolconsole.ops.smoke import ab

    def err(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    if len(options.targets) != 1 or not options.workloads or options.context:
        err("poolconsole smoke: --ab measures one engine's workloads: give one ENGINE and --workload (no --context)")
        return 2
    if getattr(args, "read_only", False):
        err("refused: read-only mode (--ab switches the engine's profile twice)")
        return 1
    engine = next(e for e in config.engines if e.name == options.targets[0])
    current = audit.active_profile(audit_path, engine.name) or engine.profile
    try:
        ab.check_ab(config, engine, args.ab, current)
    except ab.AbRefused as exc:
        err(f"poolconsole smoke: --ab refused: {exc}")
        return 2
    assert current is not None
    host = config.host(engine.host)
    assert host is not None and engine.control is not None
    restart = lifecycle.plan_restart(engine)[0]
    say = err if args.json else print
    say(f"smoke --ab on {engine.name} ({host.name}, {host.address}): measure, switch, measure, switch back:")
    say(f"  1. workloads {', '.join(w.name for w in options.workloads)} on {current}")
    for step, to in ((2, args.ab), (4, current)):
        say(f"  {step}. rollover to {to}: fit check, write {engine.control.profile_file} (profile {to}'s values")
        say(f"     over stdin), $ {restart}, wait until it serves; any failure rolls back")
        if step == 2:
            say(f"  3. the same workloads on {args.ab}")
    refused = confirm(args.yes)
    if refused is not None:
        return refused

    async def main() -> ab.AbOutcome:
        return await ab.run_ab(config, options, engine, args.ab, current, audit_path, lambda line: say(f"  {line}"))

    try:
        outcome = asyncio.run(main())
    except lifecycle.ActionRefused as exc:
        err(f"refused: {exc}")
        return 1
    try:
        runs = ab.store_ab(db, outcome, " ".join(sys.argv[1:]))
    except (OSError, StoreUnusable) as exc:
        runs = (0, 0)
        err(f"results not stored: {exc}")
    doc = ab.document(outcome, runs)
    doc["db"] = str(db)
    if args.json:
        print(json.dumps(doc, indent=2, allow_nan=False))
    else:
        print("\n".join(ab.text_lines(doc)))
    return 0 if doc["passed"] else 1
