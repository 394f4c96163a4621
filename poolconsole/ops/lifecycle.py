"""Restart and quantization-profile rollover, over SSH to the engine's host. One action at a time per
engine; every action ends with a clear outcome in the audit log. After a restart, "healthy" means
serving (health 200, the model listed, one token generated: ops.health). A rollover that fails anywhere
after the switch (the new profile never serves, or its smoke test fails) restores the previous profile,
restarts, verifies that it serves, and says "rolled back".

A profile's values travel to the host over the SSH channel's stdin, never in a command line; progress
and the audit log name the variables, never their values."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from poolconsole.collect.engines.poll import EnginePoller
from poolconsole.collect.ssh import HostConnection, SSHFailure
from poolconsole.config.models import Engine, PoolConfig, Profile
from poolconsole.ops import audit, control
from poolconsole.ops.fit import FitReport, KvCapacity, LiveMemory, Verdict, fit

Progress = Callable[[str], None]
Smoke = Callable[[Callable[[str], None]], Awaitable[object]]
"""The rollover's smoke test: called with the action's progress (each check said as it finishes); True
when every check passed, else the failures in words."""
_BUSY: set[str] = set()


class ActionRefused(Exception):
    """Refused before anything changed (busy, no control, read-only, does not fit, unknown profile)."""


class ActionFailed(Exception):
    """A step failed after the action started; the message says which and why."""


@dataclass
class Outcome:
    action: str
    engine: str
    outcome: str
    """ok | failed | rolled back | rollback failed | refused (nothing ran) | abandoned (the console quit)"""
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
    secrets: tuple[str, ...] = ()
    """Values to scrub from anything shown or recorded (the profiles' env values)."""
    automatic: bool = False
    """The watcher's remediation runs it by itself (audited so)."""
    rule: str | None = None
    """The alert rule that caused an automatic action."""

    def say(self, line: str) -> None:
        self.progress(control.redact(line, self.secrets))


def in_flight_words(engine: Engine, running: float | None, waiting: float | None, *, drains: bool) -> str:
    """What the engine is serving now, and what the action does with it, for the confirmation: a restart
    drops the requests in flight (their clients get errors); a rollover first waits for them (its drain),
    up to `drain_timeout_s`."""
    if running is None or waiting is None:
        now = "requests in flight: unknown (the last poll read none)"
    elif running + waiting == 0:
        return "now: idle (no request running or waiting)"
    else:
        now = f"now: {running:.0f} running, {waiting:.0f} waiting"
    timeout = engine.control.drain_timeout_s if engine.control is not None else 0.0
    if drains and timeout > 0:
        return f"{now}; it first waits up to {timeout:g} s (drain_timeout_s) for them to finish, then switches"
    return f"{now}; the restart drops them (their clients get errors)"


def plan_restart(engine: Engine) -> list[str]:
    if engine.control is None:
        raise ActionRefused(f"{engine.name} has no [engines.control] table: it cannot be restarted from here")
    return [control.render(control.restart_argv(engine.control))]


def _shown(command: str) -> str:
    return command if len(command) < 300 else command[:140] + " ... " + command[-100:]


async def _run(
    ctx: ActionContext, command: str, *, stdin: str | None = None, quiet: bool = False, timeout_s: float | None = None
) -> str:
    """Run one command on the host; its output is shown unless `quiet` (a profile file's text is never)."""
    ctx.say(f"$ {_shown(command)}")
    try:
        result = await ctx.conn.run(command, timeout_s=timeout_s, stdin=stdin)
    except SSHFailure as exc:
        raise ActionFailed(f"SSH: {exc.message}") from None
    out = (result.stdout + result.stderr).strip()
    if out and not quiet:
        ctx.say(out[-400:])
    if result.exit_status not in (0, None):
        shown = result.stderr.strip()[-200:] if quiet else out[-200:]
        raise ActionFailed(f"`{_shown(command)}` exited {result.exit_status}: {shown}")
    return result.stdout


def _restart_timeout(ctx: ActionContext, engine: Engine) -> float:
    """A restart command waits for the old process to stop (docker's 10 s, supervisord's stopwaitsecs,
    systemd's TimeoutStopSec; an engine with requests in flight can take all of it), so it gets the
    engine's health timeout, not the SSH timeout of one poll's command."""
    assert engine.control is not None
    return max(ctx.config.settings.ssh_timeout_s, engine.control.health_timeout_s)


def _want_model(engine: Engine) -> str | None:
    return engine.smoke.models[0] if engine.smoke.models else None


async def _serving(ctx: ActionContext, engine: Engine) -> float:
    """Seconds until the engine serves (ops.health); not serving in time is an ActionFailed in its words.
    ops.health (httpx) is imported here, when an action runs, not when the console starts."""
    from poolconsole.ops.health import NotServing, await_serving

    assert engine.control is not None
    try:
        return await await_serving(engine, engine.control.health_timeout_s, ctx.say, want_model=_want_model(engine))
    except NotServing as exc:
        raise ActionFailed(str(exc)) from None


def _acquire(engine: Engine) -> None:
    if engine.name in _BUSY:
        raise ActionRefused(f"an action on {engine.name} is already running: refused")
    _BUSY.add(engine.name)


async def _refused(ctx: ActionContext, action: str, engine: Engine, why: ActionRefused, to: str | None) -> None:
    """A refusal is audited too, with why and no command (nothing ran): the audit log is every action an
    operator started, and a refused rollover (does not fit, busy, a variable not set) left no trace. A refused
    rollover names the profile it would have left ('None -> bf16-tp4' had been written while it was known)."""
    active = await _active_profile(ctx, engine) if to is not None else None
    await _audit(ctx, Outcome(action, engine.name, "refused", str(why)), active, to)


async def _active_profile(ctx: ActionContext, engine: Engine) -> str | None:
    """The profile the engine runs: the last rollover the audit log promoted, else hosts.toml's `profile`."""
    return await asyncio.to_thread(audit.active_profile, ctx.audit_path, engine.name) or engine.profile


async def restart(ctx: ActionContext, engine: Engine) -> Outcome:
    try:
        return await _restart(ctx, engine)
    except ActionRefused as exc:
        await _refused(ctx, "restart", engine, exc, None)
        raise


async def _restart(ctx: ActionContext, engine: Engine) -> Outcome:
    if ctx.read_only:
        raise ActionRefused("read-only mode: restart refused")
    commands = plan_restart(engine)
    _acquire(engine)
    started = time.monotonic()
    try:
        await _run(ctx, commands[0], timeout_s=_restart_timeout(ctx, engine))
        ready = await _serving(ctx, engine)
        outcome = Outcome(
            "restart", engine.name, "ok", f"serving after {ready:.1f} s", commands, time.monotonic() - started, ready
        )
    except ActionFailed as exc:
        outcome = Outcome("restart", engine.name, "failed", str(exc), commands, time.monotonic() - started)
    except asyncio.CancelledError:  # the console quit (asked first) or the command was stopped: audited
        why = f"`{commands[0]}` was sent; whether the engine serves again was not seen"
        _abandoned(ctx, Outcome("restart", engine.name, "abandoned", why, commands, time.monotonic() - started))
        raise
    finally:
        _BUSY.discard(engine.name)
    await _audit(ctx, outcome)
    return outcome


def _abandoned(
    ctx: ActionContext, outcome: Outcome, profile_from: str | None = None, profile_to: str | None = None
) -> None:
    """An action stopped where it stood (the console quit while it ran, or the command was interrupted):
    audited at once, on the loop's own thread, since a cancelled task may not get another turn to await one."""
    outcome.detail = f"stopped after {outcome.seconds:.0f} s (the console quit, or the command was interrupted): " + (
        outcome.detail
    )
    _record(ctx, outcome, profile_from, profile_to)
    ctx.say(f"== abandoned: {outcome.detail}")


def _record(ctx: ActionContext, outcome: Outcome, profile_from: str | None, profile_to: str | None) -> None:
    audit.record(
        ctx.audit_path,
        outcome.action,
        outcome.engine,
        outcome.commands,
        outcome.outcome,
        outcome.detail,
        outcome.seconds,
        profile_from,
        profile_to,
        ctx.secrets,
        automatic=ctx.automatic,
        rule=ctx.rule,
    )


async def _audit(
    ctx: ActionContext, outcome: Outcome, profile_from: str | None = None, profile_to: str | None = None
) -> None:
    """One audit entry per action, written off the event loop (SQLite, synchronous)."""
    await asyncio.to_thread(_record, ctx, outcome, profile_from, profile_to)


def find_profile(engine: Engine, name: str) -> Profile:
    for profile in engine.profiles:
        if profile.name == name:
            return profile
    known = ", ".join(p.name for p in engine.profiles) or "none"
    raise ActionRefused(f"{engine.name} has no profile {name!r} (known: {known})")


def check_rollover(engine: Engine, to: str) -> Profile:
    """What is refused before anything is planned or printed: no control, no profile file, unknown profile."""
    if engine.control is None or engine.control.profile_file is None:
        raise ActionRefused(f"{engine.name} needs [engines.control] with profile_file to switch profiles")
    return find_profile(engine, to)


def _profile_file(engine: Engine, profile: Profile) -> control.ProfileFile:
    try:
        return control.profile_file(engine, profile)
    except control.MissingEnv as exc:
        raise ActionRefused(str(exc)) from None


async def _write_profile(ctx: ActionContext, path: str, text: str, what: str) -> str:
    command = control.write_file_command(path, len(text.encode()))
    ctx.say(f"write {path} ({what}) over stdin")
    await _run(ctx, command, stdin=text, quiet=True)
    return command


async def rollover(
    ctx: ActionContext,
    engine: Engine,
    to: str,
    *,
    force: bool = False,
    smoke: Smoke | None = None,
    live: LiveMemory | None = None,
    kv: KvCapacity | None = None,
) -> Outcome:
    """Fit check, drain, apply, restart, await serving, smoke test, promote; on failure roll back.
    `live` is what a poll of the host says now (the fit check's figures; config figures without it)."""
    try:
        return await _rollover(ctx, engine, to, force=force, smoke=smoke, live=live, kv=kv)
    except ActionRefused as exc:
        await _refused(ctx, "rollover", engine, exc, to)
        raise


async def _rollover(
    ctx: ActionContext,
    engine: Engine,
    to: str,
    *,
    force: bool,
    smoke: Smoke | None,
    live: LiveMemory | None,
    kv: KvCapacity | None,
) -> Outcome:
    if ctx.read_only:
        raise ActionRefused("read-only mode: rollover refused")
    new = check_rollover(engine, to)
    assert engine.control is not None and engine.control.profile_file is not None
    current_name = await _active_profile(ctx, engine)
    old = find_profile(engine, current_name) if current_name else None
    new_file = _profile_file(engine, new)
    old_file = _profile_file(engine, old) if old is not None else None
    ctx.secrets = tuple({*ctx.secrets, *new_file.values, *(old_file.values if old_file else ())})
    again = new.name == current_name
    if again:  # a re-apply: the profile as hosts.toml says it now (its args or env edited), then a restart
        ctx.say(f"profile {new.name} is already active: it is applied again (its file rewritten, then a restart)")
    report = fit(engine, new, ctx.config.host(engine.host), live, kv, active=again)
    for line in report.lines():
        ctx.say(line)
    if report.verdict is Verdict.DOES_NOT_FIT and not force:
        raise ActionRefused(
            f"profile {to} does not fit on {engine.host}: " + "; ".join(line.strip() for line in report.lines()[1:3])
        )
    if report.verdict is Verdict.CANNOT_CHECK and not force:
        raise ActionRefused(
            f"cannot check whether profile {to} fits on {engine.host}: GPU memory unknown "
            "(poll the host, or set gpu_memory_gib / memory_gib; --force proceeds without the check)"
        )
    path = engine.control.profile_file
    restart_cmd = plan_restart(engine)[0]
    commands: list[str] = []
    _acquire(engine)
    started = time.monotonic()
    previous_text: str | None = None
    label = old.name if old else "the previous profile"
    where = f"before {path} was written: the host is as it was"
    """Where the rollover stands, in words, should the console quit while it runs."""
    try:
        try:
            await _drain(ctx, engine)
            previous_text = await _read_profile(ctx, path)
            what = f"profile {new.name}: {', '.join(new_file.names)}"
            commands.append(await _write_profile(ctx, path, new_file.text, what))
            where = f"{path} holds {new.name}, not yet restarted: the engine runs {label} until its next restart"
            commands.append(restart_cmd)
            await _run(ctx, restart_cmd, timeout_s=_restart_timeout(ctx, engine))
            where = f"{path} holds {new.name} and the engine was restarted on it, not yet seen serving"
            ready = await _serving(ctx, engine)
            if smoke is not None:
                where = f"{path} holds {new.name}, serving, its smoke test not finished"
                ctx.say("smoke test of the new profile")
                verdict = await smoke(ctx.say)
                if verdict is not True:
                    raise ActionFailed(f"smoke test failed: {verdict}")
            await asyncio.to_thread(audit.set_active_profile, ctx.audit_path, engine.name, new.name)
            outcome = Outcome(
                "rollover",
                engine.name,
                "ok",
                f"serving {new.name}{' (re-applied)' if again else ''}, ready after {ready:.1f} s"
                + (", smoke test passed" if smoke else " (smoke test skipped)"),
                commands,
                time.monotonic() - started,
                ready,
                report,
            )
        except ActionFailed as exc:
            where = f"rolling back to {label}: {path} may hold either profile"
            outcome = await _roll_back(ctx, engine, str(exc), old, old_file, previous_text, commands, report)
            outcome.seconds = time.monotonic() - started
    except asyncio.CancelledError:  # the console quit (asked first) or was stopped: no rollback runs
        if where.startswith(f"{path} holds {new.name}"):  # what the host's file says, for the next action
            audit.set_active_profile(ctx.audit_path, engine.name, new.name)
        back = "" if where.startswith("before") else f"; no rollback ran (roll over to {label} to restore it)"
        stopped = Outcome("rollover", engine.name, "abandoned", where + back, commands, time.monotonic() - started)
        _abandoned(ctx, stopped, old.name if old else current_name, new.name)
        raise
    finally:
        _BUSY.discard(engine.name)
    await _audit(ctx, outcome, old.name if old else current_name, new.name)
    return outcome


async def _roll_back(
    ctx: ActionContext,
    engine: Engine,
    reason: str,
    old: Profile | None,
    old_file: control.ProfileFile | None,
    previous_text: str | None,
    commands: list[str],
    report: FitReport,
) -> Outcome:
    assert engine.control is not None and engine.control.profile_file is not None
    label = old.name if old else "the previous profile"
    ctx.say(f"rollover failed: {reason}; rolling back to {label}")
    restore = previous_text if previous_text is not None else (old_file.text if old_file else None)
    restart_cmd = plan_restart(engine)[0]
    try:
        if restore is None:
            raise ActionFailed("no previous profile to restore")
        commands.append(await _write_profile(ctx, engine.control.profile_file, restore, f"back to {label}"))
        commands.append(restart_cmd)
        await _run(ctx, restart_cmd, timeout_s=_restart_timeout(ctx, engine))
        await _serving(ctx, engine)
        return Outcome(
            "rollover", engine.name, "rolled back", f"{reason}; {label} restored and serving", commands, fit=report
        )
    except ActionFailed as again:
        return Outcome("rollover", engine.name, "rollback failed", f"{reason}; rollback: {again}", commands, fit=report)


async def _read_profile(ctx: ActionContext, path: str) -> str | None:
    try:
        return await _run(ctx, control.read_file_argv(path), quiet=True)
    except ActionFailed:
        return None  # no file yet: the rollback writes the previous profile from config


async def _drain(ctx: ActionContext, engine: Engine) -> None:
    """Wait until nothing runs or waits, or the drain timeout. Unknown is not idle: an engine whose
    metrics cannot be read is waited for until the timeout, never switched at once."""
    assert engine.control is not None
    timeout = engine.control.drain_timeout_s
    if timeout <= 0:
        return
    poller = EnginePoller(engine, settings=ctx.config.settings)
    started = time.monotonic()
    try:
        while time.monotonic() - started < timeout:
            snap = await poller.poll()
            m = snap.metrics
            running = m.get("requests_running") if m else None
            waiting = m.get("requests_waiting") if m else None
            if running is None or waiting is None:
                ctx.say(f"draining {engine.name}: requests in flight unknown ({snap.error or 'not exposed'})")
            elif running + waiting == 0:
                return
            else:
                ctx.say(f"draining {engine.name}: {running + waiting:.0f} requests in flight")
            await asyncio.sleep(1.0)
        ctx.say(f"drain timeout after {timeout:g} s: switching with requests in flight (or unknown)")
    finally:
        await poller.aclose()
