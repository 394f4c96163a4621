"""collect.tasks.reap: a helper task stopped by its owner, the owner's own cancellation never swallowed. The
runtime's stop waited for ever on a host's poll loop whose cancellation had arrived while the loop closed its
telemetry stream (`suppress(CancelledError)` around the reader's end ate it): the console could not quit."""

from __future__ import annotations

import asyncio

import pytest

from poolconsole.collect.tasks import reap


async def slow_to_end() -> None:
    """A helper that takes a moment to end once cancelled (a reader closing its channel)."""
    try:
        await asyncio.sleep(3600)
    except asyncio.CancelledError:
        await asyncio.sleep(0.2)
        raise


async def test_the_helpers_cancellation_is_swallowed() -> None:
    helper = asyncio.create_task(slow_to_end())
    await asyncio.sleep(0)
    await reap(helper)  # returns: the helper's end is what was asked for
    assert helper.cancelled()


async def test_the_owners_own_cancellation_is_raised() -> None:
    went_on = []

    async def owner() -> None:
        helper = asyncio.create_task(slow_to_end())
        await asyncio.sleep(0)
        await reap(helper)
        went_on.append(True)  # only if its own cancellation was swallowed
        await asyncio.sleep(3600)

    task = asyncio.create_task(owner())
    await asyncio.sleep(0.05)  # the owner now waits in reap for its helper to end
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 5)
    assert not went_on


async def test_the_named_errors_are_swallowed_and_others_raised() -> None:
    async def fails(exc: BaseException) -> None:
        raise exc

    gone, bad = asyncio.create_task(fails(OSError("gone"))), asyncio.create_task(fails(ValueError("bad")))
    await asyncio.sleep(0)  # both ended with their error before they are reaped
    await reap(gone, OSError)
    with pytest.raises(ValueError):
        await reap(bad, OSError)


async def owner_of(wait: str, inner: asyncio.Future[None], went_on: list[bool]) -> None:
    if wait == "timeout":
        async with asyncio.timeout(5):
            await inner
    else:
        await asyncio.wait_for(inner, 5)
    went_on.append(True)  # only if the cancel was lost
    await asyncio.sleep(3600)


@pytest.mark.parametrize("wait", ["timeout", "wait_for"])
async def test_a_cancel_as_the_awaited_completes_is_kept_by_asyncio_timeout(wait: str) -> None:
    """The runtime's stop cancels every poll loop at once, often just as their SSH commands complete: Python
    3.11's wait_for then returns the result and the cancel is lost (the loop polls on, the quit waits for
    ever). asyncio.timeout keeps it; so the code uses it (and test_no_wait_for_in_the_code keeps it so)."""
    import sys

    inner: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    went_on: list[bool] = []
    task = asyncio.create_task(owner_of(wait, inner, went_on))
    await asyncio.sleep(0)  # the owner waits on inner
    inner.set_result(None)
    task.cancel()  # in the same turn as the completion
    done, _ = await asyncio.wait({task}, timeout=2)
    lost = not done or not task.cancelled()
    if not done:
        task.cancel()
        await asyncio.wait({task}, timeout=2)
    if wait == "timeout" or sys.version_info >= (3, 12):
        assert not lost and not went_on
    else:
        assert lost and went_on  # the 3.11 behaviour this code avoids


def test_no_wait_for_in_the_code() -> None:
    from pathlib import Path

    import poolconsole

    root = Path(poolconsole.__file__).parent
    users = [str(p.relative_to(root)) for p in root.rglob("*.py") if "asyncio.wait_for(" in p.read_text()]
    assert not users, f"asyncio.wait_for loses a cancel on Python 3.11; use asyncio.timeout: {users}"
