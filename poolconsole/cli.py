"""poolconsole: the operator console of a self-hosted GPU inference pool. With no command it opens the
console on the configured pool (the simulated demo pool when none is configured)."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import datetime as dt
import gc
import json
import os
import re
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from poolconsole import __version__
from poolconsole.config import ConfigError, PoolConfig, load_config
from poolconsole.config.example import EXAMPLE_DOMAIN, names_example_hosts
from poolconsole.config.load import key_problems
from poolconsole.model import units
from poolconsole.ops.audit import AuditUnreadable
from poolconsole.ops.sqlite import StoreUnusable, require

EXIT_OK, EXIT_PROBLEM, EXIT_CONFIG = 0, 1, 2
EXIT_READER_GONE = 128 + 13  # SIGPIPE


def user_config_file() -> Path:
    from platformdirs import user_config_path

    return user_config_path("poolconsole") / "hosts.toml"


def default_config_path() -> Path | None:
    """--config, else $POOLCONSOLE_CONFIG, else hosts.toml in the user config directory
    (~/.config/poolconsole/hosts.toml on Linux). The working directory is not searched: the checkout's
    example hosts.toml is documentation, and a console must not open a pool by where it was started."""
    env = os.environ.get("POOLCONSOLE_CONFIG")
    if env:
        return Path(env)
    candidate = user_config_file()
    return candidate if candidate.is_file() else None


def _load(path: str | None) -> PoolConfig:
    chosen = Path(path) if path else default_config_path()
    if chosen is None:
        raise ConfigError("(no config)", [])
    return load_config(chosen)


def _fmt(value: Any, kind: str = "") -> str:
    if value is None:
        return units.NA
    if kind == "pct":
        return units.pct(value)
    if kind == "s":
        return units.seconds(value, 2)
    if isinstance(value, float):
        return f"{value:.1f}" if not value.is_integer() else f"{value:.0f}"
    return str(value)


def _table(doc: dict[str, Any]) -> str:
    header = ["ENGINE", "KIND", "HOST", "STATE", "RUN", "WAIT", "KV", "GEN tok/s", "TTFT", "PREFIX", "MODELS"]
    rows = [header]
    for e in doc["engines"]:
        rows.append(
            [
                e["name"],
                e["kind"],
                e["host"] or "-",
                e["state"],
                _fmt(e["requests_running"]),
                _fmt(e["requests_waiting"]),
                _fmt(e["kv_cache_usage"], "pct"),
                _fmt(e["generation_tokens_per_s"]),
                _fmt(e["ttft_mean_s"], "s"),
                _fmt(e["prefix_cache_hit_rate"], "pct"),
                ",".join(e["models"][:3]) + ("..." if len(e["models"]) > 3 else ""),
            ]
        )
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(header))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    for e in doc["engines"]:
        if e["error"]:
            lines.append(f"! {e['name']}: {e['error']}")
    for h in doc.get("hosts", []):
        lines.append(f"host {h['name']}: {h['state']}" + (f" ({h['error']})" if h.get("error") else ""))
    return "\n".join(lines)


async def _status_doc(config: PoolConfig, samples: int, interval: float) -> dict[str, Any]:
    from poolconsole.collect.engine_sampling import sample_engines
    from poolconsole.collect.hosts.sampling import sample_hosts
    from poolconsole.model.view import engine_view

    engines, hosts = await asyncio.gather(sample_engines(config, samples, interval), sample_hosts(config))
    return {
        "taken_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "engines": [engine_view(engines[e.name]).to_json() for e in config.engines],
        "hosts": [h.to_json() for h in hosts],
    }


def _empty(config: PoolConfig, args: argparse.Namespace, doing: str) -> bool:
    """A config with no target: said in words naming the file (the command then exits 2)."""
    if config.engines or config.hosts:
        return False
    source = args.config or getattr(args, "file", None) or default_config_path()
    print(
        f"poolconsole {args.command}: nothing to {doing}: {source} has no [[engines]] and no [[hosts]]", file=sys.stderr
    )
    return True


def cmd_status(args: argparse.Namespace) -> int:
    if args.samples < 1 or args.interval < 0:
        print("poolconsole status: --samples must be >= 1 and --interval >= 0", file=sys.stderr)
        return EXIT_CONFIG
    config = _discovered(args.prometheus) if args.prometheus else _load(args.config)
    if _empty(config, args, "poll"):
        return EXIT_CONFIG
    doc = asyncio.run(_status_doc(config, args.samples, args.interval))
    if args.json:
        print(json.dumps(doc, indent=2, allow_nan=False, default=str))
    else:
        print(_table(doc))
    healthy = all(e["state"] == "ok" for e in doc["engines"]) and all(h["state"] == "ok" for h in doc["hosts"])
    return EXIT_OK if healthy else EXIT_PROBLEM


def cmd_check_config(args: argparse.Namespace) -> int:
    """Every problem of the file in one run, each with its line: the fields', the whole file's and `[keys]`."""
    from poolconsole.ui.registry import keymap_problems

    source = args.file or args.config
    path = Path(source) if source else default_config_path()
    keys = key_problems(path, keymap_problems) if path is not None else []
    try:
        config = _load(source)
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


def cmd_schema(args: argparse.Namespace) -> int:
    from poolconsole.config.schema import json_schema

    print(json_schema())
    return EXIT_OK


def _levels(text: str) -> tuple[int, ...]:
    try:
        levels = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError("--concurrency takes numbers separated by commas, e.g. 1,4,16") from None
    if not levels or any(n < 1 or n > 1024 for n in levels):
        raise argparse.ArgumentTypeError("--concurrency levels must be between 1 and 1024")
    return levels


def cmd_smoke(args: argparse.Namespace) -> int:
    from poolconsole.ops.smoke import store
    from poolconsole.ops.smoke.context import LengthError, parse_lengths
    from poolconsole.ops.smoke.runner import (
        SmokeOptions,
        active_profiles,
        choose_targets,
        conditions,
        document,
        read_conditions,
        run_blocking,
        summaries,
        with_measurements,
    )
    from poolconsole.ops.smoke.workloads import WorkloadError, parse_workloads

    config = _load(args.config)
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
    active = active_profiles(config, audit_path)
    db = Path(args.db) if args.db else demo[1] if demo else store.default_db()
    store.require_writable(db)  # before the checks run for minutes: their results must have a place to go
    if args.ab:
        from poolconsole.ops.smoke import ab

        return ab.cli(config, options, args)
    versions, hosts, reported = asyncio.run(read_conditions(config, targets))
    options = dataclasses.replace(options, profiles=active)
    results, seed = run_blocking(config, options, progress)
    found = summaries(results)
    doc = document(results, seed, {k: v for k, v in found.items() if v})
    measured_on = with_measurements(conditions(config, versions, active, hosts, reported), found)
    changes: list[store.Change] = []
    try:
        run_id = store.save_run(db, seed, doc["passed"], " ".join(sys.argv[1:]), doc["results"], measured_on)
        doc["run_id"], doc["db"] = run_id, str(db)
        if args.compare:
            changes = store.compare(db, run_id)
            doc["comparison"] = [c.to_json() for c in changes]
    except StoreUnusable as exc:  # gone since the check above: the results are still printed
        doc["store_error"] = f"results not stored: {exc}"
    if args.json:
        print(json.dumps(doc, indent=2, allow_nan=False))
    else:
        for change in changes:  # in the console's words and units (ms, tok/s)
            print(f"{'REGRESSION' if change.regression else 'ok':10s} {change.words()}")
        for entry in found["spec_decode"] + found["context"]:
            print(f"{entry['target']} {entry['model']}: {entry['verdict']}")
        print(("passed" if doc["passed"] else "FAILED") + f" ({len(results)} checks, seed {seed})")
    return EXIT_OK if doc["passed"] else EXIT_PROBLEM


def cmd_plan(args: argparse.Namespace) -> int:
    """What runs where and what fits: every engine's profiles through the fit check, against a poll of
    the pool (each host's GPUs and what other processes hold on them, the engines' own KV figures), or
    with --offline against the config alone."""
    from poolconsole.model.hosts import HostSnapshot
    from poolconsole.ops import audit
    from poolconsole.ops.fit import KvCapacity
    from poolconsole.ops.planning import plan_lines, poll_hosts, read_kv

    config = _load(args.config)
    audit_path = audit_read(args, demo_stores_of(args.config), writes=False)
    active = {e.name: audit.active_profile(audit_path, e.name) or e.profile or "" for e in config.engines}
    snapshots: dict[str, HostSnapshot] = {}
    kv: dict[str, KvCapacity | None] = {}
    if not args.offline:

        async def read() -> tuple[dict[str, HostSnapshot], dict[str, KvCapacity | None]]:
            return await asyncio.gather(
                poll_hosts(config, {h.name for h in config.hosts}),
                read_kv([e for e in config.engines if e.profiles], config),
            )

        snapshots, kv = asyncio.run(read())
    for line in plan_lines(config, snapshots, kv, active, args.offline):
        print(line)
    return EXIT_OK


def stores_read(args: argparse.Namespace) -> tuple[Path, Path, Path] | None:
    """What `audit` and `runs` read without --db: the stores the actions on the config (--config, else the
    default) write, so the demo's own beside a hosts.toml the demo wrote (as restart, rollover and smoke with
    it do), else None: the user's. A --config is loaded first: one that cannot be read or is invalid is said
    naming the file (exit 2), not passed over for the user's stores."""
    if args.config:
        _load(args.config)
    return demo_stores_of(args.config)


def cmd_audit(args: argparse.Namespace) -> int:
    from poolconsole.ops import audit

    demo = None if args.db else stores_read(args)
    path = Path(args.db) if args.db else demo[0] if demo else audit.default_path()
    if args.db and not path.exists():  # a path typed on the command line: a typo, not an empty log
        raise StoreUnusable(f"no audit log at {path}")
    rows = audit.entries(path, args.limit)
    if args.json:
        print(json.dumps([e.to_json() for e in rows], indent=2))
        return EXIT_OK
    for e in rows:
        print(e.text())
    if not rows:
        print(f"no actions recorded in {path}")
        if not args.db and demo is None:
            from poolconsole.sim.demo import latest_demo_audit

            latest = latest_demo_audit()
            if latest is not None:  # the demo console's actions are kept apart from the user's
                print(f"the demo console records its own: poolconsole audit --db {latest}")
    return EXIT_OK


def cmd_logs(args: argparse.Namespace) -> int:
    """An engine's log over SSH, diagnosed with the failure-mode library (poolconsole/ops/logs.py)."""
    from poolconsole.ops import logs

    return logs.cli(_load(args.config), args)


def cmd_exposure(args: argparse.Namespace) -> int:
    """What answers without a key, listens beyond loopback or the tailnet (poolconsole/ops/exposure.py)."""
    from poolconsole.ops import exposure

    return exposure.cli(_load(args.config), args)


def cmd_tailnet(args: argparse.Namespace) -> int:
    """Each host on the tailnet: direct or relayed, online, last handshake (poolconsole/ops/tailnet.py)."""
    from poolconsole.ops import tailnet

    return tailnet.cli(_load(args.config), args)


def cmd_action(args: argparse.Namespace) -> int:
    """restart / rollover from the command line: the workflow's plan printed, confirmed (--yes, or a yes at the
    terminal), run, and its outcome said; the console runs the same plan (poolconsole.workflows)."""
    from poolconsole.ops import audit, lifecycle
    from poolconsole.workflows import restart, rollover
    from poolconsole.workflows.plan import Plan, Refusal
    from poolconsole.workflows.workspace import Workspace

    config = _load(args.config)
    demo = demo_stores_of(args.config)
    chosen = Path(args.audit_db) if args.audit_db else demo[0] if demo else audit.default_path()
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

    async def run() -> lifecycle.Outcome:
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
    except lifecycle.ActionRefused as exc:
        print(f"refused: {exc}", file=sys.stderr)
        return EXIT_PROBLEM
    print(f"{outcome.action} {outcome.engine}: {outcome.outcome}: {outcome.detail} ({outcome.seconds:.1f} s)")
    return EXIT_OK if outcome.outcome == "ok" else EXIT_PROBLEM


def confirm(yes: bool) -> int | None:
    """None to go on: --yes, or 'y' at the terminal's prompt. Else the exit code: 2 where there is no terminal
    to ask (a script that forgot --yes), 1 where the operator said no; either way nothing changed."""
    if yes:
        return None
    if not sys.stdin.isatty():
        print("not confirmed: add --yes (there is no terminal to ask); nothing changed", file=sys.stderr)
        return EXIT_CONFIG
    try:
        answer = input("proceed? [y/N] ")
    except EOFError:
        answer = ""
    if answer.strip().lower() in ("y", "yes"):
        return None
    print("not confirmed: nothing changed", file=sys.stderr)
    return EXIT_PROBLEM


def audit_read(args: argparse.Namespace, demo: tuple[Path, Path, Path] | None, *, writes: bool) -> Path:
    """The audit log a command takes the promoted profiles from: --audit-db, else the demo's beside its
    hosts.toml, else the user's. A --audit-db is checked now, naming it: where the command `writes` (actions,
    smoke --ab) it must be usable or creatable, before anything runs; where it only reads, a --audit-db must
    exist (a typo is not an empty log)."""
    from poolconsole.ops import audit

    path = Path(args.audit_db) if args.audit_db else demo[0] if demo else audit.default_path()
    if writes:
        require(path, "an audit log", audit.SCHEMA)
    elif args.audit_db and not path.exists():
        raise StoreUnusable(f"no audit log at {path}")
    return path


def cmd_replay(args: argparse.Namespace) -> int:
    """The console on recorded data, read-only, with pause, seek and speed; the time shown is the recording's."""
    import time

    from poolconsole.runtime.replay import Replay
    from poolconsole.runtime.store import StoreProblem, parse_time

    if not 0 < args.speed <= 1000:
        print("poolconsole replay: --speed must be above 0 and at most 1000", file=sys.stderr)
        return EXIT_CONFIG
    chosen = args.config or (None if args.store else default_config_path())
    config = load_config(chosen) if chosen else None  # its engines' model and profile, where they match
    path = history_path(config, args)
    try:
        start = parse_time(args.start, time.time()) if args.start else None
        replay = Replay(path, start, args.speed, config)
    except (StoreProblem, ValueError) as exc:
        print(f"poolconsole replay: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    try:
        from poolconsole.ui.app import PoolApp
        from poolconsole.ui.launch import run_app

        asyncio.run(run_app(PoolApp(replay.config, replay=replay, subtitle=f"replay of {path}")))
    finally:
        replay.close()
    return EXIT_OK


def cmd_exporter(args: argparse.Namespace) -> int:
    """The pool on /metrics for Prometheus, built from the live pool's state at each scrape."""
    from poolconsole.runtime.exporter import ListenError, parse_listen, run

    try:
        host, port = parse_listen(args.listen)
        config = _load(args.config)
        if _empty(config, args, "poll"):
            return EXIT_CONFIG
        run(config, host, port)
    except ListenError as exc:
        print(f"poolconsole exporter: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    return EXIT_OK


def cmd_record(args: argparse.Namespace) -> int:
    """The live pool polled headless into the history store until SIGINT, SIGTERM (systemd's stop) or SIGHUP."""
    from poolconsole.runtime.live import LivePool
    from poolconsole.runtime.stopping import stop_on_signals
    from poolconsole.runtime.store import Store, StoreProblem, record

    config = _load(args.config)
    if _empty(config, args, "record"):
        return EXIT_CONFIG
    source = args.config or default_config_path()
    if names_example_hosts(config):
        print(
            f"poolconsole record: {source} names the example pool's fictional hosts ({EXAMPLE_DOMAIN}): "
            "nothing to record; point --config at your pool",
            file=sys.stderr,
        )
        return EXIT_CONFIG
    path = history_path(config, args)

    def problem(message: str) -> None:
        print(f"poolconsole record: {message}", file=sys.stderr, flush=True)

    try:
        store = Store.for_config(config, path, on_problem=problem)
    except StoreProblem as exc:
        print(f"poolconsole record: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    pool = LivePool(config, recorder=store)
    store.bind(pool.state)
    kept = config.store
    print(
        f"recording {len(config.engines)} engine(s) and {len(config.hosts)} host(s) of {source} every "
        f"{config.settings.poll_interval_s:g} s into {path} (every poll for {kept.full_resolution_hours:g} h, "
        f"then 1-minute rollups for {kept.rollup_days:g} days); SIGINT, SIGTERM or SIGHUP stops",
        flush=True,
    )

    async def run() -> None:
        stop = asyncio.Event()
        with stop_on_signals(stop):
            await record(pool, store, stop)

    try:
        asyncio.run(run())
    finally:
        store.close()  # already closed by record(); here for an interrupt before the loop ran
    print(f"stopped: {store.polls_written} polls written to {path}", flush=True)
    return EXIT_OK


def cmd_watch(args: argparse.Namespace) -> int:
    """The headless runtime as a service (issue 37): polls, records, evaluates the alert rules and delivers
    them to the [[notify]] receivers; with --listen also serves /metrics. Until SIGINT, SIGTERM or SIGHUP."""
    from poolconsole.runtime.exporter import ListenError, parse_listen
    from poolconsole.runtime.store import StoreProblem
    from poolconsole.runtime.watch import Watching, watch

    try:
        listen = parse_listen(args.listen) if args.listen else None
    except ListenError as exc:
        print(f"poolconsole watch: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    config = _load(args.config)
    if _empty(config, args, "watch"):
        return EXIT_CONFIG
    source = args.config or default_config_path()
    path = history_path(config, args)

    def problem(message: str) -> None:
        print(f"poolconsole watch: {message}", file=sys.stderr, flush=True)

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
        print("\n".join(lines) + "\nSIGINT, SIGTERM or SIGHUP stops", flush=True)

    async def run() -> None:
        await watch(config, path, asyncio.Event(), listen=listen, ready=ready, on_problem=problem)

    try:
        asyncio.run(run())
    except (StoreProblem, ListenError) as exc:
        print(f"poolconsole watch: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    print("stopped", flush=True)
    return EXIT_OK


def cmd_prometheus_rules(args: argparse.Namespace) -> int:
    """The watcher's pager rules (down, stalled) as a Prometheus rule file on stdout."""
    from poolconsole.ops.prometheus_rules import render

    sys.stdout.write(render(_load(args.config)))
    return EXIT_OK


def cmd_export(args: argparse.Namespace) -> int:
    """The history store's rows, one per poll (or 1-minute rollup) per target, as JSON lines or CSV."""
    import math
    import time

    from poolconsole.runtime.store import StoreProblem, export, parse_time

    chosen = None if args.store else (args.config or default_config_path())
    path = history_path(load_config(chosen) if chosen else None, args)
    now = time.time()
    try:
        start = parse_time(args.start, now) if args.start else -math.inf
        end = parse_time(args.end, now) if args.end else math.inf
    except ValueError as exc:
        print(f"poolconsole export: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    try:
        export(path, args.format, sys.stdout, start, end, args.target)
    except StoreProblem as exc:
        print(f"poolconsole export: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    sys.stdout.flush()  # a closed pipe raises here, inside main's handler, not at the interpreter's exit
    return EXIT_OK


def cmd_ledger(args: argparse.Namespace) -> int:
    """Tokens, busy hours, energy and the decision per engine and UTC day, from the history store."""
    import time

    from poolconsole.config.models import LedgerSettings
    from poolconsole.model.ledger import text
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


def cmd_runs(args: argparse.Namespace) -> int:
    """Stored smoke runs with the conditions they were measured on; --compare A B: what differs."""
    from poolconsole.ops.smoke import store

    demo = None if args.db else stores_read(args)
    db = Path(args.db) if args.db else demo[1] if demo else store.default_db()
    if args.db:
        store.require_existing(db)
    if args.compare:
        found = [store.get_run(db, run_id) for run_id in args.compare]
        missing = [str(i) for i, run in zip(args.compare, found, strict=True) if run is None]
        if missing:
            print(f"poolconsole runs: no run {', '.join(missing)} in {db}", file=sys.stderr)
            return EXIT_CONFIG
        a, b = found
        assert a is not None and b is not None
        diff = store.compare_runs(a, b)
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
                was, now = store.figure_words(r["figure"], r["a"]), store.figure_words(r["figure"], r["b"])
                print(f"  {what} {r['figure']}: {was} -> {now}{change}")
        for d in diff["engine_disagrees"]:
            print(
                f"  run {d['run']} {d['target']}: the engine reports {d['field']} {d['engine']}, "
                f"profile {d['profile_name']} in hosts.toml says {d['profile']}"
            )
        if not diff["conditions"] and not diff["results"]:
            print("  same conditions, same results")
        return EXIT_OK
    runs = store.list_runs(db, args.target)
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


def _discovered(url: str) -> PoolConfig:
    from poolconsole.collect.prometheus_discovery import discovered_config

    return discovered_config(url)


def cmd_prometheus_config(args: argparse.Namespace) -> int:
    from poolconsole.ops import prometheus_config

    return prometheus_config.cmd_prometheus_config(args, _load(args.config))


DEMO_HINT = "Demo pool (simulated). Yours: --config FILE, $POOLCONSOLE_CONFIG or {user} (see hosts.toml)"


def _home_short(path: Path) -> str:
    home = Path.home()
    return f"~/{path.relative_to(home)}" if path.is_relative_to(home) else str(path)


def demo_stores_of(config: str | None, *, say: bool = True) -> tuple[Path, Path, Path] | None:
    """The audit log, smoke store and history store of the demo whose hosts.toml `config` is (its first line
    says `poolconsole demo` wrote it): the CLI's actions, smoke runs and recordings on the simulated pool stay
    beside it, as its console's do, never in the user's. Said on stderr unless `say` is False."""
    path = Path(config) if config else default_config_path()
    if path is None:
        return None
    try:
        with path.open(encoding="utf-8", errors="replace") as text:
            first = text.readline()
    except OSError:
        return None  # told where the config is loaded
    from poolconsole.sim.demo_files import CONFIG_HEADER, demo_stores

    if not first.startswith(CONFIG_HEADER):
        return None
    stores = demo_stores(path)
    if say:
        print(
            f"poolconsole: {path} is a hosts.toml the demo wrote: its own stores beside it are used "
            f"({stores[0].name}, {stores[1].name}, {stores[2].name}); remove its first line to use yours",
            file=sys.stderr,
        )
    return stores


def history_path(config: PoolConfig | None, args: argparse.Namespace) -> Path:
    """The history store: --store, else the demo's beside the demo's hosts.toml, else `[store] path`, else the
    user data directory's."""
    from poolconsole.runtime.store import store_path

    own = None if args.store else demo_stores_of(args.config)
    return store_path(config, args.store or (str(own[2]) if own else None))


def open_console(
    config: PoolConfig,
    read_only: bool,
    subtitle: str,
    hint: str | None = None,
    store: Path | None = None,
    stores: tuple[Path, Path] | None = None,
) -> int:
    """The console on `config`; `stores`: the audit log and smoke store its actions write (else the user's)."""
    from poolconsole.ui.launch import run_console  # Textual loads there, once the first polls are out

    asyncio.run(run_console(config, read_only=read_only, subtitle=subtitle, hint=hint, store=store, stores=stores))
    return EXIT_OK


@dataclasses.dataclass(frozen=True)
class DemoConsole:
    """The console on a demo pool: its config, titles, and the demo's own history store, audit log and smoke
    store beside its hosts.toml (never the user's: a restart on the simulated pool is no real action)."""

    config: PoolConfig
    subtitle: str
    hint: str
    store: Path
    stores: tuple[Path, Path]
    """The audit log and the smoke store."""


def demo_console(config_path: Path, scenario: str) -> DemoConsole:
    from poolconsole.sim.demo_files import demo_stores

    audit_log, smoke_db, history = demo_stores(config_path)
    hint = DEMO_HINT.format(user=_home_short(user_config_file()))
    return DemoConsole(load_config(config_path), f"demo pool ({scenario})", hint, history, (audit_log, smoke_db))


def cmd_demo(args: argparse.Namespace) -> int:
    from poolconsole.sim.demo import BackgroundPool, demo_config_path, serve_only

    if not 0 <= args.nodes <= 256:
        print("poolconsole demo: --nodes must be between 0 and 256", file=sys.stderr)
        return EXIT_CONFIG
    if args.serve_only:
        from poolconsole.runtime.stopping import stop_on_signals

        return serve_only(args, stop_on_signals)
    if args.config_out is None:
        args.config_out = str(demo_config_path())
    with BackgroundPool(args) as config_path:
        demo = demo_console(config_path, args.scenario)
        return open_console(demo.config, args.read_only, demo.subtitle, demo.hint, store=demo.store, stores=demo.stores)


def cmd_console(args: argparse.Namespace) -> int:
    """No sub-command: the console on the configured pool, or on the demo pool when none is configured."""
    if args.prometheus:  # the pool a Prometheus holds: no control tables, so read-only
        return open_console(_discovered(args.prometheus), True, f"discovered from {args.prometheus} (read-only)")
    path = Path(args.config) if args.config else default_config_path()
    if path is None:
        demo = argparse.Namespace(
            serve_only=False, config_out=None, scenario="normal", nodes=0, seed=1, read_only=args.read_only
        )
        return cmd_demo(demo)
    from poolconsole.runtime.store import store_path

    config = load_config(path)  # the history store: [store] path, else the user data dir (not for the demo)
    own = demo_stores_of(str(path), say=False)  # the demo's hosts.toml: its own stores, as `demo` has them
    history = (own[2] if own else store_path(config)) if config.store.record else None
    subtitle = str(path)
    if names_example_hosts(config):  # fictional hosts, all down: nothing worth a row in the user's store
        history, subtitle = None, f"{path}: the example pool's fictional hosts (nothing recorded)"
    return open_console(config, args.read_only, subtitle, store=history, stores=own[:2] if own else None)


class _OneLineFormatter(argparse.HelpFormatter):
    """One line per command: argparse measures the command names at one indent less than it draws them,
    so the longest (check-config) would wrap; its column is widened by that indent."""

    def add_argument(self, action: argparse.Action) -> None:
        super().add_argument(action)
        if isinstance(action, argparse._SubParsersAction):
            longest = max(len(name) for name in action.choices)
            self._action_max_length = max(self._action_max_length, longest + self._current_indent + 4)


def _formatter(prog: str) -> argparse.HelpFormatter:
    return _OneLineFormatter(prog, max_help_position=24, width=max(80, shutil.get_terminal_size().columns))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="poolconsole",
        description=__doc__,
        epilog="The config is --config FILE, else $POOLCONSOLE_CONFIG, else "
        f"{user_config_file()}; the working directory is not searched.",
        formatter_class=_formatter,
    )
    parser.add_argument("--version", action="version", version=f"poolconsole {__version__}")
    parser.add_argument("--config", metavar="FILE", help="hosts.toml of the pool (see below)")
    parser.add_argument("--read-only", action="store_true", help="hide and refuse every action that changes anything")
    parser.add_argument("--prometheus", metavar="URL", help="no hosts.toml: the engines a Prometheus holds, read-only")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")

    status = sub.add_parser("status", help="poll every target: a table, or one JSON document")
    status.add_argument("--config", metavar="FILE", default=argparse.SUPPRESS)
    status.add_argument("--prometheus", metavar="URL", default=argparse.SUPPRESS, help="discover the pool there")
    status.add_argument("--json", action="store_true", help="print one JSON document")
    status.add_argument("--samples", type=int, default=2, metavar="N", help="polls per target (default 2)")
    status.add_argument("--interval", type=float, default=1.0, metavar="S", help="seconds between polls (default 1)")
    status.set_defaults(func=cmd_status)

    check = sub.add_parser("check-config", help="validate hosts.toml, listing every problem")
    check.add_argument("file", nargs="?", metavar="FILE")
    check.add_argument("--config", metavar="FILE", default=argparse.SUPPRESS)
    check.set_defaults(func=cmd_check_config)

    schema = sub.add_parser("schema", help="print the JSON Schema of hosts.toml")
    schema.set_defaults(func=cmd_schema)

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
    smoke.set_defaults(func=cmd_smoke)

    plan = sub.add_parser("plan", help="what runs where and what fits, from the live pool")
    plan.add_argument("--config", metavar="FILE", default=argparse.SUPPRESS)
    plan.add_argument("--offline", action="store_true", help="the config's figures only; poll nothing")
    plan.add_argument("--audit-db", metavar="PATH", help="audit database: the profiles active after rollovers")
    plan.set_defaults(func=cmd_plan)

    audit_cmd = sub.add_parser("audit", help="the audit log of every action")
    audit_cmd.add_argument("--config", metavar="FILE", default=argparse.SUPPRESS)
    audit_cmd.add_argument("--json", action="store_true")
    audit_cmd.add_argument("--limit", type=int, default=50)
    audit_cmd.add_argument(
        "--db", metavar="PATH", help="audit database (default: user data dir; the demo's for its hosts.toml)"
    )
    audit_cmd.set_defaults(func=cmd_audit)

    logs_cmd = sub.add_parser("logs", help="an engine's log over SSH, with the failure modes it shows")
    logs_cmd.add_argument("engine")
    logs_cmd.add_argument("--config", metavar="FILE", default=argparse.SUPPRESS)
    logs_cmd.add_argument("--since", metavar="10m", help="only lines this recent (s, m, h, d)")
    logs_cmd.add_argument("--follow", action="store_true", help="keep printing new lines until Ctrl-C")
    logs_cmd.add_argument("--json", action="store_true", help="one JSON document (with --follow: one per line)")
    logs_cmd.add_argument("--lines", type=int, default=500, metavar="N", help="newest lines to read (default 500)")
    logs_cmd.add_argument("--max-bytes", type=int, default=2 * 1024 * 1024, metavar="N", help=argparse.SUPPRESS)
    logs_cmd.set_defaults(func=cmd_logs)

    exposure_cmd = sub.add_parser("exposure", help="audit what answers without a key or listens publicly")
    exposure_cmd.add_argument("--config", metavar="FILE", default=argparse.SUPPRESS)
    exposure_cmd.add_argument("--json", action="store_true", help="print one JSON document")
    exposure_cmd.add_argument("--no-completion", action="store_true", help="skip the one-token completion probe")
    exposure_cmd.set_defaults(func=cmd_exposure)

    tailnet_cmd = sub.add_parser("tailnet", help="each host's Tailscale path: direct or via DERP, online, handshake")
    tailnet_cmd.add_argument("--config", metavar="FILE", default=argparse.SUPPRESS)
    tailnet_cmd.add_argument("--json", action="store_true", help="print one JSON document")
    tailnet_cmd.set_defaults(func=cmd_tailnet)

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
        action.set_defaults(func=cmd_action)

    exporter = sub.add_parser("exporter", help="serve the pool on /metrics for Prometheus")
    exporter.add_argument("--config", metavar="FILE", default=argparse.SUPPRESS)
    exporter.add_argument(
        "--listen", default="127.0.0.1:9877", metavar="HOST:PORT", help="address to serve (default 127.0.0.1:9877)"
    )
    exporter.set_defaults(func=cmd_exporter)

    record = sub.add_parser("record", help="poll the pool headless into the history store until stopped")
    record.add_argument("--config", metavar="FILE", default=argparse.SUPPRESS)
    record.add_argument("--store", metavar="PATH", help="history store (default: [store] path, else user data dir)")
    record.set_defaults(func=cmd_record)

    watch_cmd = sub.add_parser("watch", help="poll, record and page: alerts to webhook, Alertmanager or ntfy")
    watch_cmd.add_argument("--config", metavar="FILE", default=argparse.SUPPRESS)
    watch_cmd.add_argument("--store", metavar="PATH", help="history store (default: [store] path, else user data dir)")
    watch_cmd.add_argument("--listen", metavar="HOST:PORT", help="also serve the exporter's /metrics here")
    watch_cmd.set_defaults(func=cmd_watch)

    prom_rules = sub.add_parser("prometheus-rules", help="the pager rules (down, stalled) as a Prometheus rule file")
    prom_rules.add_argument("--config", metavar="FILE", default=argparse.SUPPRESS)
    prom_rules.set_defaults(func=cmd_prometheus_rules)

    export_cmd = sub.add_parser("export", help="the history store's rows as JSON lines or CSV")
    export_cmd.add_argument("--config", metavar="FILE", default=argparse.SUPPRESS)
    export_cmd.add_argument("--store", metavar="PATH", help="history store (default: [store] path, else user data dir)")
    export_cmd.add_argument("--format", choices=["jsonl", "csv"], default="jsonl", help="default jsonl")
    export_cmd.add_argument("--from", dest="start", metavar="TIME", help="ISO 8601 (UTC if no offset), -10m, -7d")
    export_cmd.add_argument("--to", dest="end", metavar="TIME", help="end, exclusive (same forms; default now)")
    export_cmd.add_argument("--target", action="append", metavar="NAME", help="only this engine or host (repeatable)")
    # `--from -10m` is a value, not an option: argparse takes only negative numbers as values
    export_cmd._negative_number_matcher = re.compile(r"^-\d+(\.\d+)?\s*(s|m|min|h|d|w)?$|^-\d*\.\d+$")
    export_cmd.set_defaults(func=cmd_export)

    ledger = sub.add_parser("ledger", help="tokens, busy hours, energy per engine and day: does the pool pay off")
    ledger.add_argument("--config", metavar="FILE", default=argparse.SUPPRESS, help="hosts.toml: its [ledger] prices")
    ledger.add_argument("--store", metavar="PATH", help="history store (default: [store] path, else user data dir)")
    ledger.add_argument("--days", type=int, default=14, metavar="N", help="UTC days up to today (default 14)")
    ledger.add_argument("--json", action="store_true", help="print one JSON document")
    ledger.set_defaults(func=cmd_ledger)

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
    runs.set_defaults(func=cmd_runs)

    replay = sub.add_parser("replay", help="the console on a recording: what the pool looked like then")
    replay.add_argument("--config", metavar="FILE", default=argparse.SUPPRESS)
    replay.add_argument("--store", metavar="PATH", help="history store (default: [store] path, else user data dir)")
    replay.add_argument("--from", dest="start", metavar="TIME", help="where to start: ISO 8601 (UTC), -10m, -2h")
    replay.add_argument("--speed", type=float, default=1.0, metavar="N", help="recorded seconds per second (1)")
    replay._negative_number_matcher = export_cmd._negative_number_matcher
    replay.set_defaults(func=cmd_replay)

    prom_config = sub.add_parser("prometheus-config", help="scrape configs for a Prometheus watching the pool")
    prom_config.add_argument("--config", metavar="FILE", default=argparse.SUPPRESS)
    prom_config.add_argument("--file-sd", metavar="DIR", help="targets as file_sd JSON files in DIR")
    prom_config.add_argument(
        "--credentials-dir", default="credentials", metavar="DIR", help="API keys' files (default ./credentials)"
    )
    prom_config.set_defaults(func=cmd_prometheus_config)

    demo = sub.add_parser("demo", help="a simulated pool on 127.0.0.1, with the console on it")
    demo.add_argument("--serve-only", action="store_true", help="only run the pool (for tests and tools)")
    demo.add_argument("--config-out", metavar="FILE", help="write the pool's hosts.toml here once it answers")
    demo.add_argument("--scenario", choices=["normal", "overload", "node-down", "restart", "oom"], default="normal")
    demo.add_argument("--nodes", type=int, default=0, metavar="N", help="extra replicated nodes (up to 256)")
    demo.add_argument("--seed", type=int, default=1, help="random seed (repeatable runs)")
    demo.add_argument(
        "--read-only",
        action="store_true",
        default=argparse.SUPPRESS,
        help="hide and refuse every action that changes anything",
    )
    demo.set_defaults(func=cmd_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "config"):
        args.config = None
    func = getattr(args, "func", cmd_console)
    if func not in (cmd_console, cmd_demo) or getattr(args, "serve_only", False):
        gc.enable()  # paused for start-up (__main__.py); the console's runtime resumes it as its loops start
    try:
        return int(func(args))
    except ConfigError as exc:
        if not exc.problems:
            print(
                "poolconsole: no hosts.toml found: pass --config FILE, set POOLCONSOLE_CONFIG, "
                "or try `poolconsole demo`",
                file=sys.stderr,
            )
        else:
            print(exc.render(), file=sys.stderr)
        return EXIT_CONFIG
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `poolconsole status --json | head`: the reader went away, which is fine
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so the interpreter's last flush does not fail again
        # what `cat` and `git` exit with when the reader leaves (killed by SIGPIPE), not 1, which
        # `status` says for a pool with problems
        return EXIT_READER_GONE
    except (AuditUnreadable, StoreUnusable) as exc:
        print(f"poolconsole: {exc}", file=sys.stderr)
        return EXIT_CONFIG
