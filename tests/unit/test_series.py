"""The history ring: order, wrap-around, unknowns kept as gaps, indexing from both ends."""

from __future__ import annotations

import pytest

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
