"""`poolconsole smoke ENGINE --workload ... --ab PROFILE`: speculative decoding with and without, measured.

The workloads run on the profile the engine serves now; then a guarded rollover (the one `rollover` and the
console's `P` run: fit check from a poll of the host, the profile file written over stdin, restart, wait
until it serves; any failure restores the previous profile and says "rolled back") switches it to PROFILE;
the same workloads (the same prompts: the same seed, and a restarted engine has an empty prefix cache) run
again; a second guarded rollover returns it to the profile it had. Both rollovers land in the audit log.
The verdict sets each workload's tok/s with speculative decoding against without ("keep speculative
decoding for: code (acceptance 0.71, +38 % tok/s); not for: chat (0.22, -6 %)"). Both runs are stored,
each with the conditions it ran on and a link to the other (`conditions.ENGINE.ab`).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from poolconsole.config.models import Engine, PoolConfig
from poolconsole.model.smoke import CheckResult

Say = Callable[[str], None]


class AbRefused(Exception):
    """Refused before anything changed: every reason in words."""


@dataclass
class Side:
    """One half of the A/B: a profile and what was measured on it."""

    profile: str
    role: str
    """"baseline" (the profile it served before) or "candidate" (--ab PROFILE)."""
    results: list[CheckResult] = field(default_factory=list)
    conditions: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def speculative(self) -> bool:
        """Speculative decoding was measured on it (an acceptance rate was read)."""
        return any(r.spec_decode_acceptance_rate is not None for r in self.results if r.workload)


@dataclass
class AbOutcome:
    engine: str
    seed: int
    baseline: Side
    candidate: Side
    rollover: dict[str, Any] | None = None
    """The rollover to the candidate: outcome, detail, seconds."""
    restore: dict[str, Any] | None = None
    """The rollover back to the baseline profile."""
    verdict: dict[str, Any] | None = None
    problem: str | None = None
    """Why the A/B did not complete (a failed or rolled-back rollover), in words; None when it did."""

    @property
    def passed(self) -> bool:
        sides = self.baseline.results + self.candidate.results
        return self.problem is None and bool(sides) and all(r.passed for r in sides)


def check_ab(config: PoolConfig, engine: Engine, profile: str, current: str | None) -> None:
    """What refuses an A/B before anything runs (AbRefused)."""
    from poolconsole.ops import lifecycle

    problems: list[str] = []
    try:
        lifecycle.check_rollover(engine, profile)
    except lifecycle.ActionRefused as exc:
        problems.append(str(exc))
    if current is None:
        problems.append(f"{engine.name} names no profile it serves now: there is nothing to return to after --ab")
    elif current == profile:
        problems.append(f"{engine.name} already serves {profile}: --ab needs a different profile to measure against")
    if config.host(engine.host) is None:
        problems.append(f"engine {engine.name} names no [[hosts]] entry to run the rollover on")
    if problems:
        raise AbRefused("; ".join(problems))


def _outcome_doc(outcome: Any) -> dict[str, Any]:
    return {
        "outcome": outcome.outcome,
        "detail": outcome.detail,
        "seconds": round(outcome.seconds, 1),
        "time_to_ready_s": outcome.time_to_ready_s,
    }


async def guarded_rollover(
    config: PoolConfig, engine: Engine, profile: str, audit_path: Path, say: Say, force: bool = False
) -> Any:
    """The rollover `poolconsole rollover ENGINE PROFILE` runs (fit check against a poll of the host and the
    engine's own KV figures, apply, restart, await serving, roll back on failure; audited), without its
    smoke suite: the measurement that follows is the test. Raises lifecycle.ActionRefused when refused."""
    from poolconsole.collect.ssh import SSHPool
    from poolconsole.ops import lifecycle
    from poolconsole.ops.fit import live_memory
    from poolconsole.ops.planning import poll_hosts, read_kv

    host = config.host(engine.host)
    assert host is not None
    pool = SSHPool([host], config.settings.ssh_timeout_s, 4)
    try:
        ctx = lifecycle.ActionContext(config, pool[host.name], audit_path, progress=say)
        snapshots, kv = await asyncio.gather(poll_hosts(config, {host.name}), read_kv([engine], config))
        live = live_memory(snapshots.get(host.name), engine, 0.0)
        return await lifecycle.rollover(ctx, engine, profile, force=force, smoke=None, live=live, kv=kv[engine.name])
    finally:
        await pool.close()


async def _measure(config: PoolConfig, options: Any, side: Side, audit_path: Path, say: Say) -> None:
    from poolconsole.ops.smoke.runner import active_profiles, choose_targets, conditions, read_conditions, run_smoke

    targets = choose_targets(config, options)
    active = await asyncio.to_thread(active_profiles, config, audit_path)
    versions, hosts, reported = await read_conditions(config, targets)
    say(f"measuring on {side.profile} ({side.role})")
    side.results, _ = await run_smoke(config, replace(options, profiles=active))
    measured = conditions(config, versions, active, hosts, reported)
    side.conditions = {t.name: measured[t.name] for t in targets}


def ab_verdict(baseline: Side, candidate: Side) -> dict[str, Any]:
    """The workloads' verdict: the speculative side's results against the other side's tok/s."""
    from poolconsole.ops.smoke.workloads import verdict

    spec, plain = (candidate, baseline) if candidate.speculative and not baseline.speculative else (baseline, candidate)
    without: dict[str, CheckResult] = {}
    for r in plain.results:
        if r.workload is not None and r.passed:
            without.setdefault(r.workload, r)
    found = verdict(spec.results, without)
    found["with_profile"], found["without_profile"] = spec.profile, plain.profile
    if spec.speculative and plain.speculative:
        found["verdict"] += f" (both profiles draft: {plain.profile} is not one without speculative decoding)"
    elif not spec.speculative:
        found["verdict"] = f"neither {baseline.profile} nor {candidate.profile} shows speculative decoding: " + str(
            found["verdict"]
        )
    return found


async def run_ab(
    config: PoolConfig,
    options: Any,
    engine: Engine,
    profile: str,
    current: str,
    audit_path: Path,
    say: Say,
    force: bool = False,
) -> AbOutcome:
    """Measure on `current`, roll over to `profile`, measure, roll back to `current`. A rollover that fails
    ends the A/B (the engine was rolled back to what it served); the outcome says so in `problem`."""
    seed = options.seed if options.seed is not None else random.randrange(1, 2**31)
    options = replace(options, targets=(engine.name,), seed=seed)
    out = AbOutcome(engine.name, seed, Side(current, "baseline"), Side(profile, "candidate"))
    await _measure(config, options, out.baseline, audit_path, say)
    say(f"rollover {engine.name} to {profile}")
    forward = await guarded_rollover(config, engine, profile, audit_path, say, force)
    out.rollover = _outcome_doc(forward)
    if forward.outcome != "ok":
        out.problem = (
            f"rollover to {profile} {forward.outcome}: {forward.detail}; nothing measured on {profile}, "
            f"{engine.name} is back on {current}"
            if forward.outcome == "rolled back"
            else f"rollover to {profile} {forward.outcome}: {forward.detail}"
        )
        return out
    try:
        await _measure(config, options, out.candidate, audit_path, say)
    finally:
        say(f"rollover {engine.name} back to {current}")
        back = await guarded_rollover(config, engine, current, audit_path, say, force=True)
        out.restore = _outcome_doc(back)
    if back.outcome != "ok":
        out.problem = f"returning to {current} {back.outcome}: {back.detail}"
    out.verdict = ab_verdict(out.baseline, out.candidate)
    return out


def store_ab(db: Path, outcome: AbOutcome, command: str) -> tuple[int, int]:
    """Both runs, each with its conditions, the verdict and a link to the other (`conditions.ENGINE.ab`)."""
    from poolconsole.ops.smoke import runs as smoke_runs
    from poolconsole.ops.smoke.runner import summaries, with_measurements

    ids: list[int] = []
    for side in (outcome.baseline, outcome.candidate):
        results = [r.to_json() for r in side.results]
        found = summaries(side.results)
        if outcome.verdict is not None:
            found["spec_decode"] = [{"target": outcome.engine, **outcome.verdict}]
        measured = with_measurements(side.conditions, found)
        measured.setdefault(outcome.engine, {})["ab"] = {
            "role": side.role,
            "profile": side.profile,
            "baseline_profile": outcome.baseline.profile,
            "candidate_profile": outcome.candidate.profile,
            "problem": outcome.problem,
        }
        passed = outcome.problem is None and bool(results) and all(r["passed"] for r in results)
        if not results:  # nothing measured on this side (the rollover to it failed): nothing to store
            continue
        ids.append(smoke_runs.save_run(db, outcome.seed, passed, command, results, measured))
    if len(ids) == 2:
        smoke_runs.link_runs(db, outcome.engine, ids[0], ids[1])
    return (ids[0], ids[1]) if len(ids) == 2 else (ids[0], 0) if ids else (0, 0)


def document(outcome: AbOutcome, runs: tuple[int, int]) -> dict[str, Any]:
    """`smoke --ab --json`: every result labelled with the profile it ran on, the verdict, both rollovers."""
    results = []
    for side in (outcome.baseline, outcome.candidate):
        results += [{**r.to_json(), "profile": side.profile, "ab_role": side.role} for r in side.results]
    verdict = outcome.verdict
    return {
        "passed": outcome.passed,
        "seed": outcome.seed,
        "results": results,
        "spec_decode": [{"target": outcome.engine, **verdict}] if verdict else [],
        "ab": {
            "engine": outcome.engine,
            "baseline_profile": outcome.baseline.profile,
            "candidate_profile": outcome.candidate.profile,
            "rollover": outcome.rollover,
            "restore": outcome.restore,
            "problem": outcome.problem,
            "verdict": verdict["verdict"] if verdict else None,
            "runs": {"baseline": runs[0] or None, "candidate": runs[1] or None},
        },
    }


def text_lines(doc: dict[str, Any]) -> list[str]:
    ab = doc["ab"]
    lines = []
    for r in doc["results"]:
        mark = "PASS" if r["passed"] else "FAIL"
        level = f" c={r['concurrency']}" if r.get("concurrency") else ""
        lines.append(f"{mark}  {r['profile']:20s} {r['model'][:28]:28s} {r['check']}{level}: {r['reason']}")
    for name in ("rollover", "restore"):
        step = ab.get(name)
        if step:
            lines.append(f"{name}: {step['outcome']}: {step['detail']} ({step['seconds']:.1f} s)")
    if ab["verdict"]:
        lines.append(f"{ab['engine']}: {ab['verdict']}")
    if ab["problem"]:
        lines.append(f"{ab['engine']}: A/B not completed: {ab['problem']}")
    runs = ", ".join(f"{k} run {v}" for k, v in ab["runs"].items() if v)
    lines.append(("passed" if doc["passed"] else "FAILED") + f" (seed {doc['seed']}; stored: {runs or 'nothing'})")
    return lines
