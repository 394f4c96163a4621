"""The long-running commands give freed memory back after each full collection (runtime.heap): on the
chaos soak's pool the console's RSS grew ~10 MiB/h with glibc's bytes in use flat and its free bytes growing
inside the arenas, which one malloc_trim(0) returned (BENCHMARKS.md)."""

from __future__ import annotations

import gc

import pytest

from poolconsole.runtime import heap, live
from poolconsole.runtime.live import GcPolicy


def test_trim_gives_back_memory_freed_inside_the_heap() -> None:
    if heap._malloc_trim() is None:
        pytest.skip("no malloc_trim here (not glibc)")
    heap.trim_heap()  # what earlier tests left
    # 64 KiB blocks come from the heap (under malloc's mmap threshold), each followed by a small one that
    # stays, so freeing them leaves holes inside the heap that only a trim hands back.
    blocks = [(bytes(64 * 1024), bytes(600)) for _ in range(256)]
    pins = [small for _, small in blocks]
    del blocks
    assert heap.trim_heap() is True
    assert len(pins) == 256


def test_each_full_collection_trims(monkeypatch: pytest.MonkeyPatch) -> None:
    trims: list[bool] = []

    def trim() -> bool:
        trims.append(True)
        return True

    monkeypatch.setattr(live, "trim_heap", trim)
    policy = GcPolicy()
    threshold = gc.get_threshold()
    try:
        policy.collect()
        policy.collect()
    finally:
        gc.set_threshold(*threshold)
    assert policy.full_collections == 2 and trims == [True, True] and policy.trims_returned == 2
