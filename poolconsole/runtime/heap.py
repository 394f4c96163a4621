"""Giving freed memory back to the system, for a process that runs for days.

glibc's malloc keeps the chunks a program frees inside its arenas for reuse, and hands pages back only
from the top of the main heap. The console frees as much as it allocates once its rings are full (Python
objects and glibc's bytes in use stay flat), but the free space inside the arenas kept growing: on the
chaos soak's 38-target pool, in a real terminal, glibc's free bytes went 5.6 -> 7.4 MB in 16 minutes while
its bytes in use stayed at 21.5-21.8 MB, and RSS followed at about 10 MiB/h. One `malloc_trim(0)` then
gave back 3.6 MiB of the main heap and 1.6 MiB of the other arenas (BENCHMARKS.md, "Where the console's
memory ... comes from"). So the long-running commands trim after each full collection (runtime.live
.GcPolicy), when the collector has just freed what it could.

Off glibc (macOS, musl) there is no `malloc_trim` and this does nothing."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache


@cache
def _malloc_trim() -> Callable[[int], int] | None:
    import ctypes  # at the first trim (a minute in), not with the runtime: ctypes is 2-3 ms of the launch

    try:
        trim: Callable[[int], int] = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # not glibc
        return None
    return trim


def trim_heap() -> bool:
    """Return free memory in every malloc arena to the system; True when some was returned, False when
    none was or where malloc_trim does not exist."""
    trim = _malloc_trim()
    return bool(trim(0)) if trim is not None else False
