"""A watcher's notifications' state written through the Notifier itself (real sends to a receiver the test
runs, and to a port nothing listens on), for the tests of what the console reads of it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

from poolconsole.config.models import PoolConfig
from poolconsole.model.alerts import AlertEvent
from poolconsole.model.notify import from_event
from poolconsole.runtime.notifier import Notifier, NotifyState, state_path


async def page(
    config: PoolConfig,
    store: Path,
    events: list[AlertEvent],
    *,
    clock: Callable[[], float] = time.time,
    wait: Callable[[Notifier], bool] | None = None,
) -> Notifier:
    """Runs a Notifier on `store`'s state file until `wait` (default: every receiver sent or failed once),
    with `events` fired, then stops it (which writes the state)."""
    state = NotifyState(state_path(store))
    notifier = Notifier(config, state, clock=clock, gather_s=0.0)
    engines = {e.name: e.host for e in config.engines}
    hosts = [h.name for h in config.hosts]
    for event in events:
        alert = from_event(event, engines, hosts)
        notifier.alerts[alert.key] = alert
        notifier._dirty.add(alert.key)
    await notifier.start()
    done = wait or (lambda n: all(r.sent or r.failed for r in n.receivers))
    try:
        for _ in range(200):
            if done(notifier):
                break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError("the notifier did not send or fail in 10 s")
    finally:
        await notifier.stop()
        state.close()
    return notifier
