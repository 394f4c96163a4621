"""The collector's policy for a long-running console holds from the start: the imports' objects frozen and
young collections rare as soon as the loops begin (at 1,000 engines the default policy spent 0.47 s in 646
collections, 5 of them full, before the first frame with data), then settled and full collections on a
timer (tests/ui/test_console.py walks those)."""

from __future__ import annotations

import asyncio
import gc

from poolconsole.config import parse_config
from poolconsole.runtime.live import GC_THRESHOLD, LivePool


def test_the_collector_policy_holds_from_the_start() -> None:
    threshold = gc.get_threshold()
    gc.unfreeze()
    gc.set_threshold(700, 10, 10)  # Python's defaults, whatever an earlier test left

    async def started() -> tuple[int, int, bool]:
        live = LivePool(parse_config("", "hosts.toml"))
        live.start()
        try:
            return gc.get_freeze_count(), gc.get_threshold()[0], live.gc.settled
        finally:
            await live.stop()

    try:
        frozen, young, settled = asyncio.run(started())
        assert frozen > 0 and young == GC_THRESHOLD and not settled
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)


def test_without_the_policy_the_collector_is_left_as_it_was() -> None:
    threshold = gc.get_threshold()
    gc.unfreeze()

    async def started() -> tuple[int, tuple[int, int, int]]:
        live = LivePool(parse_config("", "hosts.toml"))
        live.start(settle_gc=False)  # tests and embedders that keep their own
        try:
            return gc.get_freeze_count(), gc.get_threshold()
        finally:
            await live.stop()

    try:
        assert asyncio.run(started()) == (0, threshold)
    finally:
        gc.set_threshold(*threshold)
