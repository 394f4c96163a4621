"""Host telemetry as a stream: one long-lived remote loop per host instead of one SSH exec per poll.

The loop runs the same fixed batch every interval and ends each sample with a marker line, over one
SSH channel that stays open: each sample then costs the console one or two data packets to decrypt
and the host no new session, where an exec per poll opened, requested, answered and closed a channel
(~24 packets). Measured with benchmarks/ui_bench.py. A stream that ends, or sends nothing for an
interval plus the SSH timeout, is dropped; the poller then runs the batch once the ordinary way, which
tells a hung command from a dead host, and starts a new stream on its next poll. A wait for the next
sample can be cut short (`wake`, the console's `r`): the caller then samples the ordinary way at once
and the loop goes on.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from poolconsole.collect.tasks import reap

if TYPE_CHECKING:
    import asyncssh

SAMPLE = "@@poolconsole-sample"
MARKER_LINE = "\n" + SAMPLE
READ_SIZE = 1 << 16


def _release(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


def loop_command(batch: str, interval_s: float) -> str:
    """`batch` is fixed text of this package ending in ';'; the interval is a number. Nothing else goes in."""
    return f"while :; do {batch} echo {SAMPLE}; sleep {max(0.1, interval_s):g}; done"


class SampleStream:
    """The latest complete sample of one remote loop, and how many have arrived."""

    def __init__(self, batch: str, process: asyncssh.SSHClientProcess[str]) -> None:
        self.batch = batch
        self.process = process
        self.latest = ""
        self.count = 0
        self.closed = False
        self.started = time.monotonic()
        self.first_after_s: float | None = None
        """Seconds from the start to the first sample: connection round trip plus the batch's run time."""
        self._waiter: asyncio.Future[None] | None = None
        """The pending `next`'s wait: released by a new sample, the end, its timeout or `wake`."""
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        """Reads what arrived, whole (asyncssh's line iterator costs a coroutine round per line: ~60 lines
        a sample with /proc/meminfo), and cuts it at marker lines."""
        import asyncssh  # loaded with the SSH connection (collect.ssh), not at start-up

        buffer = ""
        try:
            while chunk := await self.process.stdout.read(READ_SIZE):
                buffer += chunk
                while True:
                    at_start = buffer.startswith(SAMPLE)
                    start = 0 if at_start else buffer.find(MARKER_LINE) + 1
                    if not (at_start or start):
                        break  # no marker yet
                    end = buffer.find("\n", start) + 1
                    if not end:
                        break  # the marker line is not complete yet
                    self.latest = buffer[:start]
                    self.count += 1
                    if self.first_after_s is None:
                        self.first_after_s = time.monotonic() - self.started
                    buffer = buffer[end:]
                    self.wake()
        except (asyncssh.Error, OSError):
            pass
        finally:
            self.closed = True
            self.wake()

    async def next(self, after: int, timeout_s: float) -> str | None:
        """A sample newer than number `after` (the latest one when several came since); None when the
        stream ended, nothing came in time, or `wake` cut the wait short. One future and one timer per
        wait (what asyncio.sleep costs), released by whichever comes first."""
        if self.count <= after and not self.closed:
            loop = asyncio.get_running_loop()
            waiter = self._waiter = loop.create_future()
            timer = loop.call_later(max(0.0, timeout_s), _release, waiter)
            try:
                await waiter
            finally:
                timer.cancel()
                self._waiter = None
        return self.latest if self.count > after else None

    def wake(self) -> None:
        """Ends the pending `next` now (a new sample, the end, or a caller that wants a sample sooner)."""
        if self._waiter is not None:
            _release(self._waiter)

    async def close(self) -> None:
        import asyncssh  # loaded with the SSH connection (collect.ssh), not at start-up

        self.process.close()
        await reap(self._reader, asyncssh.Error, OSError)
