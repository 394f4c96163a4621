"""The history ring: order, wrap-around, unknowns kept as gaps, indexing from both ends."""

from __future__ import annotations

from collections import deque

import pytest
from hypothesis import given
from hypothesis import strategies as st

from poolconsole.model.pool_state import binned
from poolconsole.model.series import Ring


def test_ring_keeps_the_newest_values_in_order_with_gaps() -> None:
    ring = Ring(4)
    assert len(ring) == 0 and ring.tail(3) == []
    for value in (1.0, None, 3.0):
        ring.append(value)
    assert list(ring) == [1.0, None, 3.0] and ring[1] is None and ring[-1] == 3.0
    for value in (4.0, 5.0, None, 7.0):
        ring.append(value)
    assert len(ring) == 4
    assert list(ring) == [4.0, 5.0, None, 7.0]
    assert ring[0] == 4.0 and ring[-1] == 7.0 and ring[2] is None
    assert ring.tail(2) == [None, 7.0] and ring.tail(10) == [4.0, 5.0, None, 7.0]
    with pytest.raises(IndexError):
        ring[4]


def test_ring_wraps_many_times() -> None:
    ring = Ring(3)
    for i in range(100):
        ring.append(float(i))
    assert list(ring) == [97.0, 98.0, 99.0] and ring.raw_tail(2) == [98.0, 99.0]


def test_ring_tail_of_every_length_at_every_wrap_position() -> None:
    for capacity in (1, 2, 5):
        for appended in range(capacity, 3 * capacity + 1):
            ring = Ring(capacity)
            for i in range(appended):
                ring.append(float(i))
            newest = [float(i) for i in range(appended - capacity, appended)]
            for count in range(capacity + 2):
                assert ring.tail(count) == newest[len(newest) - min(count, capacity) :]


def test_binned_trend_means_each_run_newest_last() -> None:
    assert binned([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], 3) == [1.5, 3.5, 5.5]
    assert binned([1.0, None, 3.0, None], 2) == [1.0, 3.0]  # unknown polls left out of a run's mean
    assert binned([None, None, 5.0, 7.0], 2) == [None, 6.0]  # a run with nothing known stays unknown
    assert binned([1.0, 2.0], 12) == [1.0, 2.0]  # a short history: fewer bins, not padded ones
    assert binned([float(i) for i in range(185)], 12)[-1] == 177.0  # the newest 15, the oldest 5 left out


@given(
    capacity=st.integers(1, 9),
    steps=st.lists(st.one_of(st.none(), st.floats(-1e6, 1e6), st.integers(1, 12).map(lambda n: -n)), max_size=60),
)
def test_ring_reads_as_a_bounded_deque_through_appends_and_resizes(capacity: int, steps: list[float | None]) -> None:
    """Every read of the ring (its length, iteration, tails, both ends' indices) against a deque of the same
    bound, through appends (None: a gap) and resizes (a negative step: to that many points)."""
    ring, model = Ring(capacity), deque[float | None](maxlen=capacity)
    for step in steps:
        if isinstance(step, float) or step is None:
            ring.append(step)
            model.append(step)
        else:
            ring, model = ring.resized(-step), deque(model, maxlen=-step)
        assert len(ring) == len(model) and list(ring) == list(model) and ring.nbytes == 8 * len(model)
        for count in range(ring.capacity + 2):
            assert ring.tail(count) == list(model)[len(model) - min(count, len(model)) :]
        for index in range(-len(model), len(model)):
            assert ring[index] == model[index]
