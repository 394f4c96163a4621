"""The watcher's pager (issue 37): the runtime's alert events delivered to the `[[notify]]` receivers
(webhook, alertmanager, ntfy), apart from the poll loops, and never lost.

- The subscriber (`heard`, on the event loop, once per applied poll) only updates the alerts in memory and
  wakes the senders: a poll never waits on a receiver.
- One sender task per receiver: it gathers what is due for a moment (`gather_s`: the alerts one tick of
  polls raised go out together), sends one notification per rule (alertmanager: one POST of every due
  alert, its own grouping does the rest), each under the receiver's `timeout_s`, and retries a failure with
  backoff (1 s doubling to 30 s). What is due is derived from the alerts, so a receiver that is down gets
  everything pending, once, when it is back: new firing alerts, the repeats due (`repeat_s`; alertmanager
  every min(60 s, repeat_s) as Prometheus re-sends), and the resolves.
- The alerts and what each receiver was told are kept in a small SQLite file beside the history store
  (`history.sqlite3` -> `history.notify.sqlite3`, `state_path`), written off the event loop as they change. A
  restarted watcher loads it and seeds the rules' active alerts with what still fired: it does not page
  again for what it sent, and the first poll of a target that recovered meanwhile clears its alert, which
  sends the resolve. Resolved alerts wait for their receivers, at most MAX_KEPT of them (the oldest go).
- Announcements (`announce`, issue 38: what the remediation did or is about to do) are one-off messages, not
  alerts that fire and resolve: each receiver that wants their severity gets each once, in order, through the
  same sender, retried with backoff (a bounded queue in memory). The remediation's actions spent are kept in
  the same state file (`remediation_actions`), so a restarted watcher keeps its budget.
- A failed send is a pool event, a line for `on_problem`, and the counter behind
  `poolconsole_notifications_failed_total{kind}`. A token (`token_env`) is read from the environment at each
  send and goes only into the Authorization header: never into a message, the state file or argv."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import sqlite3
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from poolconsole.collect.tasks import reap
from poolconsole.config.models import Notify, PoolConfig
from poolconsole.model.alerts import AlertEvent, Alerts
from poolconsole.model.events import OK, WARNING, Event, EventLog
from poolconsole.model.notify import (
    SEVERITY_RANK,
    Alert,
    Announcement,
    Silence,
    alertmanager_alert,
    announcement_alertmanager,
    announcement_ntfy,
    announcement_webhook,
    bearer_target,
    from_event,
    ntfy_message,
    silenced_by,
    wanted,
    webhook_body,
)
from poolconsole.runtime.live import Update
from poolconsole.runtime.notify_state import NotifyState, row_of
from poolconsole.runtime.pager import state_path

__all__ = ["Notifier", "NotifyState", "Receiver", "state_path"]

ALERTMANAGER_RESEND_S = 60.0
"""Prometheus' resend delay: a firing alert is posted to Alertmanager again this often."""
MAX_KEPT = 1000
"""Resolved alerts kept until their receivers hear them; beyond it the oldest go."""
BACKOFF_S = (1.0, 2.0, 4.0, 8.0, 16.0, 30.0)
"""Waits after the 1st, 2nd, ... consecutive failed send to a receiver (the last one repeats)."""
IDLE_WAKE_S = 60.0
"""A sender with nothing due still looks this often (a repeat falls due without an event)."""

SILENCES_EVERY_S = 5.0
"""How often a running watcher reads the silences the console writes into its state file."""


def shown_url(url: str) -> str:
    """A receiver's URL as it may be printed: no user or password, no query, long path parts (a Slack-style
    secret path, an ntfy topic used as a password) elided."""
    parts = urlsplit(url)
    host = parts.hostname or "?"
    host = f"[{host}]" if ":" in host else host
    port = f":{parts.port}" if parts.port else ""
    path = "/".join(p if len(p) <= 16 else p[:4] + "…" for p in parts.path.split("/"))
    return f"{parts.scheme}://{host}{port}{path}"


class Receiver:
    """One `[[notify]]` entry and how its sends went."""

    def __init__(self, config: Notify) -> None:
        self.config = config
        self.id = hashlib.sha256(f"{config.kind}\x00{config.url}".encode()).hexdigest()[:12]
        """Its key in the state file (the URL itself may hold a secret: only its hash is kept)."""
        self.shown = f"{config.kind} {shown_url(config.url)}"
        self.resend_s = (
            min(ALERTMANAGER_RESEND_S, config.repeat_s) if config.kind == "alertmanager" else config.repeat_s
        )
        self.sent = 0
        self.failed = 0
        """Failed sends (each attempt), for poolconsole_notifications_failed_total."""
        self.streak = 0
        self.last_error: str | None = None
        self.last_ok_at: float | None = None
        self.failed_at: float | None = None
        """When its last send failed (kept in the state file with last_error, for the console)."""
        self.wake = asyncio.Event()
        self.queue: deque[Announcement] = deque(maxlen=MAX_KEPT)
        """Announcements not yet delivered, oldest first."""

    def row(self) -> tuple[Any, ...]:
        return (self.id, self.config.kind, self.shown, self.last_ok_at, self.failed_at, self.last_error, self.streak)

    def describe(self) -> str:
        token = f", bearer token from ${self.config.token_env}" if self.config.token_env else ""
        if token and urlsplit(self.config.url).username is not None:
            token += " instead of the URL's user:password"
        return f"{self.shown} ({self.config.min_severity} and above{token})"


class Notifier:
    def __init__(
        self,
        config: PoolConfig,
        state: NotifyState | None,
        *,
        events: EventLog | None = None,
        clock: Callable[[], float] = time.time,
        on_problem: Callable[[str], None] | None = None,
        gather_s: float | None = None,
        external_url: str = "",
    ) -> None:
        self.config = config
        self.state = state
        self.events = events
        self.clock = clock
        self.on_problem = on_problem
        self.gather_s = min(config.settings.poll_interval_s, 2.0) if gather_s is None else gather_s
        self.external_url = external_url
        self.receivers = [Receiver(n) for n in config.notify]
        self.alerts: dict[tuple[str, str], Alert] = {}
        self.dropped = 0
        self._engines = {e.name: e.host for e in config.engines}
        self._hosts = [h.name for h in config.hosts]
        self._dirty: set[tuple[str, str]] = set()
        self._gone: set[tuple[str, str]] = set()
        self._dirty_event = asyncio.Event()
        self._receivers_dirty = True
        self.silences: list[Silence] = []
        """Active or future silences from the state file (refreshed every SILENCES_EVERY_S)."""
        self._tasks: list[asyncio.Task[None]] = []
        self._session: aiohttp.ClientSession | None = None

    # -- state ----------------------------------------------------------------------------------------
    def restore(self, alerts: Alerts) -> int:
        """What the last watcher left: its alerts, and what each receiver heard. Those still firing seed
        `alerts` (the rules' state), so they do not fire again and the first poll that finds them over sends
        the resolve; a target no longer in the config resolves now. Returns how many still fire."""
        if self.state is None:
            return 0
        now = self.clock()
        known = set(self._engines) | set(self._hosts) | {slo.target for slo in self.config.slo}  # model:NAME too
        ids = {r.id for r in self.receivers}
        firing = 0
        for alert in self.state.load():
            alert.sent = {k: v for k, v in alert.sent.items() if k in ids}
            alert.resolved_sent &= ids
            self.alerts[alert.key] = alert
            if alert.firing and alert.target not in known:
                alert.ends_at, alert.cleared = now, "no longer in the config"
                self._dirty.add(alert.key)
            elif alert.firing:
                alerts.active[(alert.target, alert.rule)] = AlertEvent(
                    alert.starts_at, alert.target, alert.rule, True, alert.message
                )
                firing += 1
            self._prune(alert)
        return firing

    def heard(self, update: Update) -> None:
        """The runtime's subscriber: record what fired and cleared, wake the senders. Nothing else."""
        if not update.events:
            return
        for event in update.events:
            key = (event.rule, event.target)
            current = self.alerts.get(key)
            if event.fired:
                self.alerts[key] = from_event(event, self._engines, self._hosts)
            elif current is not None and current.firing:
                current.ends_at, current.cleared = event.at, event.message
            else:
                continue
            self._gone.discard(key)
            self._dirty.add(key)
        self._bound()
        self._changed()

    def _bound(self) -> None:
        resolved = [a for a in self.alerts.values() if not a.firing]
        if len(resolved) <= MAX_KEPT:
            return
        resolved.sort(key=lambda a: a.ends_at or 0.0)
        for alert in resolved[: len(resolved) - MAX_KEPT]:
            self._forget(alert)
            self.dropped += 1

    def _forget(self, alert: Alert) -> None:
        self.alerts.pop(alert.key, None)
        self._dirty.discard(alert.key)
        self._gone.add(alert.key)

    def _prune(self, alert: Alert) -> None:
        """A resolved alert every receiver that wanted it has heard is done."""
        if alert.firing:
            return
        now = alert.ends_at or self.clock()
        waiting = [r for r in self.receivers if wanted(alert, r.config.min_severity) and not self._muted(r, alert, now)]
        if all(r.id in alert.resolved_sent for r in waiting):
            self._forget(alert)

    def announce(self, target: str, text: str, labels: dict[str, str], at: float) -> None:
        """A one-off message (the remediation's): queued for each receiver that wants its severity."""
        message = Announcement(target, dict(labels), text, at)
        for receiver in self.receivers:
            if SEVERITY_RANK.get(message.severity, 1) >= SEVERITY_RANK.get(receiver.config.min_severity, 1):
                receiver.queue.append(message)
                receiver.wake.set()

    def _changed(self) -> None:
        self._dirty_event.set()
        for receiver in self.receivers:
            receiver.wake.set()

    # -- what is due ----------------------------------------------------------------------------------
    def due(self, receiver: Receiver, now: float) -> list[Alert]:
        """New or repeat-due firing alerts and unsent resolves this receiver wants."""
        out = []
        for alert in self.alerts.values():
            if not wanted(alert, receiver.config.min_severity) or self._muted(receiver, alert, now):
                continue
            if alert.firing:
                last = alert.sent.get(receiver.id)
                if last is None or now - last >= receiver.resend_s:
                    out.append(alert)
            elif receiver.id not in alert.resolved_sent:
                out.append(alert)
        return out

    def _muted(self, receiver: Receiver, alert: Alert, now: float) -> bool:
        """A silence holds it back from this receiver: a firing alert while a silence matches it; a resolve
        only when the receiver never heard it fire and a silence matched it when it cleared (one told it
        fired is told it cleared, silence or not, so no page stays open). An alertmanager receiver is never
        muted here: Alertmanager mutes by its own silences, and an alert not re-sent there would expire."""
        if receiver.config.kind == "alertmanager" or not self.silences:
            return False
        if alert.firing:
            return silenced_by(alert.labels, self.silences, now) is not None
        if receiver.id in alert.sent or alert.ends_at is None:
            return False
        return silenced_by(alert.labels, self.silences, alert.ends_at) is not None

    def _next_due(self, receiver: Receiver, now: float) -> float:
        waits = [
            alert.sent[receiver.id] + receiver.resend_s - now
            for alert in self.alerts.values()
            if alert.firing and receiver.id in alert.sent and wanted(alert, receiver.config.min_severity)
        ]
        waits += [s.ends_at - now for s in self.silences if s.ends_at > now]  # what it held back falls due
        waits += [s.starts_at - now for s in self.silences if s.starts_at > now]
        return max(0.05, min([IDLE_WAKE_S, *waits]))

    def _groups(self, receiver: Receiver, due: list[Alert]) -> list[tuple[str, list[Alert]]]:
        """alertmanager: everything due in one POST. Else one notification per rule: the rule's resolves
        due and all of its firing alerts (a receiver sees the whole group, as Alertmanager sends it)."""
        if receiver.config.kind == "alertmanager":
            return [("", due)]

        def name(a: Alert) -> str:  # the rule as receivers know it: gpu_xid, not gpu_xid_gpu2 (one per GPU)
            return a.labels.get("alertname", a.rule)

        groups = []
        for rule in sorted({name(a) for a in due}):
            members = [
                a
                for a in self.alerts.values()
                if name(a) == rule and wanted(a, receiver.config.min_severity) and (a.firing or a in due)
            ]
            groups.append((rule, sorted(members, key=lambda a: (not a.firing, a.target))))
        return groups

    # -- the tasks ------------------------------------------------------------------------------------
    async def start(self) -> None:
        self._session = aiohttp.ClientSession()
        loop = asyncio.get_running_loop()
        self._tasks.append(loop.create_task(self._persist(), name="notify state"))
        if self.state is not None:
            await self.refresh_silences()
            self._tasks.append(loop.create_task(self._watch_silences(), name="notify silences"))
        for receiver in self.receivers:
            self._tasks.append(loop.create_task(self._deliver(receiver), name=f"notify {receiver.shown}"))
        self._changed()

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            await reap(task, Exception)
        self._tasks.clear()
        await self._write()
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def refresh_silences(self) -> None:
        """The silences from the state file (the console adds them); a change wakes the senders."""
        if self.state is None:
            return
        try:
            silences = await asyncio.to_thread(self.state.silences, self.clock())
        except sqlite3.Error as exc:
            self._tell(f"cannot read the silences in {self.state.path}: {exc}")
            return
        if silences != self.silences:
            self.silences = silences
            self._changed()

    async def _watch_silences(self) -> None:
        while True:
            await asyncio.sleep(SILENCES_EVERY_S)
            await self.refresh_silences()

    async def _persist(self) -> None:
        while True:
            await self._dirty_event.wait()
            self._dirty_event.clear()
            await self._write()

    async def _write(self) -> None:
        if self.state is None or not (self._dirty or self._gone or self._receivers_dirty):
            return
        rows = [row_of(self.alerts[k]) for k in self._dirty if k in self.alerts]
        gone = list(self._gone)
        receivers = [r.row() for r in self.receivers] if self._receivers_dirty else []
        self._dirty.clear()
        self._gone.clear()
        self._receivers_dirty = False
        try:
            await asyncio.to_thread(self.state.write, rows, gone)
            if receivers:
                await asyncio.to_thread(self.state.write_receivers, receivers)
        except sqlite3.Error as exc:
            self._tell(f"cannot write the notifications' state {self.state.path}: {exc}")

    async def _deliver(self, receiver: Receiver) -> None:
        while True:
            receiver.wake.clear()
            if not self.due(receiver, self.clock()) and not receiver.queue:
                with contextlib.suppress(TimeoutError):  # asyncio.timeout: wait_for loses a cancel on 3.11
                    async with asyncio.timeout(self._next_due(receiver, self.clock())):
                        await receiver.wake.wait()
                continue
            await asyncio.sleep(self.gather_s)  # what this tick of polls raises goes out together
            now = self.clock()
            due = self.due(receiver, now)
            if not due and not receiver.queue:
                continue
            error = None
            for rule, alerts in self._groups(receiver, due):
                error = await self._send(receiver, rule, alerts, now)
                if error is not None:
                    break
                self._delivered(receiver, alerts, now)
            while error is None and receiver.queue:
                error = await self._post(receiver, *self._announcement(receiver, receiver.queue[0], now))
                if error is None:
                    receiver.queue.popleft()
                    receiver.sent += 1
            if error is None:
                if receiver.streak:
                    self._tell(f"notify {receiver.shown}: delivered again after {receiver.streak} failed send(s)", OK)
                receiver.streak, receiver.last_ok_at = 0, now  # its last failure (time, words) stays on record
                self._receivers_dirty = True
                self._dirty_event.set()
                continue
            receiver.failed += 1
            receiver.streak += 1
            receiver.last_error, receiver.failed_at = error, now
            self._receivers_dirty = True
            self._dirty_event.set()
            if receiver.streak == 1:
                pending = len(self.due(receiver, now))
                self._tell(f"notify {receiver.shown}: {error}; {pending} alert(s) pending, retrying with backoff")
            await asyncio.sleep(BACKOFF_S[min(receiver.streak, len(BACKOFF_S)) - 1])

    def _delivered(self, receiver: Receiver, alerts: Sequence[Alert], now: float) -> None:
        receiver.sent += 1
        for alert in alerts:
            if alert.firing:
                alert.sent[receiver.id] = now
            else:
                alert.resolved_sent.add(receiver.id)
            self._dirty.add(alert.key)
            self._prune(alert)
        self._dirty_event.set()

    def _tell(self, message: str, severity: str = WARNING) -> None:
        if self.events is not None:
            self.events.add(Event(self.clock(), "notify", "notify", message, severity))
        if self.on_problem is not None:
            self.on_problem(message)

    # -- the wire -------------------------------------------------------------------------------------
    def _announcement(self, receiver: Receiver, message: Announcement, now: float) -> tuple[str, bytes, dict[str, str]]:
        config = receiver.config
        if config.kind == "alertmanager":
            url = config.url.rstrip("/") + "/api/v2/alerts"
            body = json.dumps([announcement_alertmanager(message, receiver.resend_s)]).encode()
            return url, body, {"Content-Type": "application/json"}
        if config.kind == "webhook":
            body = json.dumps(announcement_webhook(message, self.external_url)).encode()
            return config.url, body, {"Content-Type": "application/json"}
        ntfy = announcement_ntfy(message)
        headers = {"Title": _header(ntfy.title), "Priority": str(ntfy.priority), "Tags": _header(ntfy.tags)}
        return config.url, ntfy.body.encode(), headers

    async def _send(self, receiver: Receiver, rule: str, alerts: Sequence[Alert], now: float) -> str | None:
        """One notification; None when the receiver took it, else what went wrong in words (no token)."""
        config = receiver.config
        headers: dict[str, str] = {}
        if config.kind == "alertmanager":
            url = config.url.rstrip("/") + "/api/v2/alerts"
            body = json.dumps([alertmanager_alert(a, now, receiver.resend_s) for a in alerts]).encode()
            headers["Content-Type"] = "application/json"
        elif config.kind == "webhook":
            url = config.url
            body = json.dumps(webhook_body(rule, alerts, self.external_url)).encode()
            headers["Content-Type"] = "application/json"
        else:
            url = config.url
            message = ntfy_message(rule, alerts)
            body = message.body.encode()
            headers.update(
                {"Title": _header(message.title), "Priority": str(message.priority), "Tags": _header(message.tags)}
            )
        return await self._post(receiver, url, body, headers)

    async def _post(self, receiver: Receiver, url: str, body: bytes, headers: dict[str, str]) -> str | None:
        """One POST under the receiver's timeout, its token (token_env) only in the Authorization header."""
        config = receiver.config
        if config.token_env:
            token = os.environ.get(config.token_env)
            if not token:
                return f"the environment variable {config.token_env} (its token_env) is not set"
            headers = {**headers, "Authorization": f"Bearer {token}"}
            url = bearer_target(url, token)
        assert self._session is not None
        timeout = aiohttp.ClientTimeout(total=config.timeout_s)
        try:
            async with self._session.post(url, data=body, headers=headers, timeout=timeout) as response:
                if 200 <= response.status < 300:
                    return None
                return f"HTTP {response.status} {response.reason or ''}".rstrip()
        except TimeoutError:
            return f"no answer within {config.timeout_s:g} s"
        except (aiohttp.ClientError, OSError, ValueError) as exc:
            return f"{type(exc).__name__}: {_words(exc)}"


def _header(text: str) -> str:
    """An HTTP header value: one line, ASCII kept (ntfy reads UTF-8 titles too, aiohttp sends latin-1)."""
    return " ".join(text.split()).encode("latin-1", "replace").decode("latin-1")


def _words(exc: BaseException) -> str:
    """An error in words: aiohttp's connector errors name host:port, never a header."""
    return str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
