"""Restart and quantization-profile rollover, over SSH to the engine's host. One action at a time per
engine; every action ends with a clear outcome in the audit log. A rollover that fails anywhere after
the switch restores the previous profile, restarts, verifies health, and says "rolled back"."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from poolconsole.collect.engines.poll import EnginePoller
from poolconsole.collect.ssh import HostConnection, SSHFailure
from poolconsole.config.models import Engine, PoolConfig, Profile
from poolconsole.model.snapshots import EngineState
from poolconsole.ops import audit, control
from poolconsole.ops.fit import FitReport, fit

Progress = Callable[[str], None]
_BUSY: set[str] = set()


class ActionRefused(Exception):
    """Refused before anything changed (busy, no control, read-only, does not fit)."""


@dataclass
class Outcome:
    action: str
    engine: str
    outcome: str
    """ok | failed | rolled back | rollback failed"""
    detail: str
    commands: list[str] = field(default_factory=list)
    seconds: float = 0.0
    time_to_ready_s: float | None = None
    fit: FitReport | None = None


@dataclass
class ActionContext:
    config: PoolConfig
    conn: HostConnection
    audit_path: Path
    progress: Progress = print
    read_only: bool = False


def plan_restart(engine: Engine) -> list[str]:
    if engine.control is None:
        raise ActionRefused(f"{engine.name} has no [engines.control] table: it cannot be restarted from here")
    return [control.render(control.restart_argv(engine.control))]


async def _run(ctx: ActionContext, command: str) -> str:
    ctx.progress(f"$ {command if len(command) < 300 else command[:140] + ' ... ' + command[-100:]}")
    try:
        result = await ctx.conn.run(command)
    except SSHFailure as exc:
        raise RuntimeError(f"SSH: {exc.message}") from None
    out = (result.stdout + result.stderr).strip()
    if out:
        ctx.progress(out[-400:])
    if result.exit_status not in (0, None):
        raise RuntimeError(f"`{command}` exited {result.exit_status}: {out[-200:]}")
    return result.stdout


async def await_healthy(engine: Engine, timeout_s: float, progress: Progress, settle_polls: int = 2) -> float:
    """Poll the engine until it answers ok `settle_polls` times in a row; returns seconds to ready."""
    started = time.monotonic()
    poller = EnginePoller(engine)
    streak = 0
    last = ""
    try:
        await asyncio.sleep(1.0)  # let the old process go away before judging the new one
        while time.monotonic() - started < timeout_s:
            snap = await poller.poll()
            streak = streak + 1 if snap.state is EngineState.OK else 0
            if snap.error and snap.error != last:
                progress(f"waiting for {engine.name}: {snap.state.value}: {snap.error}")
                last = snap.error
            if streak >= settle_polls:
                return time.monotonic() - started
            await asyncio.sleep(1.0)
    finally:
        await poller.aclose()
    raise TimeoutError(f"{engine.name} not healthy within {timeout_s:g} s (last: {last or 'no answer'})")


def _acquire(engine: Engine) -> None:
    if engine.name in _BUSY:
        raise ActionRefused(f"an action on {engine.name} is already running: refused")
    _BUSY.add(engine.name)


async def restart(ctx: ActionContext, engine: Engine) -> Outcome:
    if ctx.read_only:
        raise ActionRefused("read-only mode: restart refused")
    commands = plan_restart(engine)
    assert engine.control is not None
    _acquire(engine)
    started = time.monotonic()
    try:
        await _run(ctx, commands[0])
        ready = await await_healthy(engine, engine.control.health_timeout_s, ctx.progress)
        outcome = Outcome(
            "restart", engine.name, "ok", f"healthy after {ready:.1f} s", commands, time.monotonic() - started, ready
        )
    except (RuntimeError, TimeoutError) as exc:
        outcome = Outcome("restart", engine.name, "failed", str(exc), commands, time.monotonic() - started)
    finally:
        _BUSY.discard(engine.name)
    await _audit(ctx, outcome)
    return outcome


async def _audit(
    ctx: ActionContext, outcome: Outcome, profile_from: str | None = None, profile_to: str | None = None
) -> None:
    """One audit entry per action, written off the event loop (SQLite, synchronous)."""
    await asyncio.to_thread(
        audit.record,
        ctx.audit_path,
        outcome.action,
        outcome.engine,
        outcome.commands,
        outcome.outcome,
        outcome.detail,
        outcome.seconds,
        profile_from,
        profile_to,
    )


def find_profile(engine: Engine, name: str) -> Profile:
    for profile in engine.profiles:
        if profile.name == name:
            return profile
    raise ActionRefused(f"{engine.name} has no profile {name!r} (known: {', '.join(p.name for p in engine.profiles)})")


async def rollover(
    ctx: ActionContext,
    engine: Engine,
    to: str,
    *,
    force: bool = False,
    smoke: Callable[[], object] | None = None,
    gpu_totals_gib: list[float] | None = None,
    unified_available_gib: float | None = None,
) -> Outcome:
    """Fit check, drain, apply, restart, await health, smoke test, promote; on failure roll back."""
    if ctx.read_only:
        raise ActionRefused("read-only mode: rollover refused")
    if engine.control is None or engine.control.profile_file is None:
        raise ActionRefused(f"{engine.name} needs [engines.control] with profile_file to switch profiles")
    new = find_profile(engine, to)
    current_name = await asyncio.to_thread(audit.active_profile, ctx.audit_path, engine.name) or engine.profile
    old = find_profile(engine, current_name) if current_name else None
    report = fit(engine, new, ctx.config.host(engine.host), gpu_totals_gib, unified_available_gib)
    for line in report.lines():
        ctx.progress(line)
    if not report.fits and not force:
        raise ActionRefused(f"profile {to} does not fit on {engine.host}: " + "; ".join(report.lines()[1:]))
    path = engine.control.profile_file
    restart_cmd = plan_restart(engine)[0]
    commands: list[str] = []
    _acquire(engine)
    started = time.monotonic()
    try:
        try:
            await _drain(ctx, engine)
            previous_text = await _read_profile(ctx, path)
            commands += [control.write_file_argv(path, control.profile_env(engine, new)), restart_cmd]
            await _run(ctx, commands[0])
            await _run(ctx, restart_cmd)
            ready = await await_healthy(engine, engine.control.health_timeout_s, ctx.progress)
            if smoke is not None:
                ctx.progress("smoke test of the new profile")
                verdict = await smoke()  # type: ignore[misc]
                if verdict is not True:
                    raise RuntimeError(f"smoke test failed: {verdict}")
            await asyncio.to_thread(audit.set_active_profile, ctx.audit_path, engine.name, new.name)
            outcome = Outcome(
                "rollover",
                engine.name,
                "ok",
                f"serving {new.name}, healthy after {ready:.1f} s",
                commands,
                time.monotonic() - started,
                ready,
                report,
            )
        except (RuntimeError, TimeoutError) as exc:
            reason = str(exc)
            ctx.progress(f"rollover failed: {reason}; rolling back to {old.name if old else 'the previous file'}")
            restore = (
                previous_text if previous_text is not None else (control.profile_env(engine, old) if old else None)
            )
            try:
                if restore is None:
                    raise RuntimeError("no previous profile to restore")
                commands += [control.write_file_argv(path, restore), restart_cmd]
                await _run(ctx, commands[-2])
                await _run(ctx, restart_cmd)
                await await_healthy(engine, engine.control.health_timeout_s, ctx.progress)
                outcome = Outcome(
                    "rollover",
                    engine.name,
                    "rolled back",
                    f"{reason}; {old.name if old else 'previous'} restored and healthy",
                    commands,
                    time.monotonic() - started,
                    None,
                    report,
                )
            except (RuntimeError, TimeoutError) as again:
                outcome = Outcome(
                    "rollover",
                    engine.name,
                    "rollback failed",
                    f"{reason}; rollback: {again}",
                    commands,
                    time.monotonic() - started,
                    None,
                    report,
                )
    finally:
        _BUSY.discard(engine.name)
    await _audit(ctx, outcome, old.name if old else current_name, new.name)
    return outcome


async def _read_profile(ctx: ActionContext, path: str) -> str | None:
    try:
        return await _run(ctx, control.read_file_argv(path))
    except RuntimeError:
        return None  # no file yet: the rollback writes the previous profile from config


async def _drain(ctx: ActionContext, engine: Engine) -> None:
    assert engine.control is not None
    timeout = engine.control.drain_timeout_s
    if timeout <= 0:
        return
    poller = EnginePoller(engine)
    started = time.monotonic()
    try:
        while time.monotonic() - started < timeout:
            snap = await poller.poll()
            m = snap.metrics
            busy = (m.get("requests_running") or 0) + (m.get("requests_waiting") or 0) if m else 0
            if busy == 0:
                return
            ctx.progress(f"draining {engine.name}: {busy:.0f} requests in flight")
            await asyncio.sleep(1.0)
        ctx.progress(f"drain timeout after {timeout:g} s: switching with requests in flight")
    finally:
        await poller.aclose()
