"""Pool state: the latest view of every engine and host and their bounded history (tok/s, KV, queue, VRAM,
restart marks). Pure data: the runtime writes it (a live pool's polls, a replay's rows, the charts' stored
points); the views read it and build their rows from it (ui/cells.py)."""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from poolconsole.config.models import Engine, Host, PoolConfig
from poolconsole.model.failure_modes import Diagnosis
from poolconsole.model.hosts import HostSnapshot, HostState
from poolconsole.model.ollama import OllamaServer, Residency, observe
from poolconsole.model.series import Ring
from poolconsole.model.snapshots import COUNTERS, EngineSnapshot, EngineState
from poolconsole.model.view import EngineView, engine_view

TargetKey = tuple[str, str]
"""("engine", name) or ("host", name)."""
HISTORY_POINTS = 3600  # polls: two hours at the default 2 s interval (the detail's hour, with room)
SHORT_POINTS = 180
"""What every engine's and host's rings keep (issue 39): the overview's tok/s trend (ui.cells.SPARK_POINTS,
the last 180 polls) and the detail's 5 minutes at the default 2 s. Only the FULL_KEPT engines whose detail
opened last keep HISTORY_POINTS; the others' older points are read back from the history store or
Prometheus when their detail opens (ui.history). At 1,000 engines: ~8.6 MB of rings, not ~173 MB, allocated
whole when the console starts (model.series.Ring)."""
FULL_KEPT = 8
"""How many engines keep full-resolution rings: the one in detail now and those opened just before it."""
SPARK = "▁▂▃▄▅▆▇█"

SERIES = ("times", "tokens_per_s", "kv", "running", "waiting", "vram")


class History:
    """Bounded time series of one engine (None = unknown at that poll, drawn as a gap), `capacity` points a
    series; the restart marks apart (the last 100, whatever the rings' size)."""

    def __init__(self, capacity: int = SHORT_POINTS) -> None:
        self.capacity = capacity
        self.times = Ring(capacity)
        self.tokens_per_s = Ring(capacity)
        self.kv = Ring(capacity)
        self.running = Ring(capacity)
        self.waiting = Ring(capacity)
        self.vram = Ring(capacity)
        self.restarts: deque[float] = deque(maxlen=100)

    def rings(self) -> tuple[Ring, ...]:
        """Its six series, in SERIES' order."""
        return (self.times, self.tokens_per_s, self.kv, self.running, self.waiting, self.vram)

    def resized(self, capacity: int) -> History:
        """The same history in rings of `capacity` (the newest points kept when it shrinks), the same marks."""
        new = History(capacity)
        for name in SERIES:
            setattr(new, name, getattr(self, name).resized(capacity))
        new.restarts = self.restarts
        return new

    def window(self, seconds: float, now: float) -> list[int]:
        """Indices of the points within the last `seconds`."""
        return [i for i, t in enumerate(self.times.raw_tail(len(self.times))) if now - t <= seconds]


def sparkline(values: list[float | None], width: int = 12) -> str:
    tail = values[-width:]
    known = [v for v in tail if v is not None]
    if not known:
        return "·" * len(tail)
    top = max(known) or 1.0
    return "".join("·" if v is None else SPARK[min(len(SPARK) - 1, int(v / top * (len(SPARK) - 1)))] for v in tail)


def binned(values: list[float | None], bins: int) -> list[float | None]:
    """`values` (oldest first) cut into `bins` equal runs, the newest run last, each the mean of its known
    values (None when it has none). A short history gives fewer bins, not padded ones."""
    size = max(1, len(values) // bins) if len(values) >= bins else 1
    out: list[float | None] = []
    for end in range(len(values), 0, -size):
        known = [v for v in values[max(0, end - size) : end] if v is not None]
        out.append(sum(known) / len(known) if known else None)
        if len(out) == bins:
            break
    return out[::-1]


@dataclass
class EngineTrack:
    config: Engine
    last_read: EngineSnapshot | None = None
    """The last poll that read metrics: the next one's rates and restart check pair with it, across any
    down phase in between (a crash loop refuses connections, then comes back with reset counters)."""
    view: EngineView | None = None
    history: History = field(default_factory=History)
    last_ok_at: float | None = None
    totals: dict[str, float] = field(default_factory=dict)
    """Each counter's reset-safe running total since this process started watching: monotonic across
    engine restarts and gaps (what an exporter serves as a counter, so that rate() is right)."""
    diagnosis: Diagnosis | None = None
    """The failure modes its log showed when it last went down or restarted (runtime.live reads it)."""
    recorded_restart_at: float | None = None
    """A restart the container's record showed before the counters did (an ok poll with no metrics read
    yet, or a slow first read): the counters' reset that follows is the same restart, not counted again."""
    counted_reset: bool = False
    """The last poll's counter reset was counted as a restart (False: none, or the one already recorded)."""
    residency: Residency | None = None
    """Ollama: the models its last answered /api/ps held, and what changed over the recent polls."""
    active_profile: str | None = None
    """The profile it runs as the audit log's last promoted rollover left it (read at start, set by a
    rollover here); None: the configured one (`profile`), as far as this console knows."""
    unloaded_here: dict[str, float] = field(default_factory=dict)
    """Ollama: the models this console unloaded (U), by name, with when: their leaving is said as such."""
    ollama_server: OllamaServer | None = None
    """Ollama: OLLAMA_KEEP_ALIVE / OLLAMA_NUM_PARALLEL from its log (runtime.live reads it)."""


@dataclass
class HostTrack:
    config: Host
    snapshot: HostSnapshot | None = None
    last_ok_at: float | None = None
    vram: Ring = field(default_factory=lambda: Ring(SHORT_POINTS))
    """Nothing draws a host's VRAM series (the detail charts its engine's share): it stays short."""
    gpu_memory_kind: str | None = None
    """The memory kind of the GPUs it last reported ('dedicated', 'unified'); None: never seen with one. A
    host down since is still one whose GPUs the totals cannot know."""


class PoolState:
    """Every target's latest state; `apply_*` are called once per finished poll."""

    def __init__(self, config: PoolConfig, clock: Callable[[], float] = time.time) -> None:
        self.config = config
        self.clock = clock
        self.engines = {e.name: EngineTrack(e) for e in config.engines}
        self.hosts = {h.name: HostTrack(h) for h in config.hosts}
        self.deep_health: dict[str, tuple[float, dict[str, Any]]] = {}
        """Gateway name -> (when, LiteLLM's deep /health: healthy and unhealthy deployments, or an error)."""
        self.revision = 0
        """Counts the changes to the targets' views, snapshots and ages (apply_*, reset)."""
        self._changed: dict[TargetKey, int] = {}
        """Each target that changed -> the revision of its last change, the latest last (changed_since)."""
        self.full: OrderedDict[str, None] = OrderedDict()
        """The engines whose rings keep HISTORY_POINTS (their detail opened lately), the latest last."""

    def keep_full(self, name: str) -> bool:
        """`name`'s rings at full resolution from now on (its detail opens), those of the least recently
        opened beyond FULL_KEPT back to SHORT_POINTS; True when its rings were short (the older points are
        to be read back: ui.history)."""
        track = self.engines[name]
        was_full = name in self.full
        self.full[name] = None
        self.full.move_to_end(name)
        if not was_full:
            track.history = track.history.resized(HISTORY_POINTS)
        while len(self.full) > FULL_KEPT:
            oldest, _ = self.full.popitem(last=False)
            self.engines[oldest].history = self.engines[oldest].history.resized(SHORT_POINTS)
        return not was_full

    def capacity_of(self, name: str) -> int:
        """How many points `name`'s rings keep."""
        return HISTORY_POINTS if name in self.full else SHORT_POINTS

    def _mark(self, key: TargetKey) -> None:
        self.revision += 1
        self._changed.pop(key, None)
        self._changed[key] = self.revision

    def changed_since(self, revision: int) -> list[TargetKey]:
        """The targets that changed after `revision`, the latest first: what a tick has to take in, read from
        the newest end of the change log (not a walk over the pool)."""
        out: list[TargetKey] = []
        for key in reversed(self._changed):
            if self._changed[key] <= revision:
                break
            out.append(key)
        return out

    def apply_engine(self, snapshot: EngineSnapshot) -> EngineView:
        track = self.engines[snapshot.name]
        read = snapshot.metrics is not None
        last = track.last_read
        if read and last is not None and track.view is not None and snapshot.monotonic == last.monotonic:
            return track.view  # the same sample again (read from Prometheus between two scrapes): nothing new
        view = engine_view([last, snapshot] if read and last is not None else [snapshot])
        if read:
            if track.last_read is None and snapshot.metrics is not None:  # the first read: the counters' values
                for name in COUNTERS:
                    value = snapshot.metrics.values.get(name)
                    if value is not None:
                        track.totals[name] = value
            for name, delta in view.increase.items():
                track.totals[name] = track.totals.get(name, 0.0) + delta
            track.last_read = snapshot
        if view.state is EngineState.OK or (view.state.answering and snapshot.metrics is not None):
            track.last_ok_at = snapshot.fetched_at
        track.counted_reset = bool(view.counter_resets) and not self._recorded_already(track, snapshot.fetched_at)
        if track.counted_reset:
            track.history.restarts.append(snapshot.fetched_at)
        track.view = view
        self._mark(("engine", snapshot.name))
        if snapshot.residency_read:
            track.residency = observe(track.residency, snapshot.ollama_models, snapshot.fetched_at)
        self._append(track, view, snapshot.fetched_at)
        return view

    def _append(self, track: EngineTrack, view: EngineView, at: float) -> None:
        h = track.history
        h.times.append(at)
        h.tokens_per_s.append(view.generation_tokens_per_s)
        h.kv.append(view.kv_cache_usage)
        h.running.append(view.requests_running)
        h.waiting.append(view.requests_waiting)
        h.vram.append(self.engine_vram_fraction(track.config.name))

    def apply_view(self, view: EngineView, at: float) -> None:
        """A view already computed (a recording played back): the same history and ages as a live poll."""
        track = self.engines[view.name]
        if view.state is EngineState.OK or (
            view.state is EngineState.DEGRADED and view.generation_tokens_total is not None
        ):
            track.last_ok_at = at
        if view.counter_resets:
            track.history.restarts.append(at)
        track.view = view
        self._mark(("engine", view.name))
        self._append(track, view, at)

    def reset(self) -> None:
        """Every target back to never polled, in place (a replay seeking backwards)."""
        for name, track in self.engines.items():
            track.view, track.last_read, track.last_ok_at = None, None, None
            track.history, track.totals = History(self.capacity_of(name)), {}
        for host in self.hosts.values():
            host.snapshot, host.last_ok_at, host.vram = None, None, Ring(SHORT_POINTS)
            host.gpu_memory_kind = None
        for name in self.engines:
            self._mark(("engine", name))
        for name in self.hosts:
            self._mark(("host", name))

    def record_restart(self, name: str, at: float, started_at: float | None = None) -> bool:
        """A restart seen by another source (the container's record, which says when the process
        `started_at`); False when the engine's counters already marked this one: at or after that start,
        or within the last poll interval or two (the same restart, seen twice however late it is read)."""
        restarts = self.engines[name].history.restarts
        window = 2 * self.config.settings.poll_interval_s + 1
        if restarts and (
            at - restarts[-1] < window or (started_at is not None and restarts[-1] >= started_at - window)
        ):
            return False
        restarts.append(at)
        self.engines[name].recorded_restart_at = at
        return True

    def _recorded_already(self, track: EngineTrack, at: float) -> bool:
        recorded, track.recorded_restart_at = track.recorded_restart_at, None
        return recorded is not None and at - recorded < 2 * self.config.settings.poll_interval_s + 1

    def apply_host(self, snapshot: HostSnapshot) -> None:
        track = self.hosts[snapshot.name]
        track.snapshot = snapshot
        if snapshot.state is HostState.OK:
            track.last_ok_at = snapshot.fetched_at
        if snapshot.gpus:
            track.gpu_memory_kind = snapshot.memory_kind
        track.vram.append(host_vram_fraction(snapshot))
        self._mark(("host", snapshot.name))

    def engine_vram_fraction(self, name: str) -> float | None:
        engine = self.engines[name].config
        host = self.hosts.get(engine.host or "")
        if host is None or host.snapshot is None:
            return None
        gpus = [g for g in host.snapshot.gpus if engine.gpus is None or g.index in engine.gpus]
        used = [g.memory_used_bytes for g in gpus]
        total = [g.memory_total_bytes for g in gpus]
        if not gpus or None in used or None in total or not sum(t for t in total if t):
            return None
        return sum(u for u in used if u) / sum(t for t in total if t)

    def age_s(self, last_ok_at: float | None) -> float | None:
        return None if last_ok_at is None else max(0.0, self.clock() - last_ok_at)


def host_vram_fraction(snapshot: HostSnapshot) -> float | None:
    used = [g.memory_used_bytes for g in snapshot.gpus]
    total = [g.memory_total_bytes for g in snapshot.gpus]
    if not snapshot.gpus or None in used or None in total:
        return None
    denominator = sum(t for t in total if t)
    return sum(u for u in used if u) / denominator if denominator else None
