"""The watcher's remediation ladder (issue 38): what `poolconsole watch` does by itself when a rule fires on an
engine whose policy (`[remediation]`, `[engines.remediation]`) says to act. Off by default; the console never
acts on it.

- `Ladder` is the decisions, pure: no I/O, the time passed in, so a fake clock tests every rule of it.
  Notify first; act after `grace_s` if the condition still holds; an action that did not bring the engine back
  to serving (or after which the rule still fires `grace_s` later; a loop: it restarts by itself again) climbs
  one rung: restart, roll back, then a notification "gave up: needs a person". Never two engines of one host at
  once; `cooldown_s` between two actions on one engine; never past `max_actions_per_hour` on one engine: the next
  case is a notification that the budget is spent, and nothing runs. A dry run decides the same and spends nothing.
- `Remediator` is its I/O, started by the watcher beside its notifier: it reads the rules' active alerts once a
  second, runs what the ladder decides through the same workflows as an operator's (workflows.restart and
  workflows.rollover: lifecycle's "healthy means serving" check is the verification; audited with
  `automatic: true` and the rule), announces each step through the notifier's receivers, and keeps the actions
  spent in the notifications' state file, so a restarted watcher keeps its budget."""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from poolconsole.collect.tasks import reap
from poolconsole.config.models import Engine, PoolConfig
from poolconsole.ops import audit, lifecycle
from poolconsole.runtime.live import LivePool
from poolconsole.runtime.notifier import Notifier, NotifyState
from poolconsole.runtime.remediation_board import Board, Cancel, Pending
from poolconsole.workflows import restart, rollover
from poolconsole.workflows.workspace import Workspace

HOUR_S = 3600.0
TICK_S = 1.0
"""How often the remediator looks at the active alerts."""
RULES = ("restart_loop", "down", "stalled")
"""The rules remediation answers, the first that fires on an engine taking it: a crash loop is also down at
times, and a down engine is never stalled."""
PAST = {"restart": "restarted", "rollback": "rolled back"}
DOING = {"restart": "restarting", "rollback": "rolling back"}

Action = Literal["restart", "rollback"]


@dataclass(frozen=True)
class Condition:
    """A rule that fires on an engine now, in the alert's words."""

    engine: str
    rule: str
    words: str
    last_restart: float | None = None
    """restart_loop: when the engine last restarted by itself (not by the console's or watcher's actions)."""


@dataclass(frozen=True)
class Step:
    """What the ladder decided: a notification (`action` None), or an action to run now."""

    engine: str
    rule: str
    words: str
    action: Action | None = None
    severity: str = "warning"
    stage: str = "pending"
    """pending | acting | acted | failed | gave_up | budget_spent | cancelled | would (a dry run): a label the
    receivers see."""


@dataclass
class Case:
    """One condition on one engine, from the first notification until it clears."""

    engine: str
    rule: str
    words: str
    opened_at: float
    rungs: tuple[Action, ...]
    rung: int = 0
    acting: bool = False
    acted_at: float | None = None
    """When the last action ended with the engine serving (its rule has grace_s to clear from then)."""
    last_restart: float | None = None
    over: bool = False
    """Given up, the budget spent, cancelled, or said by a dry run: nothing more until the condition clears."""


def cause(rule: str, words: str) -> str:
    """The alert's words as a clause: its rule named once, the parenthesis left out ("stalled: 5 running and 0
    waiting, no token generated for 45 s")."""
    said = re.sub(r"\s*\([^()]*\)\s*$", "", words).strip()
    name = rule.replace("_", " ")
    return said if said.startswith(name) or rule == "restart_loop" else f"{name}: {said}"


def rungs_of(config: PoolConfig, engine: Engine) -> dict[str, tuple[Action, ...]]:
    """rule -> the actions the engine's policy allows for it, in the ladder's order (empty: notify only). A
    restart needs `[engines.control]`; a rollback its `profile_file` and `on_crash_loop = "rollback"` (a
    restart that did not help climbs to one only where rollbacks are allowed)."""
    default, own = config.remediation, engine.remediation
    on_stalled = own.on_stalled or default.on_stalled
    on_down = own.on_down or default.on_down
    on_crash_loop = own.on_crash_loop or default.on_crash_loop
    control = engine.control
    can_restart = control is not None
    can_rollback = control is not None and control.profile_file is not None and on_crash_loop == "rollback"
    after: tuple[Action, ...] = ("rollback",) if can_rollback else ()
    out: dict[str, tuple[Action, ...]] = {}
    for rule, policy in (("stalled", on_stalled), ("down", on_down)):
        out[rule] = ("restart", *after) if policy == "restart" and can_restart else ()
    out["restart_loop"] = after
    return out


class Ladder:
    """The decisions. `tick(now, conditions)` once a second, `finished(...)` when an action it asked for ends."""

    def __init__(self, config: PoolConfig, spent: Iterable[tuple[str, float]] = (), *, dry_run: bool = False) -> None:
        self.settings = config.remediation
        self.dry_run = dry_run
        self.rungs = {e.name: rungs_of(config, e) for e in config.engines}
        self.hosts = {e.name: e.host for e in config.engines}
        self.spent: dict[str, list[float]] = {}
        """engine -> when each automatic action on it started (the budget and the cooldown)."""
        for engine, at in spent:
            self.spent.setdefault(engine, []).append(at)
        self.cases: dict[str, Case] = {}

    def left(self, engine: str, now: float) -> int:
        """Actions left on `engine` in the hour before `now`."""
        recent = [t for t in self.spent.get(engine, []) if now - t < HOUR_S]
        return max(0, self.settings.max_actions_per_hour - len(recent))

    def _budget(self, engine: str, now: float) -> str:
        return f"{self.left(engine, now)} of {self.settings.max_actions_per_hour} actions left this hour"

    def tick(self, now: float, conditions: Mapping[str, Condition]) -> list[Step]:
        """`conditions`: engine -> the rule that fires on it now (one per engine, RULES' order)."""
        steps: list[Step] = []
        for engine, open_case in list(self.cases.items()):
            now_held = conditions.get(engine)
            if not open_case.acting and (now_held is None or now_held.rule != open_case.rule):
                del self.cases[engine]
        if not self.settings.enabled:
            return steps
        for engine, held in conditions.items():
            case = self.cases.get(engine)
            if case is not None:
                if held.rule == case.rule and not case.acting:  # the words that caused the action stay its words
                    case.words = held.words
                case.last_restart = held.last_restart
                continue
            rungs = self.rungs.get(engine, {}).get(held.rule, ())
            if not rungs:
                continue
            self.cases[engine] = case = Case(engine, held.rule, held.words, now, rungs, last_restart=held.last_restart)
            doing = f"would {rungs[0]}" if self.dry_run else DOING[rungs[0]]
            steps.append(
                Step(engine, held.rule, f"{cause(held.rule, held.words)}; {doing} {engine} in "
                     f"{self.settings.grace_s:g} s if it still holds ({self._budget(engine, now)})")
            )  # fmt: skip
        for case in sorted(self.cases.values(), key=lambda c: c.opened_at):
            step = self._next(case, now)
            if step is not None:
                steps.append(step)
        return steps

    def _next(self, case: Case, now: float) -> Step | None:
        if case.over or case.acting:
            return None
        grace = self.settings.grace_s
        if case.acted_at is not None:  # it served after the action, and its rule still fires
            if now - case.acted_at < grace:
                return None
            why = f"still {cause(case.rule, case.words)} {grace:g} s after the action"
            if case.rule == "restart_loop":  # it fires on the window's crashes before the action: only a new one
                if case.last_restart is None or case.last_restart <= case.acted_at:  # says the action did not help
                    return None
                why = f"it restarted by itself again {case.last_restart - case.acted_at:.0f} s after the action"
            case.acted_at = None
            return self._climb(case, now, why)
        elif now - case.opened_at < grace:
            return None
        if case.rung >= len(case.rungs):
            return self._gave_up(case, now, "nothing left to try")
        action = case.rungs[case.rung]
        engine = case.engine
        if self.left(engine, now) <= 0:
            case.over = True
            return Step(
                engine, case.rule,
                f"budget spent: {cause(case.rule, case.words)}; {action} of {engine} not done: "
                f"{self.settings.max_actions_per_hour} automatic actions on it in the last hour "
                "(max_actions_per_hour): needs a person",
                severity="critical", stage="budget_spent",
            )  # fmt: skip
        last = max(self.spent.get(engine, []), default=None)
        if last is not None and now - last < self.settings.cooldown_s:
            return None
        host = self.hosts.get(engine)
        if host is not None and any(
            c.acting and c.engine != engine and self.hosts.get(c.engine) == host for c in self.cases.values()
        ):
            return None  # one engine of a host at a time
        words = cause(case.rule, case.words)
        if self.dry_run:
            case.over = True
            return Step(engine, case.rule, f"would {action} {engine}: {words}", action, stage="would")
        self.spent.setdefault(engine, []).append(now)
        case.acting = True
        return Step(engine, case.rule, f"{action} {engine}: {words}", action, stage="acting")

    def pending(self, now: float) -> list[Pending]:
        """The board: each case waiting to act (its grace, its cooldown), with when and the budget left. A case
        that acts, clears, gives up, has its budget spent or is cancelled has no row."""
        rows: list[Pending] = []
        if self.dry_run:
            return rows
        grace, per_hour = self.settings.grace_s, self.settings.max_actions_per_hour
        for case in self.cases.values():
            rung = case.rung if case.acted_at is None else case.rung + 1  # after an action: the climb's
            left = self.left(case.engine, now)
            if case.over or case.acting or rung >= len(case.rungs) or left <= 0:
                continue
            due = (case.opened_at if case.acted_at is None else case.acted_at) + grace
            last = max(self.spent.get(case.engine, []), default=None)
            if last is not None:
                due = max(due, last + self.settings.cooldown_s)
            rows.append(Pending(case.engine, case.rule, case.rungs[rung], due, left, per_hour, case.opened_at))
        return sorted(rows, key=lambda p: p.due_at)

    def cancel(self, cancel: Cancel) -> Step | None:
        """An operator cancelled the case (engine, rule, opened_at): its action is dropped, and the case stays
        notify-only until it clears. None where no such case waits (it cleared, or it acts already)."""
        case = self.cases.get(cancel.engine)
        if case is None or case.rule != cancel.rule or case.opened_at != cancel.opened_at:
            return None
        if case.acting or case.over:
            return None
        rung = case.rung if case.acted_at is None else case.rung + 1
        action = case.rungs[min(rung, len(case.rungs) - 1)]
        case.over = True
        words = (
            f"auto-{action} of {case.engine} cancelled by an operator ({cancel.by}): {cause(case.rule, case.words)}; "
            "notify only until it clears"
        )
        return Step(case.engine, case.rule, words, stage="cancelled")

    def _climb(self, case: Case, now: float, why: str) -> Step:
        """One rung up after `why`; a notification of it, or the one that gives up at the top."""
        case.rung += 1
        if case.rung >= len(case.rungs):
            return self._gave_up(case, now, why)
        nxt = case.rungs[case.rung]
        return Step(
            case.engine, case.rule, f"{why}; next: {nxt} {case.engine} ({self._budget(case.engine, now)})",
            stage="failed",
        )  # fmt: skip

    def _gave_up(self, case: Case, now: float, why: str) -> Step:
        case.over = True
        words = f"gave up on {case.engine}: needs a person: {why}; {self._budget(case.engine, now)}"
        return Step(case.engine, case.rule, words, severity="critical", stage="gave_up")

    def finished(
        self, engine: str, now: float, *, serving: bool, seconds: float, detail: str, callers: str = ""
    ) -> list[Step]:
        """The action asked for on `engine` ended: serving (lifecycle's check passed) or not (`detail` why).
        `callers`: behind a gateway, what its callers saw meanwhile (the drain's words)."""
        case = self.cases.get(engine)
        if case is None or not case.acting:
            return []
        case.acting = False
        action = case.rungs[min(case.rung, len(case.rungs) - 1)]
        if serving:
            case.acted_at = now
            return [
                Step(
                    engine,
                    case.rule,
                    f"{PAST[action]} {engine}: {cause(case.rule, case.words)}; serving again after {seconds:.0f} s; "
                    f"{f'while it was away, {callers}; ' if callers else ''}{self._budget(engine, now)}",
                    action,
                    stage="acted",
                )
            ]
        return [self._climb(case, now, f"{action} of {engine} did not bring it back: {detail}")]


def conditions(
    config: PoolConfig,
    active: Iterable[tuple[str, str]],
    words: Mapping[tuple[str, str], str],
    restarts: Mapping[str, Iterable[float]] | None = None,
) -> dict[str, Condition]:
    """engine -> the remediation rule that fires on it (RULES' order), from the rules' active alerts and when
    each engine restarted by itself (`restarts`: the alerts' record, the restart_loop rule's input)."""
    firing = set(active)
    out: dict[str, Condition] = {}
    for engine in config.engines:
        rule = next((r for r in RULES if (engine.name, r) in firing), None)
        if rule is not None:
            last = max((restarts or {}).get(engine.name, ()), default=None) if rule == "restart_loop" else None
            out[engine.name] = Condition(engine.name, rule, words.get((engine.name, rule), rule), last)
    return out


@dataclass
class Remediator:
    """The ladder's I/O inside `poolconsole watch`: started after the notifier, stopped before the pool."""

    config: PoolConfig
    pool: LivePool
    notifier: Notifier
    state: NotifyState | None
    audit_path: Path
    say: Callable[[str], None]
    """Each step, as a line (the watch command prints it)."""
    dry_run: bool = False
    clock: Callable[[], float] = time.time
    tick_s: float = TICK_S
    ladder: Ladder = field(init=False)
    _tasks: set[asyncio.Task[None]] = field(default_factory=set, init=False)
    _loop: asyncio.Task[None] | None = field(default=None, init=False)
    _ws: Workspace = field(init=False)
    board: Board | None = field(default=None, init=False)
    """The pending actions and the operator's cancellations, in the state file (None: no state file, a dry run)."""
    _heard: set[tuple[str, str, float]] = field(default_factory=set, init=False)
    _since: float = field(default=0.0, init=False)

    def __post_init__(self) -> None:
        self._ws = Workspace(self.config, self.audit_path)

    async def start(self) -> None:
        spent: list[tuple[str, float]] = []
        if self.state is not None and not self.dry_run:
            spent = await asyncio.to_thread(self.state.actions_since, self.clock() - HOUR_S)
        self.ladder = Ladder(self.config, spent, dry_run=self.dry_run)
        if self.config.remediation.enabled and self.state is not None and not self.dry_run:
            try:
                self.board = await asyncio.to_thread(Board, self.state.path)
                await asyncio.to_thread(self.board.show, [], self.clock())  # drops a dead watcher's rows
            except Exception as exc:  # no board: the watcher still acts; the console shows no countdown
                self.say(f"remediation: the board in {self.state.path} is not writable: {exc}")
                self.board = None
        self._since = self.clock() - HOUR_S
        if self.config.remediation.enabled:
            self._loop = asyncio.get_running_loop().create_task(self._run(), name="remediation")

    async def stop(self) -> None:
        tasks = [*self._tasks, *([self._loop] if self._loop is not None else [])]
        for task in tasks:
            task.cancel()
        for task in tasks:
            await reap(task, Exception)
        await self._ws.close()
        if self.board is not None:
            with contextlib.suppress(Exception):  # the watcher stops: nothing is about to happen any more
                await asyncio.to_thread(self.board.show, [])
            self.board.close()

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.tick_s)
            now = self.clock()
            try:
                for step in await self._cancelled():
                    await self._take(step, now)
                # One copy of the alerts, read after the awaits above: the polls change them meanwhile, and a
                # rule read later than its words was said by its bare name ("remediation: down; restarting").
                active = dict(self.pool.alerts.active)
                words = {key: event.message for key, event in active.items()}
                for step in self.ladder.tick(now, conditions(self.config, active, words, self.pool.alerts.restarts)):
                    await self._take(step, now)
                await self._show(now)
            except Exception as exc:  # the watcher keeps polling and paging; this is said, once a tick at most
                self.say(f"remediation: {type(exc).__name__}: {exc}")

    async def _cancelled(self) -> list[Step]:
        """The operators' cancellations written since the last tick, each applied to the ladder once."""
        if self.board is None:
            return []
        steps = []
        for cancel in await asyncio.to_thread(self.board.cancels, self._since):
            key = (cancel.engine, cancel.rule, cancel.opened_at)
            if key in self._heard:
                continue
            self._heard.add(key)
            step = self.ladder.cancel(cancel)
            if step is not None:
                steps.append(step)
        return steps

    async def _show(self, now: float) -> None:
        """The board, written when it changed (a case opened, acted, cleared, gave up or was cancelled), and
        refreshed while a case waits (else the console takes it for a dead watcher's)."""
        rows = self.ladder.pending(now)
        if self.board is not None and self.board.changes(rows, now):
            await asyncio.to_thread(self.board.show, rows, now)

    async def _take(self, step: Step, now: float) -> None:
        if self.dry_run:  # said, never sent, nothing run
            self.say(step.words if step.stage == "would" else f"remediation (dry run): {step.words}")
            return
        self._announce(step)
        if step.action is not None and step.stage == "acting":
            if self.state is not None:
                with contextlib.suppress(Exception):  # an unwritable state file costs the budget's memory only
                    await asyncio.to_thread(self.state.spend, step.engine, now, step.action, step.rule)
            task = asyncio.get_running_loop().create_task(self._act(step), name=f"remediation {step.engine}")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def _announce(self, step: Step) -> None:
        self.say(f"remediation: {step.words}")
        labels = {"alertname": "remediation", "severity": step.severity, "engine": step.engine, "rule": step.rule}
        host = self.ladder.hosts.get(step.engine)
        if host:
            labels["host"] = host
        labels["stage"] = step.stage
        if step.action is not None:
            labels["action"] = step.action
        self.notifier.announce(step.engine, step.words, labels, self.clock())

    async def _act(self, step: Step) -> None:
        assert step.action is not None
        engine = step.engine
        started = time.monotonic()
        self.pool.alerts.action_started(engine, self.clock())  # its restarts are no restart loop
        serving, detail, seconds = False, "", 0.0
        progress = ActionProgress(self.say)
        try:
            act = self._restart if step.action == "restart" else self._rollback
            outcome = await act(step, progress)
            serving = outcome.outcome == "ok"
            detail = f"{outcome.outcome}: {outcome.detail}"
            seconds = outcome.seconds
        except lifecycle.ActionRefused as exc:
            detail = f"refused: {exc}"
        except Exception as exc:  # one engine's failure never takes the watcher down
            detail = f"{type(exc).__name__}: {exc}"
        finally:
            self.pool.alerts.action_ended(engine, self.clock())
        seconds = seconds or time.monotonic() - started
        callers = "; ".join(progress.callers)
        ended = self.ladder.finished(
            engine, self.clock(), serving=serving, seconds=seconds, detail=detail, callers=callers
        )
        for after in ended:
            await self._take(after, self.clock())

    async def _restart(self, step: Step, progress: lifecycle.Progress) -> lifecycle.Outcome:
        plan = restart.plan(self._ws, step.engine, self.pool.state, automatic=True)
        return await restart.run(self._ws, plan, progress, rule=step.rule)

    async def _rollback(self, step: Step, progress: lifecycle.Progress) -> lifecycle.Outcome:
        target = await asyncio.to_thread(audit.previous_profile, self.audit_path, step.engine)
        if target is None:
            raise lifecycle.ActionRefused(f"no earlier profile of {step.engine} promoted in the audit log")
        active = await rollover.active_profile(self._ws, step.engine)
        live, kv = await rollover.measure(self._ws, step.engine, self.pool.state)
        plan = rollover.plan(
            self._ws, step.engine, target, active=active, live=live, kv=kv, state=self.pool.state, automatic=True
        )
        return await rollover.run(self._ws, plan, progress, rule=step.rule)


class ActionProgress:
    """An automatic action's progress lines: its outcome is announced, its commands audited. The drain's words
    said before the action's first own line (what a gateway's callers see while the engine is away: drain.before
    says them first, and the watcher does not wait for requests) are said too and kept for the announcement."""

    def __init__(self, say: Callable[[str], None]) -> None:
        self.say = say
        self.callers: list[str] = []
        self._acting = False

    def __call__(self, line: str) -> None:
        if not line.startswith("drain: "):
            self._acting = True
        elif not self._acting:
            self.callers.append(line.removeprefix("drain: "))
            self.say(f"remediation: {line}")


def remediation(
    config: PoolConfig, audit_path: Path, say: Callable[[str], None], *, dry_run: bool = False
) -> Callable[[LivePool, Notifier, NotifyState | None], Remediator]:
    """The watcher's companion (runtime.watch's `companions`): a Remediator on its pool, notifier and state."""

    def make(pool: LivePool, notifier: Notifier, state: NotifyState | None) -> Remediator:
        return Remediator(config, pool, notifier, state, audit_path, say, dry_run=dry_run)

    return make
