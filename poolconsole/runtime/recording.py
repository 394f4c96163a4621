"""A live pool's history store, opened off the event loop (the console's: `record` opens its own before it
polls, and fails with the command if it cannot).

Opening can wait on the disk (recovering the write-ahead log of a console that was killed: 67 ms once on the
2-core build machine), so it runs in a thread while the first polls are applied and drawn. Those polls are
held (store.HeldPolls) and given to the store in order once it is open; a pool closed before its store opened
still gives it what was held, then closes it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from poolconsole.runtime.store import HeldPolls, Store, StoreProblem

if TYPE_CHECKING:
    from poolconsole.runtime.live import LivePool

Outcome = Store | StoreProblem | BaseException
"""What an open came to: the store, a StoreProblem in words (StoreBusy: another process records it), or an
error nobody expected."""


class Recording:
    """The store `pool` records into, from now on: call it on the pool's event loop. The polls the pool
    applied before (a runtime started while its console loads) are kept if `pool` already holds them."""

    def __init__(self, pool: LivePool, path: Path, on_problem: Callable[[str], None]) -> None:
        self.pool = pool
        self.path = path
        self.store: Store | None = None
        """Open and recording (None while it opens, or if it did not open)."""
        held = pool.recorder
        self._held = held if isinstance(held, HeldPolls) else HeldPolls()
        pool.recorder = self._held
        opening = partial(Store.for_config, pool.config, path, clock=pool.state.clock, on_problem=on_problem)
        self._opening: asyncio.Future[Store] = asyncio.get_running_loop().run_in_executor(None, opening)
        self._outcome: Outcome | None = None

    async def opened(self) -> Outcome:
        """Once the open is over: the store records, with what was held first; else nothing is recorded."""
        return await self._settle()

    async def close(self) -> None:
        """After the pool's loops stopped: a store still opening gets what was held once it opens; the
        store is closed with the last second's polls."""
        await self._settle()
        if self.store is not None:
            await asyncio.to_thread(self.store.close)

    async def _settle(self) -> Outcome:
        if self._outcome is None:
            # shielded: a caller cancelled meanwhile (a console closing) leaves the open to `close`
            outcome: Outcome = (await asyncio.gather(asyncio.shield(self._opening), return_exceptions=True))[0]
            if self._outcome is None:  # the first caller to see it takes it
                self._take(outcome)
        assert self._outcome is not None
        return self._outcome

    def _take(self, outcome: Outcome) -> None:
        self._outcome = outcome
        if self.pool.recorder is self._held:
            self.pool.recorder = None
        if isinstance(outcome, Store):
            self._held.hand_over(outcome)
            self.pool.recorder = self.store = outcome
