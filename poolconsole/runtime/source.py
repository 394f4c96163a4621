"""One pool-source contract: what a view (the console) reads and asks of a pool, whoever feeds it. The live
pool (runtime.live, through LiveSource), a recording played back (runtime.replay.Replay) and `status`'s bounded
sampling run (runtime.sampling.SampleSource) implement it; the view asks `capabilities` what it may offer instead
of branching on which one it has."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from poolconsole.collect.ssh import SSHPool
from poolconsole.model.alerts import Alerts
from poolconsole.model.events import EventLog
from poolconsole.model.pool_state import PoolState
from poolconsole.runtime.live import Backlog, LivePool, Subscriber

__all__ = ["Capabilities", "LiveSource", "Playback", "PoolSource", "SSHPool", "Unrecorded"]
"""SSHPool: the type of the live pool's connections, which a view passes on to the workflows it runs."""


@dataclass(frozen=True)
class Capabilities:
    live: bool
    """Polls the pool: actions, smoke tests, log reads and a poll now reach it."""
    replay: bool
    """Plays a recording back: pause, seek and speed apply."""
    read_only: bool
    """Nothing that changes the pool is offered (--read-only, a replay)."""


class Playback(Protocol):
    """The controls of a recording played back."""

    def toggle_pause(self) -> None: ...

    def seek(self, seconds: float) -> None: ...

    def faster(self, up: bool) -> None: ...


class PoolSource(Protocol):
    state: PoolState
    alerts: Alerts
    events: EventLog

    @property
    def capabilities(self) -> Capabilities: ...

    def clock(self) -> float: ...

    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        """`callback` hears every update (on the event loop) until the returned function is called."""
        ...

    def start(self) -> None:
        """Begin (on the running event loop): poll, or play."""
        ...

    async def stop(self) -> None: ...

    def poll_now(self) -> None: ...

    def label(self) -> str | None:
        """Where the source stands, for a title line (a replay's moment and speed); None: nothing to say."""
        ...

    @property
    def playback(self) -> Playback | None:
        """The controls of a recording (None: live)."""
        ...

    @property
    def recorded(self) -> Path | None:
        """The history store it reads from (a replay's recording; None: the view's own store, if any)."""
        ...


class Unrecorded:
    """What a source that plays no recording answers: no label, no playback controls, no recording's path
    (the live pool, the sampling run of `status`)."""

    def label(self) -> str | None:
        return None

    @property
    def playback(self) -> Playback | None:
        return None

    @property
    def recorded(self) -> Path | None:
        return None


class LiveSource(Unrecorded):
    """The live pool as a PoolSource. `polling` False: nothing is polled (tests that apply results by hand).
    A `backlog` (ui.launch started the polls before the view loaded) is handed to the first subscriber at
    `start`, so what the first polls told is heard in order."""

    def __init__(
        self, runtime: LivePool, *, read_only: bool = False, polling: bool = True, backlog: Backlog | None = None
    ) -> None:
        self.runtime = runtime
        self.state = runtime.state
        self.alerts = runtime.alerts
        self.events = runtime.events
        self._capabilities = Capabilities(live=polling, replay=False, read_only=read_only)
        self._backlog = backlog
        self._waiting: list[Subscriber] = []

    @property
    def capabilities(self) -> Capabilities:
        return self._capabilities

    def clock(self) -> float:
        return self.state.clock()

    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        if self._backlog is None:
            return self.runtime.subscribe(callback)
        self._waiting.append(callback)  # until start: the backlog's updates come first
        return lambda: self._waiting.remove(callback)

    def start(self) -> None:
        if not self._capabilities.live:
            return
        if self._backlog is None:
            self.runtime.start()
            return
        backlog, self._backlog = self._backlog, None
        waiting, self._waiting = self._waiting, []
        for i, callback in enumerate(waiting):
            if i == 0:
                backlog.hand_over(callback)
            else:
                self.runtime.subscribe(callback)

    async def stop(self) -> None:
        await self.runtime.stop()

    def poll_now(self) -> None:
        self.runtime.poll_now()
