"""A fixed-capacity time series of floats in one array: 8 bytes a point (a deque of Python floats
costs 32), O(1) indexing, and the last n points without copying the rest."""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterator


class Ring:
    """The newest `capacity` values; None (unknown at that poll) is stored as NaN and read back as None.

    Its whole capacity is allocated at once: a pool's rings then take their memory when the console starts,
    not over the quarter of an hour they take to fill (at 1,000 engines 8.6 MB, which made RSS climb for
    15 minutes after the start; issue 39 asks for RSS flat from minute 10)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._data = array("d", (math.nan,)) * capacity
        self._size = 0
        self._next = 0  # where the next value goes

    def append(self, value: float | None) -> None:
        self._data[self._next] = math.nan if value is None else float(value)
        self._next = (self._next + 1) % self.capacity
        if self._size < self.capacity:
            self._size += 1

    def __len__(self) -> int:
        return self._size

    def resized(self, capacity: int) -> Ring:
        """A ring of `capacity` holding this one's newest points (all of them when they fit), oldest first."""
        ring = Ring(capacity)
        kept = self.raw_tail(capacity)
        ring._data[: len(kept)] = array("d", kept)
        ring._size = len(kept)
        ring._next = len(kept) % capacity
        return ring

    @property
    def nbytes(self) -> int:
        """The bytes its points take (8 a point; the room not yet filled and the array's header not counted)."""
        return self._size * self._data.itemsize

    def _at(self, index: int) -> int:
        size = self._size
        if index < 0:
            index += size
        if not 0 <= index < size:
            raise IndexError("Ring index out of range")
        return (self._next - size + index) % self.capacity

    def __getitem__(self, index: int) -> float | None:
        value = self._data[self._at(index)]
        return None if math.isnan(value) else value

    def __iter__(self) -> Iterator[float | None]:
        return iter(self.tail(self._size))

    def tail(self, count: int) -> list[float | None]:
        """The last `count` values, oldest first."""
        return [None if math.isnan(v) else v for v in self.raw_tail(count)]

    def raw_tail(self, count: int) -> list[float]:
        """The last `count` values, oldest first, unknown ones as NaN (for series that have none: times)."""
        count = min(count, self._size)
        end = self._next  # the newest value sits just before the write position: copy only what is asked
        if count <= end:
            return self._data[end - count : end].tolist()
        return (self._data[self.capacity - (count - end) :] + self._data[:end]).tolist()
