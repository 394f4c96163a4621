"""Stopping a helper task from the task that owns it, without losing the owner's own cancellation.

`task.cancel()` then `with suppress(CancelledError): await task` swallows two things: the helper's
cancellation (meant) and, when the owner is itself being cancelled while it waits there, the owner's
(not meant). The owner then goes on running, and whoever cancelled it waits on it for ever: a host's poll
loop, cancelled while it closed its telemetry stream, kept polling, and the console's quit (the runtime
awaiting its loops) never ended."""

from __future__ import annotations

import asyncio


async def reap(task: asyncio.Task[object], *also: type[BaseException]) -> None:
    """Cancel `task` and wait for it to end; its own CancelledError (and `also`) is swallowed, the
    caller's own cancellation is raised."""
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        current = asyncio.current_task()
        if current is not None and current.cancelling():
            raise
    except also:
        pass
