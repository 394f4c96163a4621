"""The slo_burn rule in the watcher (issue 37): each `[[slo]]` objective's requests within its TTFT threshold
and all its requests, read from the engines' TTFT histogram buckets at each poll, kept as running totals and
sampled every SAMPLE_EVERY_S into the notifications' state file beside the history store (table
`slo_samples`, 6 h and a little more), so the 1 h and 6 h windows survive a restarted watcher. The burn
rates and the two alerts are model.slo's and model.alerts' (`slo_burn_page`, `slo_burn_warn`: alertname
slo_burn, critical and warning).

The history store keeps TTFT percentiles, not buckets: the counts of the requests within a threshold are
this module's own. Requests served while no watcher ran are not counted (the first read after a start is a
baseline), so a window spanning a gap holds fewer requests, never invented ones."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections import deque
from collections.abc import Callable, Iterable
from pathlib import Path

from poolconsole.config.models import Slo
from poolconsole.model import slo as rule
from poolconsole.model.alerts import AlertEvent, Alerts
from poolconsole.model.snapshots import Histogram
from poolconsole.runtime.live import LivePool, Update
from poolconsole.runtime.notifier import Notifier, NotifyState

SAMPLE_EVERY_S = 10.0
"""One sample per objective this often (the 5-minute window holds 30)."""

SCHEMA = """
CREATE TABLE IF NOT EXISTS slo_samples (
    target TEXT NOT NULL, at REAL NOT NULL, good REAL NOT NULL, total REAL NOT NULL);
CREATE INDEX IF NOT EXISTS slo_samples_at ON slo_samples (target, at);
"""


class SloSamples:
    """The samples in the state file (one connection of this module's own, WAL like the notifier's)."""

    def __init__(self, path: Path) -> None:
        self._db = sqlite3.connect(path, timeout=10, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.executescript(SCHEMA)

    def load(self, since: float) -> dict[str, list[rule.Sample]]:
        out: dict[str, list[rule.Sample]] = {}
        rows = self._db.execute(
            "SELECT target, at, good, total FROM slo_samples WHERE at >= ? ORDER BY at", (since,)
        ).fetchall()
        for target, at, good, total in rows:
            out.setdefault(target, []).append(rule.Sample(at, good, total))
        return out

    def write(self, rows: Iterable[tuple[str, rule.Sample]], before: float) -> None:
        with self._db:
            self._db.executemany(
                "INSERT INTO slo_samples VALUES (?, ?, ?, ?)", [(t, s.at, s.good, s.all) for t, s in rows]
            )
            self._db.execute("DELETE FROM slo_samples WHERE at < ?", (before,))

    def close(self) -> None:
        self._db.close()


class Objective:
    """One `[[slo]]`: its running totals, its samples, and the alerts they raise."""

    def __init__(self, slo: Slo, samples: Iterable[rule.Sample] = ()) -> None:
        self.slo = slo
        self.samples: deque[rule.Sample] = deque(samples)
        last = self.samples[-1] if self.samples else None
        self.totals = rule.Totals(last.good if last else 0.0, last.all if last else 0.0)

    def covers(self, engine: str, models: Iterable[str]) -> bool:
        return engine == self.slo.engine if self.slo.engine is not None else self.slo.model in set(models)

    def observe(self, engine: str, hist: Histogram, now: float) -> rule.Sample | None:
        """An engine's TTFT histogram at a poll; the new sample when one is due."""
        self.totals.add(engine, *rule.within(hist, self.slo.ttft_s))
        if self.samples and now - self.samples[-1].at < SAMPLE_EVERY_S:
            return None
        sample = rule.Sample(now, self.totals.good, self.totals.all)
        self.samples.append(sample)
        while self.samples and self.samples[0].at < now - rule.KEEP_S:
            self.samples.popleft()
        return sample

    def evaluate(self, alerts: Alerts, now: float) -> list[AlertEvent]:
        pages, warns, rates = rule.level(self.samples, now, self.slo.objective)
        budget = (1 - self.slo.objective) * 100
        words = (
            f"TTFT over {self.slo.ttft_s:g} s for more than the {budget:g}% error budget of "
            f"{self.slo.objective * 100:g}% within: burn {rule.said(rates)}"
        )
        return alerts.slo_burn(self.slo.target, pages, warns, words, now)


class SloBurn:
    """The watcher's companion: hears each engine poll, samples and evaluates the objectives it covers."""

    def __init__(self, pool: LivePool, tell: Callable[[Update], None], store: SloSamples | None) -> None:
        self.pool = pool
        self.tell = tell
        self.store = store
        now = pool.state.clock()
        stored = store.load(now - rule.KEEP_S) if store is not None else {}
        self.objectives = [Objective(s, stored.get(s.target, ())) for s in pool.config.slo]
        self._pending: list[tuple[str, rule.Sample]] = []
        self._writing: asyncio.Task[None] | None = None
        self._unsubscribe: Callable[[], None] | None = None

    async def start(self) -> None:
        self._unsubscribe = self.pool.subscribe(self.heard)

    async def stop(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
        if self._writing is not None:
            with contextlib.suppress(asyncio.CancelledError, sqlite3.Error):
                await self._writing
        await self._write()
        if self.store is not None:
            await asyncio.to_thread(self.store.close)

    def heard(self, update: Update) -> None:
        if update.kind != "engine":
            return
        track = self.pool.state.engines.get(update.target)
        read = track.last_read if track is not None else None
        hist = read.metrics.histograms.get("ttft") if read is not None and read.metrics is not None else None
        if track is None or track.view is None or hist is None:
            return
        now = self.pool.state.clock()
        for objective in self.objectives:
            if not objective.covers(update.target, track.view.models):
                continue
            sample = objective.observe(update.target, hist, now)
            if sample is None:
                continue
            self._pending.append((objective.slo.target, sample))
            for event in objective.evaluate(self.pool.alerts, now):
                self.tell(Update(event.target, "engine", (event,)))
        if self._pending and (self._writing is None or self._writing.done()):
            self._writing = asyncio.get_running_loop().create_task(self._write())

    async def _write(self) -> None:
        rows, self._pending = self._pending, []
        if self.store is None or not rows:
            return
        before = rows[-1][1].at - rule.KEEP_S
        try:
            await asyncio.to_thread(self.store.write, rows, before)
        except sqlite3.Error as exc:
            self.tell(Update("slo", "problem", (), f"cannot keep the SLO samples: {exc}"))


def slo_burn(pool: LivePool, _notifier: Notifier, state: NotifyState | None) -> SloBurn:
    """The watcher's companion (runtime.watch's Companions), its samples in the notifications' state file."""
    return SloBurn(pool, pool._tell, SloSamples(state.path) if state is not None else None)
