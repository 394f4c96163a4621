"""A live console's past, set up as it mounts: the history store it records every poll into (opened in a thread,
runtime.recording), the charts filled from what the store holds and from `[prometheus]`'s range queries, and the
audit log's latest actions in the events timeline."""

from __future__ import annotations

import asyncio
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from poolconsole.model.pool_state import HISTORY_POINTS
from poolconsole.runtime.live import LivePool
from poolconsole.runtime.recording import Recording
from poolconsole.runtime.store import Store, StoreBusy, StoredHistory, StoreProblem, fill_history, read_history
from poolconsole.ui import jobs
from poolconsole.workflows import audit_log

if TYPE_CHECKING:
    from collections.abc import Callable

    from poolconsole.ui.app import PoolApp

FILL_LATEST_S = 2.0
"""The charts are filled from the history store after the first frame with data, or this long after launch."""


class History:
    def __init__(self, app: PoolApp) -> None:
        self.app = app
        self.recording: Recording | None = None
        """The history store being recorded into (opened in a thread at mount)."""
        self.drawn_data = False
        """The first frame with data was drawn (the fill need not wait any longer)."""
        self._fill_pending: Callable[[], object] | None = None
        """The charts' fill from the history store, until it starts (after the first frame with data)."""
        self._launch_fill = False
        """The launch's fill is still to come or under way: it fills the engines kept full (a detail opened
        meanwhile) at full resolution itself."""
        self._path: Path | None = None
        """The history store the charts are read from, once it opened."""

    def open(self, runtime: LivePool, path: Path | None) -> None:
        """The history store records every poll (unless `poolconsole record` already writes it); the charts
        are filled from what it holds, and those of engines read from `[prometheus]` from its range queries.
        It opens in a thread (runtime.recording): the polls applied meanwhile are held for it."""
        self._launch_fill = True
        if path is None:
            self._fill_prometheus_only()
            return
        app = self.app
        loop = asyncio.get_running_loop()

        def told(message: str) -> None:  # from the writer thread
            loop.call_soon_threadsafe(partial(app.notify, message, severity="error", timeout=10))

        self.recording = Recording(runtime, path, on_problem=told)
        jobs.start(app, partial(self._take_store, self.recording), "history-store", "opening the history store")

    async def close(self) -> None:
        if self.recording is not None:  # one still opening gets what was held, then is closed
            await self.recording.close()

    async def _take_store(self, recording: Recording) -> None:
        match await recording.opened():
            case Store() | StoreBusy():  # StoreBusy: another process records this store, its rows fill the charts
                self._schedule_fill(recording.path)
            case StoreProblem() as problem:
                self.app.notify(f"{problem}: no history recorded", severity="error", timeout=10)
                self._fill_prometheus_only()
            case error:
                self.app.notify(f"the history store {recording.path} did not open: {error!r}", severity="error")
                self._fill_prometheus_only()

    def _fill_prometheus_only(self) -> None:
        """No store to fill the charts from: those of engines read from `[prometheus]` still get its ranges."""
        if any(e.read == "prometheus" for e in self.app.config.engines):
            self._schedule_fill(None)
        else:
            self._launch_fill = False

    def _schedule_fill(self, path: Path | None) -> None:
        # Read once the first polls are on screen (or after FILL_LATEST_S): the read is CPU that would
        # otherwise delay the first frame with data; the charts take the stored points before the live ones.
        self._path = path
        self._fill_pending = partial(self._fill, path, self.app.state.clock())
        if self.drawn_data:  # the store opened after the first poll was applied: no reason to wait
            self.app.call_after_refresh(self.start_fill)
        else:
            self.app.set_timer(FILL_LATEST_S, self.start_fill)

    def start_fill(self) -> None:
        fill, self._fill_pending = self._fill_pending, None
        if fill is not None:
            fill()

    def _fill(self, path: Path | None, until: float) -> None:
        jobs.start(
            self.app,
            partial(self._fill_history, path, until),
            "history",
            "filling the charts from the history store",
            exclusive=True,
        )

    async def _fill_history(self, path: Path | None, until: float) -> None:
        full = set(self.app.state.full)
        try:
            await self._fill_launch(path, until)
        finally:
            self._launch_fill = False
        for name in set(self.app.state.full) - full:  # opened meanwhile, read as short: its detail's fill
            self.fill_detail(name)

    async def _fill_launch(self, path: Path | None, until: float) -> None:
        app = self.app
        config = app.config
        since = until - HISTORY_POINTS * config.settings.poll_interval_s
        # only as many points as each engine's rings keep (and every restart of the window's): at 1,000
        # engines the whole window's points were hundreds of MB read to keep 180 of each
        capacity = {e.name: app.state.capacity_of(e.name) for e in config.engines}.__getitem__
        try:
            stored = StoredHistory()
            if path is not None:
                stored = await asyncio.to_thread(read_history, path, config, since, until, None, capacity)
        except StoreProblem as exc:
            app.notify(f"history not loaded: {exc}", severity="warning", timeout=10)
            stored = StoredHistory()
        if config.prometheus is not None:  # its modules load only for a pool that has one
            from poolconsole.runtime.prometheus_history import with_prometheus_history

            for problem in await with_prometheus_history(config, stored, until, None, capacity):
                app.notify(problem, severity="warning", timeout=10)
        app.runtime.fill_history(stored)
        app.changed()

    def fill_detail(self, name: str) -> None:
        """A detail opened on engine `name`, whose rings were short until now (PoolState.keep_full): its older
        points read back (the history store in a thread, `[prometheus]`'s range queries) and put before those
        it has, which the chart shows meanwhile. While the launch's fill is to come, that one fills it."""
        app = self.app
        if self._launch_fill:
            return
        path = self._path if app.live else app.source.recorded  # a replay: the recording it plays
        engine = next((e for e in app.config.engines if e.name == name), None)
        ranged = engine is not None and engine.read == "prometheus" and app.config.prometheus is not None
        if engine is None or (path is None and not ranged):
            return
        jobs.start(
            app,
            partial(self._fill_engine, path, name, app.state.clock()),
            "detail-history",
            f"reading {name}'s history for its charts",
        )

    async def _fill_engine(self, path: Path | None, name: str, until: float) -> None:
        app = self.app
        config = app.config
        since = until - HISTORY_POINTS * config.settings.poll_interval_s
        stored = StoredHistory()
        if path is not None:
            try:
                stored = await asyncio.to_thread(read_history, path, config, since, until, (name,))
            except StoreProblem as exc:
                app.notify(f"{name}'s charts have only the recent polls: {exc}", severity="warning", timeout=10)
        stored.hosts.clear()  # read for the engine's VRAM share; a host's own ring is short, drawn by nobody
        if config.prometheus is not None:
            from poolconsole.runtime.prometheus_history import with_prometheus_history

            for problem in await with_prometheus_history(config, stored, until, (name,)):
                app.notify(problem, severity="warning", timeout=10)
        # not when it left the full ones meanwhile, nor after a replay went back before `until`
        if name in app.state.full and app.state.clock() >= until:
            fill_history(app.state, stored, marks=False)
            app.changed()

    def load_audit(self, path: Path) -> None:
        jobs.start(self.app, partial(self._load_audit, path), "audit-events", "reading the audit log", exclusive=True)

    async def _load_audit(self, path: Path) -> None:
        """The audit log's latest actions (this console's earlier ones, the CLI's) into the timeline, and the
        profile each engine's last promoted rollover left it on (what the overview and detail show)."""
        app = self.app
        try:
            found = await asyncio.to_thread(audit_log.entries, path, 50)
            active = await asyncio.to_thread(audit_log.active_profiles, path)
        except audit_log.AuditUnreadable as exc:
            app.notify(f"the events timeline has no past actions: {exc}", severity="warning", timeout=8)
            return
        app.events.audited((e.at, e.action, e.target, e.outcome, e.detail) for e in found)
        for name, profile in active.items():
            track = app.state.engines.get(name)
            if track is not None and any(p.name == profile for p in track.config.profiles):
                track.active_profile = profile
        app.changed()
