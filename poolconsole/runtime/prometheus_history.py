"""The charts' history on launch for engines read from `[prometheus]`: its range queries, beside the
history store's points (runtime.store read_history), both put into the charts by fill_history.

Each engine's scrapes (collect/prometheus/range.py) go through a PoolState of their own, the model a live
poll goes through: tok/s from the reset-safe deltas between consecutive scrapes, a counter that went down
(or a new process start time) a restart mark, never a negative rate, a stale target a gap.

Where the store holds points for an engine, they win over the span they cover (its first to its last point
in the window): they are this console's or the recorder's own polls, with VRAM and the restarts other
sources saw, and two samplings of the same minutes in one ring would draw a chart at two spacings. The range
query fills the rest of the window, before and after that span (a console opened for five minutes an hour
ago leaves the store five minutes; Prometheus has the hour). Each point's tok/s is computed within its own
source, so the seam shows no spike. A gap inside the store's span stays a gap.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from poolconsole.collect.prometheus.range import RANGE_CONCURRENCY, RANGE_INSTANCES, read_range
from poolconsole.collect.prometheus.source import PrometheusAPI
from poolconsole.config.models import Engine, PoolConfig
from poolconsole.model.pool_state import HISTORY_POINTS, PoolState
from poolconsole.model.snapshots import EngineSnapshot
from poolconsole.runtime.store import StoredHistory

CHUNK = RANGE_INSTANCES * RANGE_CONCURRENCY
"""Engines whose range answers are read, and turned into points, at a time: a whole fleet's snapshots never
live at once (the query API still sees RANGE_CONCURRENCY queries in flight)."""

Point = tuple[float, float | None, float | None, float | None, float | None, float | None, int]


def points(config: PoolConfig, name: str, snapshots: list[EngineSnapshot]) -> list[Point]:
    """One engine's scrapes as fill_history's points (at, tok/s, kv, running, waiting, vram, resets), computed
    by a PoolState of their own exactly as live polls are. VRAM is unknown: the hosts' range is not read."""
    engine = next(e for e in config.engines if e.name == name)
    state = PoolState(config.model_copy(update={"engines": [engine], "hosts": []}))
    state.keep_full(name)  # every scrape of the window, not the last SHORT_POINTS
    for snapshot in snapshots:
        state.apply_engine(snapshot)
    history = state.engines[name].history
    count = len(history.times)
    restarts = set(history.restarts)
    times = history.times.raw_tail(count)
    series = zip(
        times,
        history.tokens_per_s.tail(count),
        history.kv.tail(count),
        history.running.tail(count),
        history.waiting.tail(count),
        strict=True,
    )
    return [(at, tps, kv, running, waiting, None, int(at in restarts)) for at, tps, kv, running, waiting in series]


def merged(stored: list[Point], ranged: list[Point], step: float) -> list[Point]:
    """The store's points over the span they cover, the range query's before and after it (module doc)."""
    if not stored:
        return ranged
    first, last = stored[0][0], stored[-1][0]
    before = [p for p in ranged if p[0] < first - step / 2]
    after = [p for p in ranged if p[0] > last + step / 2]
    return before + stored + after


async def with_prometheus_history(
    config: PoolConfig,
    stored: StoredHistory,
    until: float,
    only: Collection[str] | None = None,
    capacity: Callable[[str], int] | None = None,
) -> list[str]:
    """Add to `stored` (the store's points, or none) the history of every engine read from `[prometheus]`
    (`only`: of those engines, a detail opening): the last `capacity(name)` poll intervals before `until`
    (PoolState.capacity_of: as many as its rings keep; HISTORY_POINTS when not given), one range query per
    group and window. Returns the problems in words, each naming the query API's URL (the charts of those
    engines then keep only the store's).

    The launch passes `capacity`: at 1,000 engines, two hours of scrapes for every engine were ~1.4 million
    snapshots built at once to keep 180 points of each (RSS 133 -> 240 MiB and never given back), and a
    restart mark older than the rings' window is not read from Prometheus (the store still gives its own)."""
    source = config.prometheus
    engines = [e for e in config.engines if e.read == "prometheus" and (only is None or e.name in only)]
    if source is None or not engines:
        return []
    step = config.settings.poll_interval_s
    windows: dict[int, list[Engine]] = {}
    for engine in engines:
        windows.setdefault(capacity(engine.name) if capacity else HISTORY_POINTS, []).append(engine)
    api = PrometheusAPI(source, config.settings).acquire()
    errors: list[str] = []
    try:
        for kept, chosen in sorted(windows.items()):
            for at in range(0, len(chosen), CHUNK):  # each chunk's snapshots become points before the next
                reading = await read_range(api, chosen[at : at + CHUNK], until - (kept - 1) * step, until, step)
                errors += [e for e in reading.errors if e not in errors]
                for name, snapshots in reading.snapshots.items():
                    ranged = points(config, name, snapshots)
                    mine = stored.engines.get(name, [])
                    both = merged(mine, ranged, step)
                    if both:
                        stored.engines[name] = both
    finally:
        await api.release()
    return [f"the charts' history was not read from Prometheus ({source.url}): {e}" for e in errors]
