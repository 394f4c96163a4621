"""A smoke run, once for every asker: the conditions it is measured on (each target's version, its host's GPUs,
what the engine reports, the profile really active), the checks target after target, the verdicts of a
measurement run, the stored run and its comparison with each target's last passing one. The console passes
its live state (no extra poll), the command lets it poll; both store the same record."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from poolconsole.model.pool_state import PoolState
from poolconsole.model.smoke import Change, CheckResult
from poolconsole.ops.smoke import runs as smoke_runs
from poolconsole.ops.smoke.checks import Activity
from poolconsole.ops.smoke.runner import (
    SmokeOptions,
    active_profiles,
    choose_targets,
    conditions,
    document,
    engine_reported,
    read_conditions,
    run_smoke,
    say_what_it_does,
    summaries,
    with_measurements,
)
from poolconsole.ops.sqlite import StoreUnusable
from poolconsole.workflows.workspace import Workspace

__all__ = ["SmokeOptions", "SmokeRun", "console_options", "default_db", "run"]


def default_db() -> Path:
    """Where smoke runs are stored unless the asker names a store."""
    return smoke_runs.default_db()


def console_options(targets: list[str]) -> SmokeOptions:
    """The console's run: the targets named (none: every engine, and through the gateway), at concurrency 1 and 4."""
    return SmokeOptions(tuple(targets), via_gateway=not targets, concurrency=(1, 4), requests=4)


@dataclass
class SmokeRun:
    results: list[CheckResult]
    seed: int
    doc: dict[str, Any]
    """The JSON document `smoke --json` prints (passed, seed, results, the verdicts, run_id and db once stored)."""
    found: dict[str, list[dict[str, Any]]]
    """The verdicts of a measurement run: `spec_decode` (workloads) and `context`."""
    changes: list[Change] = field(default_factory=list)
    store_error: str | None = None

    @property
    def passed(self) -> bool:
        return bool(self.doc["passed"])


async def run(
    ws: Workspace,
    options: SmokeOptions,
    db: Path,
    *,
    landed: Callable[[CheckResult], None] | None = None,
    state: PoolState | None = None,
    command: str = "console",
    compare: bool = True,
    say: Callable[[str], None] | None = None,
) -> SmokeRun:
    """The run, stored in `db` (results kept in the returned run if the store fails meanwhile: nothing is lost).
    `state`: the console's live pool, read for versions and hosts instead of polling them again. `say`: what it
    is doing, every few seconds of a long run (a command's stderr)."""
    config = ws.config
    targets = choose_targets(config, options)
    active = await asyncio.to_thread(active_profiles, config, ws.audit_path)
    if state is None:
        versions, hosts, reported = await read_conditions(config, targets)
    else:
        versions = {n: t.view.version if t.view else None for n, t in state.engines.items()}
        hosts = {n: h.snapshot for n, h in state.hosts.items() if h.snapshot is not None}
        reported = await engine_reported(config, targets)
    options = dataclasses.replace(options, profiles=active)
    activity = Activity()
    ticker = asyncio.create_task(say_what_it_does(activity, say)) if say is not None else None
    try:
        results, seed = await run_smoke(config, options, landed, activity)
    finally:
        if ticker is not None:
            ticker.cancel()
    found = summaries(results)
    doc = document(results, seed, {k: v for k, v in found.items() if v})
    measured_on = with_measurements(conditions(config, versions, active, hosts, reported), found)
    done = SmokeRun(results, seed, doc, found)
    try:
        run_id = await asyncio.to_thread(
            smoke_runs.save_run, db, seed, doc["passed"], command, doc["results"], measured_on
        )
        doc["run_id"], doc["db"] = run_id, str(db)
        if compare:
            done.changes = await asyncio.to_thread(smoke_runs.compare, db, run_id)
    except StoreUnusable as exc:  # gone since the run began: the results are still said
        done.store_error = doc["store_error"] = f"results not stored: {exc}"
    return done
