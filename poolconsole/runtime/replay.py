"""A recording played back: the history store's rows applied to a pool state in time order, at a chosen
speed, with pause and seek. The clock is the recording's, so every age, chart and alert reads as it did
at that moment. The pool's shape (engines, hosts, kinds) comes from the recording itself. A Replay is a
PoolSource (runtime.source): read-only, not live, with Playback controls."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from poolconsole.config.models import Engine, EngineKind, Host, PoolConfig
from poolconsole.model.alerts import Alerts
from poolconsole.model.events import EventLog
from poolconsole.model.hosts import host_from_json
from poolconsole.model.pool_state import PoolState
from poolconsole.model.snapshots import EngineState
from poolconsole.model.view import EngineView
from poolconsole.runtime.live import Subscriber, Update
from poolconsole.runtime.source import Capabilities, Playback
from poolconsole.runtime.store import Reader, Row, StoreProblem

TICK_S = 0.25
PRELOAD_S = 300.0
"""A seek fills the charts with the five minutes before the chosen moment."""
SPEEDS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 60.0)
VIEW_FIELDS = {f.name for f in dataclasses.fields(EngineView)}


def view_from_row(values: dict[str, Any]) -> EngineView:
    kept = {k: v for k, v in values.items() if k in VIEW_FIELDS}
    kept["state"] = EngineState(kept["state"])
    kept["kind"] = EngineKind(kept["kind"])
    return EngineView(**kept)


def recorded_config(reader: Reader, known: PoolConfig | None = None) -> PoolConfig:
    """The pool as recorded: each engine with its kind, URL and host from its first row, each host. Where
    `known` (the hosts.toml the replay was started with) has the same engine (name, kind, URL), its
    description, model, profile and profiles come with it: the recording holds readings, not those."""
    engines: dict[str, Engine] = {}
    hosts: dict[str, Host] = {}
    configured = {e.name: e for e in known.engines} if known is not None else {}
    wanted = set(reader.targets.values())  # (kind, name): an engine and a host may share a name (the gateway)
    for row in reader.rows():
        if row.name in (engines if row.kind == "engine" else hosts):
            continue
        if row.kind == "engine":
            v = row.values
            engine = Engine(
                name=row.name, kind=EngineKind(v["kind"]), url=v.get("url") or "http://recorded", host=v.get("host")
            )
            same = configured.get(row.name)
            if same is not None and (same.kind, same.url) == (engine.kind, engine.url):
                engine = engine.model_copy(update={k: getattr(same, k) for k in DESCRIBED})
            engines[row.name] = engine
        else:
            hosts[row.name] = Host(name=row.name, address=row.values.get("address") or "recorded")
        if len(engines) + len(hosts) == len(wanted):
            break
    return PoolConfig(hosts=list(hosts.values()), engines=list(engines.values()))


DESCRIBED = ("description", "model", "profile", "profiles")
"""What a replay takes from the hosts.toml it was given for an engine it recorded (not its control)."""


class Replay:
    """The recording's position, speed and pause; `run` applies the rows as the position passes them."""

    def __init__(
        self, path: Path, start: float | None = None, speed: float = 1.0, known: PoolConfig | None = None
    ) -> None:
        self.reader = Reader(path)
        first = next(iter(self.reader.rows()), None)
        if first is None:
            self.reader.close()
            raise StoreProblem(f"{path} holds no polls yet")
        self.first_at = first.at
        self.last_at = max((r.at for r in self._tail()), default=first.at)
        self.config = recorded_config(self.reader, known)
        self.position = max(self.first_at, start) if start is not None else self.first_at
        self.speed = speed
        self.paused = False
        self.state = PoolState(self.config, clock=self.clock)
        self.alerts = Alerts(self.config.alerts)
        self.events = EventLog(live=False)
        """What the recording shows happened: restarts (its counters) and alerts; no actions or smoke runs."""
        self._rows: Iterator[Row] = iter(())
        self._next: Row | None = None
        self._wall = time.monotonic()
        self._subscribers: list[Subscriber] = []
        self._task: asyncio.Task[None] | None = None

    def _tail(self) -> Iterator[Row]:
        written = self.reader.written_at()
        return self.reader.rows(start=(written or self.first_at) - 120.0)

    def clock(self) -> float:
        return self.position

    def close(self) -> None:
        self.reader.close()

    # -- the PoolSource contract ----------------------------------------------------------------------
    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(live=False, replay=True, read_only=True)

    @property
    def playback(self) -> Playback:
        return self

    @property
    def recorded(self) -> Path:
        return self.reader.path

    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        """`callback` hears each row applied (with the alert events it raised), and each move of the position."""
        self._subscribers.append(callback)
        return lambda: self._subscribers.remove(callback)

    def _tell(self, update: Update) -> None:
        for callback in list(self._subscribers):
            callback(update)

    def start(self) -> None:
        """Play on the running event loop until `stop`; a failure is told as a "problem" update."""
        self._task = asyncio.get_running_loop().create_task(self.run(self._moved))
        self._task.add_done_callback(self._ended)

    def _moved(self) -> None:
        self._tell(Update("replay", "engine"))

    def _ended(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and (error := task.exception()) is not None:
            self._tell(Update("replay", "problem", message=f"the replay stopped: {error}"))

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    def poll_now(self) -> None:
        """Nothing to poll: the recording is all there is."""

    # -- controls -------------------------------------------------------------------------------------
    def toggle_pause(self) -> None:
        self.paused = not self.paused

    def faster(self, up: bool) -> None:
        index = min(range(len(SPEEDS)), key=lambda i: abs(SPEEDS[i] - self.speed))
        self.speed = SPEEDS[max(0, min(len(SPEEDS) - 1, index + (1 if up else -1)))]

    def seek(self, seconds: float) -> None:
        """Move by `seconds` (negative: back): the state is rebuilt from a few minutes before the target."""
        self.position = min(max(self.first_at, self.position + seconds), self.last_at)
        self._rewind()

    def _rewind(self) -> None:
        self.state.reset()
        self.alerts.active.clear()
        self.alerts.pending.clear()
        self.alerts.log.clear()
        self.events.clear()
        self._rows = self.reader.rows(start=self.position - PRELOAD_S)
        self._next = None
        self.advance(0.0)

    # -- playing --------------------------------------------------------------------------------------
    def advance(self, seconds: float) -> int:
        """Move the position forward by `seconds` of recording and apply every row it passed."""
        self.position = min(self.position + seconds, self.last_at)
        applied = 0
        while True:
            row = self._next if self._next is not None else next(self._rows, None)
            if row is None or row.at > self.position:
                self._next = row
                return applied
            self._next = None
            self._apply(row)
            applied += 1

    def _apply(self, row: Row) -> None:
        if row.kind == "engine" and row.name in self.state.engines:
            view = view_from_row(row.values)
            self.state.apply_view(view, row.at)
            events = self.alerts.engine(view, row.at)
            self.events.restarts(self.state, row.name)
        elif row.kind == "host" and row.name in self.state.hosts:
            snapshot = host_from_json(row.values)
            self.state.apply_host(snapshot)
            events = self.alerts.host(snapshot, row.at)
        else:
            return
        self.events.alerts(events)
        self._tell(Update(row.name, "engine" if row.kind == "engine" else "host", tuple(events)))

    async def run(self, changed: Callable[[], None]) -> None:
        """Until cancelled: every TICK_S the position moves by TICK_S x speed (unless paused)."""
        self._rewind()
        changed()
        self._wall = time.monotonic()
        while True:
            await asyncio.sleep(TICK_S)
            now = time.monotonic()
            step, self._wall = now - self._wall, now
            if not self.paused and self.position < self.last_at and self.advance(step * self.speed):
                changed()

    def label(self) -> str:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(self.position))
        state = f"paused (x{self.speed:g})" if self.paused else f"x{self.speed:g}"  # a speed set while paused shows
        end = "  (end of the recording)" if self.position >= self.last_at else ""
        return f"replay {when} UTC {state}{end}  (space pause, [ ] seek 1 min, - + speed)"
