"""The console's charts on launch: the configured targets' stored points read back and put before what the
live polls already appended."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from poolconsole.config.models import PoolConfig
from poolconsole.model.pool_state import HISTORY_POINTS, SERIES, History, PoolState
from poolconsole.model.series import Ring
from poolconsole.runtime.store.reader import Reader

Point = tuple[float, Any, Any, Any, Any, float | None, int]
"""An engine's point as the charts take it: (at, tok/s, kv, running, waiting, vram, counter resets)."""


@dataclass
class StoredHistory:
    """What the charts show, read from the store: per engine (at, tok/s, kv, running, waiting, vram,
    counter resets), per host (at, vram)."""

    engines: dict[str, list[Point]] = field(default_factory=dict)
    hosts: dict[str, list[tuple[float, float | None]]] = field(default_factory=dict)
    restarts: dict[str, list[float]] = field(default_factory=dict)
    """Per engine, the times of the counter resets among its points older than those kept in `engines` (a
    read that keeps only what the rings hold still marks every restart of the window)."""


def _vram(gpus: Any, only: list[int] | None) -> float | None:
    """The share of GPU memory used, as PoolState computes it from a snapshot (here its JSON)."""
    chosen = [g for g in gpus or () if only is None or g.get("index") in only]
    used = [g.get("memory_used_bytes") for g in chosen]
    total = [g.get("memory_total_bytes") for g in chosen]
    if not chosen or None in used or None in total:
        return None
    denominator = sum(t for t in total if t)
    return sum(u for u in used if u) / denominator if denominator else None


def read_history(
    path: Path,
    config: PoolConfig,
    since: float,
    until: float,
    only: Collection[str] | None = None,
    capacity: Callable[[str], int] | None = None,
) -> StoredHistory:
    """The configured targets' rows in [since, until), as the history rings hold them (blocking). `only`:
    those engines (a detail opening) and their hosts (for their VRAM), not the whole pool. `capacity`: how
    many points each engine's rings keep (PoolState.capacity_of); its newest twice that many are kept (room
    for the live polls the store also holds, which fill_history leaves out), the older ones' restarts only
    as times (StoredHistory.restarts). Without it, every point: 1,000 engines' two hours are 3.6 million
    points, where their rings keep 180 each."""
    engines = {e.name: e for e in config.engines if only is None or e.name in only}
    hosts = {h.name for h in config.hosts if only is None or h.name in {e.host for e in engines.values()}}
    out = StoredHistory()
    kept: dict[str, deque[Point]] = {}
    gpus: dict[str, Any] = {}
    with Reader(path) as reader:
        ids = reader.ids(list(engines), ("engine",)) + reader.ids(list(hosts), ("host",))
        for row in reader.rows(since, until, ids):
            v = row.values
            if row.kind == "host":
                gpus[row.name] = v.get("gpus")
                out.hosts.setdefault(row.name, []).append((row.at, _vram(v.get("gpus"), None)))
                continue
            engine = engines[row.name]
            vram = _vram(gpus[engine.host], engine.gpus) if engine.host in gpus else None
            point = (
                row.at,
                v.get("generation_tokens_per_s"),
                v.get("kv_cache_usage"),
                v.get("requests_running"),
                v.get("requests_waiting"),
                vram,
                int(v.get("counter_resets") or 0),
            )
            ring = kept.get(row.name)
            if ring is None:
                ring = kept[row.name] = deque(maxlen=2 * capacity(row.name) if capacity else None)
            if ring.maxlen is not None and len(ring) == ring.maxlen and ring[0][6]:
                out.restarts.setdefault(row.name, []).append(ring[0][0])  # pushed out: its restart stays
            ring.append(point)
    out.engines = {name: list(points) for name, points in kept.items()}
    return out


def fill_history(state: PoolState, stored: StoredHistory, marks: bool = True) -> dict[str, tuple[float, ...]]:
    """Put the stored points before what the live polls already appended (on the event loop), as many as each
    ring keeps (an engine's short rings the newest SHORT_POINTS, those kept full HISTORY_POINTS); the restart
    marks it put there, per engine (LivePool.fill_history tells them), from every stored point however few
    the rings keep. `marks=False`: a detail's fill, whose restarts the launch's fill already marked."""
    marked: dict[str, tuple[float, ...]] = {}
    for name, points in stored.engines.items():
        track = state.engines.get(name)
        if track is None:
            continue
        old = track.history
        first_live = old.times.raw_tail(len(old.times))[0] if len(old.times) else math.inf
        before = points[-HISTORY_POINTS:]
        # up to the first live point: the store also holds the live polls, not to be drawn twice
        before = before[: next((i for i, p in enumerate(before) if p[0] >= first_live), len(before))]
        new = History(old.capacity)
        for at, tps, kv, running, waiting, vram, _ in before[-old.capacity :]:
            new.times.append(at)
            new.tokens_per_s.append(tps)
            new.kv.append(kv)
            new.running.append(running)
            new.waiting.append(waiting)
            new.vram.append(vram)
        count = len(old.times)
        for series in SERIES:
            target = getattr(new, series)
            for value in getattr(old, series).tail(count):
                target.append(value)
        if marks:
            new.restarts.extend(at for at in stored.restarts.get(name, ()) if at < first_live)
            new.restarts.extend(at for at, *_, resets in before if resets)
            if new.restarts:
                marked[name] = tuple(new.restarts)
            new.restarts.extend(old.restarts)
        else:
            new.restarts = old.restarts
        track.history = new
    for name, host_points in stored.hosts.items():
        host = state.hosts.get(name)
        if host is None:
            continue
        live = host.vram.tail(len(host.vram))
        host.vram = Ring(host.vram.capacity)
        for _, fraction in host_points[-host.vram.capacity :]:
            host.vram.append(fraction)
        for fraction in live:
            host.vram.append(fraction)
    return marked
