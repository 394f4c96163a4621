"""The pool's events timeline: restarts (with their cause when it is known), alerts fired and cleared,
actions with their outcome and smoke verdicts, newest first, in a bounded log. Pure data: it subscribes to
the runtime's updates like any client (each says what it meant: the restart marks it put, the log read, the
alerts), the console adds the actions and smoke runs it starts, and a replay derives what a recording holds
(restarts and alerts). No Textual, no Rich."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from poolconsole.model.alerts import CRITICAL_RULES, AlertEvent
from poolconsole.model.failure_modes import Diagnosis
from poolconsole.model.pool_state import PoolState

MAX_EVENTS = 500
"""Events kept (the oldest go first)."""
CAUSE_WINDOW_S = 900.0
"""A cause learnt later (the container's record, the log read after it) belongs to a restart this recent."""

CRITICAL = "critical"
WARNING = "warning"
INFO = "info"
OK = "ok"

_SEVERE_RULES = CRITICAL_RULES
COUNTERS_RESET = "its counters went back to zero: a new process"
"""A restart's cause when its counters told it (the cause() of a later source replaces it)."""


@dataclass(frozen=True)
class Event:
    at: float
    target: str
    kind: str
    """'restart', 'alert', 'cleared', 'action', 'smoke', 'down-log' or 'problem'."""
    message: str
    severity: str = INFO
    """CRITICAL, WARNING, INFO or OK (a clear, a passing smoke run, an action that worked)."""
    cause: str | None = None
    """For a restart: why, when known (its counters reset, the container's record, its log)."""

    def text(self) -> str:
        """The event in words, its cause included."""
        return self.message + (f" ({self.cause})" if self.cause else "")

    def matches(self, needle: str) -> bool:
        needle = needle.lower()
        return not needle or any(needle in part.lower() for part in (self.target, self.kind, self.text()))


class Told(Protocol):
    """What the runtime tells its subscribers (runtime.live.Update), as this log reads it."""

    @property
    def target(self) -> str: ...

    @property
    def kind(self) -> str: ...

    @property
    def events(self) -> tuple[AlertEvent, ...]: ...

    @property
    def message(self) -> str | None: ...

    @property
    def at(self) -> float | None: ...

    @property
    def restarts(self) -> tuple[float, ...]: ...

    @property
    def diagnosis(self) -> Diagnosis | None: ...


class EventLog:
    """Bounded, newest last in storage and newest first when read; `version` moves on every change, so a
    view redraws only when something happened."""

    def __init__(self, maxlen: int = MAX_EVENTS, *, live: bool = True) -> None:
        self.entries: deque[Event] = deque(maxlen=maxlen)
        self.version = 0
        self.live = live
        """False for a replay: actions and smoke runs are not in a recording, only restarts and alerts."""
        self._restart_seen: dict[str, float] = {}

    def clear(self) -> None:
        self.entries.clear()
        self._restart_seen.clear()
        self.version += 1

    def add(self, event: Event) -> None:
        self.entries.append(event)
        self.version += 1

    def newest(self, needle: str = "", limit: int | None = None) -> list[Event]:
        """Newest first (ties: the later added first), those matching `needle` (any part, any case)."""
        out: list[Event] = []
        for event in sorted(reversed(self.entries), key=lambda e: -e.at):
            if event.matches(needle):
                out.append(event)
                if limit is not None and len(out) >= limit:
                    break
        return out

    # -- what the runtime sees -------------------------------------------------------------------------
    def heard(self, update: Told) -> None:
        """One update of the runtime (a subscriber): the restart marks it put on the target (its counters
        reset at a poll, the container's record, whose words are the cause, or those the charts read back
        from the history), a log read after it went down or restarted (its findings the cause), a poll loop
        that stopped, and the alerts it raised."""
        if update.kind == "diagnosis" and update.diagnosis is not None:
            self.diagnosed(update.target, update.diagnosis)
        elif update.kind == "problem" and update.message and update.at is not None:
            self.add(Event(update.at, update.target, "problem", update.message, CRITICAL))
        if update.restarts:
            cause = {"restart": update.message, "engine": COUNTERS_RESET}.get(update.kind)
            for at in update.restarts:
                self.add(Event(at, update.target, "restart", "restarted", WARNING, cause))
        self.alerts(e for e in update.events if not e.rule.startswith("log:"))  # a log's findings: the cause

    def restarts(self, state: PoolState, target: str, cause: str | None = None) -> None:
        """Every restart the pool state marked on `target` since the last look (a replay's, whose rows say
        nothing more); `cause` in words when the caller knows it."""
        track = state.engines.get(target)
        if track is None or not track.history.restarts:
            return
        seen = self._restart_seen.get(target)
        new = [at for at in track.history.restarts if seen is None or at > seen]
        if not new:
            return
        self._restart_seen[target] = new[-1]
        view = track.view
        for at in new:
            why = cause or (COUNTERS_RESET if view and view.counter_resets else None)
            self.add(Event(at, target, "restart", "restarted", WARNING, why))

    def cause(self, target: str, cause: str, at: float) -> None:
        """More about `target`'s latest restart (the container's record of it, the log read after it),
        added to its cause; with no restart that recent, nothing."""
        for index in range(len(self.entries) - 1, -1, -1):
            event = self.entries[index]
            if event.target == target and event.kind == "restart":
                if at - event.at > CAUSE_WINDOW_S:
                    return
                if event.cause and cause in event.cause:
                    return
                joined = (
                    cause if not event.cause or event.cause.startswith("its counters") else f"{event.cause}; {cause}"
                )
                self.entries[index] = replace(event, cause=joined)
                self.version += 1
                return

    def diagnosed(self, target: str, diagnosis: Diagnosis) -> None:
        """The log read after a restart is its cause; after going down, an event of its own."""
        if not diagnosis.findings:
            return  # nothing known in it, or it could not be read: the detail screen says which
        words = "its log shows " + ", ".join(f.title for f in diagnosis.findings)
        if diagnosis.reason.startswith("restarted"):
            self.cause(target, words, diagnosis.at)
        else:
            self.add(Event(diagnosis.at, target, "down-log", f"went down: {words}", CRITICAL))

    def alerts(self, events: Iterable[AlertEvent]) -> None:
        for e in events:
            if e.fired:
                severity = CRITICAL if e.rule in _SEVERE_RULES else WARNING
                said = e.message if e.message.startswith(e.rule.replace("_", " ")) else f"{e.rule}: {e.message}"
                self.add(Event(e.at, e.target, "alert", said, severity))
            else:
                self.add(Event(e.at, e.target, "cleared", f"{e.rule} cleared: {e.message}", OK))

    # -- what the console starts ---------------------------------------------------------------------
    def action(self, at: float, action: str, target: str, outcome: str, detail: str = "") -> None:
        """An action's end (restart, rollover) with its outcome ("ok", "failed", "rolled back", "refused")."""
        first = detail.strip().splitlines()[0] if detail.strip() else ""
        message = f"{action} {outcome}" + (f": {first}" if first and outcome != "ok" else "")
        self.add(Event(at, target, "action", message, OK if outcome == "ok" else CRITICAL))

    def smoke(
        self,
        at: float,
        results: Sequence[tuple[str, str, bool, str]],
        regressions: Mapping[str, int] | None = None,
        done_at: Mapping[str, float] | None = None,
    ) -> None:
        """A smoke run's verdict per target, from its (target, check, passed, reason) results; `regressions`
        counts each target's figures worse than its baseline (a pass with some is a warning, said so). Each
        verdict is stamped when its target's last check finished (`done_at`), else at `at` (the run's end):
        a pool run takes minutes, and its first target's failure happened then, not at the end."""
        by_target: dict[str, list[tuple[str, bool, str]]] = {}
        for target, check, passed, reason in results:
            by_target.setdefault(target, []).append((check, passed, reason))
        for target, checks in by_target.items():
            when = (done_at or {}).get(target, at)
            failed = [(check, reason) for check, passed, reason in checks if not passed]
            if failed:
                check, reason = failed[0]
                more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
                self.add(Event(when, target, "smoke", f"smoke FAILED: {check}: {reason}{more}", CRITICAL))
            elif worse := (regressions or {}).get(target, 0):
                words = f"smoke passed ({len(checks)} checks), {worse} regression(s) against its baseline"
                self.add(Event(when, target, "smoke", words, WARNING))
            else:
                self.add(Event(when, target, "smoke", f"smoke passed ({len(checks)} checks)", OK))

    def audited(self, entries: Iterable[tuple[float, str, str, str, str]]) -> None:
        """Actions from the audit log (at, action, target, outcome, detail), those not logged already."""
        known = {(e.at, e.target, e.kind) for e in self.entries}
        for at, action, target, outcome, detail in entries:
            if (at, target, "action") not in known:
                self.action(at, action, target, outcome, detail)
