"""A fixed-capacity time series of floats in one array: 8 bytes a point (a deque of Python floats
costs 32), O(1) indexing, and the last n points without copying the rest."""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterator


class Ring:
    """The newest `capacity` values; None (unknown at that poll) is stored as NaN and read back as None."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._data = array("d")
        self._next = 0  # where the next value goes once the array is full

    def append(self, value: float | None) -> None:
        stored = math.nan if value is None else float(value)
        if len(self._data) < self.capacity:
            self._data.append(stored)
        else:
            self._data[self._next] = stored
            self._next = (self._next + 1) % self.capacity

    def __len__(self) -> int:
        return len(self._data)

    def resized(self, capacity: int) -> Ring:
        """A ring of `capacity` holding this one's newest points (all of them when they fit), oldest first."""
        ring = Ring(capacity)
        ring._data = array("d", self.raw_tail(capacity))
        return ring

    @property
    def nbytes(self) -> int:
        """The bytes its points take (8 a point; the array's own small header and slack not counted)."""
        return len(self._data) * self._data.itemsize

    def _at(self, index: int) -> int:
        size = len(self._data)
        if index < 0:
            index += size
        if not 0 <= index < size:
            raise IndexError("Ring index out of range")
        return (self._next + index) % size if size == self.capacity else index

    def __getitem__(self, index: int) -> float | None:
        value = self._data[self._at(index)]
        return None if math.isnan(value) else value

    def __iter__(self) -> Iterator[float | None]:
        return iter(self.tail(len(self._data)))

    def tail(self, count: int) -> list[float | None]:
        """The last `count` values, oldest first."""
        return [None if math.isnan(v) else v for v in self.raw_tail(count)]

    def raw_tail(self, count: int) -> list[float]:
        """The last `count` values, oldest first, unknown ones as NaN (for series that have none: times)."""
        size = len(self._data)
        count = min(count, size)
        if size < self.capacity or self._next == 0:
            return self._data[size - count :].tolist()
        end = self._next  # the newest value sits just before the write position: copy only what is asked
        if count <= end:
            return self._data[end - count : end].tolist()
        return (self._data[size - (count - end) :] + self._data[:end]).tolist()
