"""Chart rings that do not grow with the fleet (issue 39): every engine keeps SHORT_POINTS a series (the
overview's trend, the detail's 5 minutes), only the FULL_KEPT engines whose detail opened last keep
HISTORY_POINTS; the others are read back from the store when their detail opens (tests/ui/test_detail_fill)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from poolconsole.model.pool_state import FULL_KEPT, HISTORY_POINTS, SHORT_POINTS, PoolState
from poolconsole.model.series import Ring
from poolconsole.model.view import EngineView
from poolconsole.runtime.store import StoredHistory, fill_history
from poolconsole.ui import cells
from tests.helpers import bigpool, uipool

POLLS = SHORT_POINTS + 20
Stored = list[tuple[float, Any, Any, Any, Any, float | None, int]]
"""An engine's points as the store gives them (StoredHistory.engines)."""


def a_view() -> EngineView:
    cfg = uipool.config()
    state = PoolState(cfg)
    return next(v for v in (state.apply_engine(s) for s in uipool.engine_snapshots(cfg)) if v.kind == "vllm")


def polled(engines: int, polls: int, opened: list[int] | None = None) -> tuple[PoolState, list[str]]:
    """`engines` engines polled `polls` times (2 s apart from t=1000), those `opened` kept full after 10."""
    state = PoolState(bigpool.config(engines))
    names = list(state.engines)
    view = a_view()
    views = [replace(view, name=name) for name in names]
    for step in range(polls):
        if step == 10:
            for i in opened or []:
                state.keep_full(names[i])
        for view in views:
            state.apply_view(view, 1000.0 + 2 * step)
    return state, names


def test_the_rings_stay_bounded_when_1000_engines_poll() -> None:
    state, names = polled(1000, POLLS, opened=list(range(20)))
    assert list(state.full) == names[20 - FULL_KEPT : 20]  # the last opened
    held = {name: {len(r) for r in track.history.rings()} for name, track in state.engines.items()}
    for name, sizes in held.items():
        assert sizes == ({POLLS} if name in state.full else {SHORT_POINTS}), name
    points = sum(len(r) for track in state.engines.values() for r in track.history.rings())
    assert points == 6 * ((1000 - FULL_KEPT) * SHORT_POINTS + FULL_KEPT * POLLS)
    capacity = sum(r.capacity for track in state.engines.values() for r in track.history.rings())
    assert capacity == 6 * ((1000 - FULL_KEPT) * SHORT_POINTS + FULL_KEPT * HISTORY_POINTS)
    assert {host.vram.capacity for host in state.hosts.values()} == {SHORT_POINTS}
    # the newest points, in order
    assert state.engines[names[500]].history.times.raw_tail(2) == [1000.0 + 2 * (POLLS - 2), 1000.0 + 2 * (POLLS - 1)]


def test_the_overview_trend_fits_in_the_short_rings() -> None:
    assert cells.SPARK_POINTS <= SHORT_POINTS


def test_the_engines_kept_full_are_the_last_opened_the_oldest_evicted() -> None:
    state, names = polled(FULL_KEPT + 2, POLLS)
    for name in names[:FULL_KEPT]:
        assert state.keep_full(name), "its rings were short: to be read back"
    assert not state.keep_full(names[0]), "kept full already: nothing to read"  # now the most recent
    state.engines[names[1]].history.restarts.append(1004.0)
    assert state.keep_full(names[FULL_KEPT])  # one too many: the least recently opened goes, names[1]
    assert names[1] not in state.full and names[0] in state.full and len(state.full) == FULL_KEPT
    evicted = state.engines[names[1]].history
    assert evicted.capacity == SHORT_POINTS and len(evicted.times) == SHORT_POINTS
    assert evicted.times[-1] == 1000.0 + 2 * (POLLS - 1) and list(evicted.restarts) == [1004.0]
    kept = state.engines[names[0]].history
    assert kept.capacity == HISTORY_POINTS and kept.times.raw_tail(SHORT_POINTS) == evicted.times.raw_tail(SHORT_POINTS)
    state.apply_view(replace(a_view(), name=names[0]), 5000.0)
    assert len(kept.times) == SHORT_POINTS + 1, "a full ring grows past the short size"
    assert state.keep_full(names[1]), "opened again: read back again"


def test_a_replay_seeking_back_keeps_the_full_ones_full() -> None:
    state, names = polled(3, 5, opened=[])
    state.keep_full(names[2])
    state.reset()
    assert state.engines[names[2]].history.capacity == HISTORY_POINTS
    assert state.engines[names[0]].history.capacity == SHORT_POINTS


def test_the_store_fills_as_many_points_as_a_ring_keeps_and_every_restart() -> None:
    state, names = polled(2, 0)
    state.keep_full(names[1])
    hour: Stored = [(100.0 + 2 * i, float(i), i / 2000, 1.0, 0.0, 0.5, int(i in (3, 1700))) for i in range(1800)]
    marked = fill_history(state, StoredHistory(engines={names[0]: hour, names[1]: hour}))
    short, full = state.engines[names[0]].history, state.engines[names[1]].history
    assert short.tokens_per_s.tail(SHORT_POINTS) == [float(i) for i in range(1800 - SHORT_POINTS, 1800)]
    assert len(full.times) == 1800 and full.times[0] == 100.0
    assert marked == {names[0]: (106.0, 3500.0), names[1]: (106.0, 3500.0)}  # the short one's too
    assert list(short.restarts) == [106.0, 3500.0]


def test_a_detail_fill_puts_the_points_back_not_the_marks() -> None:
    state, names = polled(1, 3)
    history = state.engines[names[0]].history
    history.restarts.append(1002.0)
    state.keep_full(names[0])
    older: Stored = [(10.0 + i, float(i), None, None, None, None, int(i == 5)) for i in range(100)]
    assert fill_history(state, StoredHistory(engines={names[0]: older}), marks=False) == {}
    filled = state.engines[names[0]].history
    assert len(filled.times) == 103 and filled.times[0] == 10.0 and filled.times[-1] == 1004.0
    assert list(filled.restarts) == [1002.0]


def test_a_ring_resized_keeps_its_newest_points() -> None:
    ring = Ring(5)
    for i in range(8):
        ring.append(float(i))
    assert ring.resized(3).tail(3) == [5.0, 6.0, 7.0]
    grown = ring.resized(10)
    grown.append(None)
    assert list(grown) == [3.0, 4.0, 5.0, 6.0, 7.0, None] and grown.nbytes == 48
