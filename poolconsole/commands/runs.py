"""`poolconsole runs`: stored smoke runs with their conditions; --compare A B."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from poolconsole.commands.common import EXIT_CONFIG, EXIT_OK, Subparsers, stores_read


def add_parser(sub: Subparsers) -> None:
    runs = sub.add_parser("runs", help="stored smoke runs with their conditions; --compare A B")
    runs.add_argument("--config", metavar="FILE", default=argparse.SUPPRESS)
    runs.add_argument("--target", metavar="NAME", help="only the runs that measured this engine")
    runs.add_argument("--compare", nargs=2, type=int, metavar=("A", "B"), help="the conditions and results that differ")
    runs.add_argument("--json", action="store_true", help="print JSON")
    runs.add_argument(
        "--db",
        metavar="PATH",
        help="SQLite file of stored runs (default: user data dir; the demo's for its hosts.toml)",
    )
    runs.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Stored smoke runs with the conditions they were measured on; --compare A B: what differs."""
    from poolconsole.model.smoke import figure_words
    from poolconsole.workflows import stores

    demo = None if args.db else stores_read(args)
    db = Path(args.db) if args.db else demo[1] if demo else stores.default_runs_path()
    if args.db:
        stores.require_runs_existing(db)
    if args.compare:
        try:
            compared = stores.compare_stored(db, *args.compare)
        except stores.NoSuchRun as exc:
            print(f"poolconsole runs: no run {exc} in {db}", file=sys.stderr)
            return EXIT_CONFIG
        a, b, diff = compared.a, compared.b, compared.diff
        if args.json:
            print(json.dumps(diff, indent=2, allow_nan=False))
            return EXIT_OK
        print(f"run {diff['a']} ({a['started_at']}) -> run {diff['b']} ({b['started_at']})")
        for c in diff["conditions"]:
            if "only_in" in c:
                print(f"  {c['target']}: measured only in run {c['only_in']}")
            else:
                print(f"  {c['target']} {c['condition']}: {c['a']} -> {c['b']}")
        for r in diff["results"]:
            what = f"{r['target']} {r['model']} {r['check']}" + (f" c={r['concurrency']}" if r["concurrency"] else "")
            if "only_in" in r:
                print(f"  {what}: only in run {r['only_in']}")
            else:
                change = f" ({r['change_pct']:+.1f}%)" if r.get("change_pct") is not None else ""
                was, now = figure_words(r["figure"], r["a"]), figure_words(r["figure"], r["b"])
                print(f"  {what} {r['figure']}: {was} -> {now}{change}")
        for d in diff["engine_disagrees"]:
            print(
                f"  run {d['run']} {d['target']}: the engine reports {d['field']} {d['engine']}, "
                f"profile {d['profile_name']} in hosts.toml says {d['profile']}"
            )
        if not diff["conditions"] and not diff["results"]:
            print("  same conditions, same results")
        return EXIT_OK
    runs = stores.stored_runs(db, args.target)
    if args.json:
        print(json.dumps(runs, indent=2, allow_nan=False))
        return EXIT_OK
    for run in runs:
        mark = "passed" if run["passed"] else "FAILED"
        print(f"run {run['run_id']}  {run['started_at']}  {mark}  seed {run['seed']}  ({run['command']})")
        for target, c in run["conditions"].items():
            profile = f"{c.get('profile')} (from {c.get('profile_source')})" if c.get("profile") else "no profile"
            print(
                f"    {target}: {c.get('kind')} {c.get('version') or '?'} on {c.get('host') or '?'}, {profile}, "
                f"{c.get('quantization') or 'quantization n/a'}"
            )
    if not runs:
        print(f"no smoke runs stored in {db}" + (f" for {args.target}" if args.target else ""))
    return EXIT_OK
