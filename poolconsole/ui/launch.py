"""The console's start-up: the polls go out before the UI loads.

Importing Textual and the screens is the longest part of a launch (about 0.15 s of CPU on the 2-core build
machine), and the first poll waits on the engines. So the runtime starts first, on the event loop the app
will run in: the loop turns until its loops have connected and sent their first requests (until it goes
idle: `until_idle`), the UI modules are imported while the engines answer, and the app then takes over the started
runtime with what it told meanwhile (runtime.live.Backlog). The collector's policy starts after the UI
import, so what it loaded is frozen with the rest of start-up (runtime.live.GcPolicy). This module imports
no Textual at load."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from poolconsole.config.models import PoolConfig
from poolconsole.runtime.live import Backlog, LivePool
from poolconsole.runtime.store import HeldPolls

if TYPE_CHECKING:
    from poolconsole.ui.app import PoolApp

IDLE_S = 0.0001
"""A turn of the loop that took less than this ran nothing but the launcher's own wake-up (one that runs a
poll's step takes 0.2 ms or more on the 2-core build machine; an empty one 0.01 ms) ..."""
IDLE_TURNS = 3
"""... and this many in a row mean every loop waits on the network: on a LAN its first requests are out
(engines on loopback may have answered and been applied already); over a slow link its connections are
being made, and the requests go out once the UI has loaded."""
MAX_WAIT_S = 0.3
"""The UI loads after this long regardless (a large pool whose first poll keeps the loop busy)."""


async def until_idle(idle_s: float = IDLE_S, idle_turns: int = IDLE_TURNS, max_wait_s: float | None = None) -> int:
    """Turn the running loop until it goes idle, or for `max_wait_s` (MAX_WAIT_S); returns the turns taken.
    Measured at 32
    engines replaying vLLM (benchmarks/first_frame_bench.py's pool, in the peers harness's tmux pane): the
    first frame with data 39 ms sooner in the median of 30 interleaved pairs, sooner in 23 of them; importing
    the UI in a thread instead, with the loop running beside it, was no sooner (the two contend for the GIL)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + (MAX_WAIT_S if max_wait_s is None else max_wait_s)
    idle = turns = 0
    while idle < idle_turns and loop.time() < deadline:
        began = loop.time()
        await asyncio.sleep(0)
        turns += 1
        idle = idle + 1 if loop.time() - began < idle_s else 0
    return turns


def _load_app() -> type[PoolApp]:
    from poolconsole.ui.app import PoolApp

    return PoolApp


async def run_console(
    config: PoolConfig,
    *,
    read_only: bool,
    subtitle: str,
    hint: str | None = None,
    store: Path | None = None,
    stores: tuple[Path, Path] | None = None,
    headless: bool = False,
    load_app: Callable[[], type[PoolApp]] = _load_app,
) -> None:
    """The console on `config` until it quits: `store` the history store it records into, `stores` the audit
    log and smoke store its actions write (None: the user's). `load_app` imports the UI (a test's seam)."""
    runtime = LivePool(config)
    if store is not None:  # the polls applied before the app opens its history store are held for it
        runtime.recorder = HeldPolls()
    backlog = Backlog(runtime)
    runtime.start(settle_gc=False)
    app: PoolApp | None = None
    try:
        await until_idle()
        app_type = load_app()
        runtime.start_gc()
        app = app_type(config, read_only=read_only, subtitle=subtitle, hint=hint, store=store, started=backlog)
        if stores is not None:
            app.audit_path, app.smoke_db = stores
        await run_app(app, headless=headless)
    finally:  # the app stops both as it closes; this is for a launch that failed before or while it ran
        await runtime.stop()
        if app is not None:
            await app.history.close()


QUITTING = (signal.SIGTERM, signal.SIGHUP)
"""`kill`, `timeout` or a service manager's stop; the terminal closed (its window, an SSH session dropped)."""
QUIT_DEADLINE_S = 20.0
"""After SIGTERM or SIGHUP the process ends within this long even if the app's shutdown does not finish
(its own is at most LEAVE_S for the actions still running, then the store's last second). Why: with the
terminal gone, Textual's shutdown can block for ever: a console killed with its tmux server 1.0-1.3 s after
launch stayed alive, its loop thread waiting in the output thread's full queue (textual.drivers
._writer_thread, whose 30 writes nobody drains any more), holding the history store's lock with no terminal.
The store commits every second, so ending here loses what `kill -9` would: the last second's polls."""


def exit_after(deadline_s: float, code: int) -> threading.Timer:
    """End the process with `code` in `deadline_s` unless it has ended by then (a daemon timer: it does not
    keep a process alive that ended in time)."""
    timer = threading.Timer(deadline_s, os._exit, args=(code,))
    timer.daemon = True
    timer.start()
    return timer


async def run_app(app: PoolApp, *, headless: bool = False) -> None:
    """Run `app` until it quits; SIGTERM (`kill`, `timeout`, a service manager's stop) and SIGHUP (the
    terminal closed) quit it as `q` does: the terminal is given back (no alternate screen or mouse reporting
    left on in the operator's shell), the loops stop and the history store is closed with the last second's
    polls; the demo removes its hosts.toml and SSH keys. Without it the process died where it stood. A
    signal before the app runs (the launch's first half second) still ends the process at once: nothing is
    on screen yet and nothing written. Only where the loop can take signals (the main thread of a Unix
    process); what handled them before is put back."""
    loop = asyncio.get_running_loop()
    before = {sig: signal.getsignal(sig) for sig in QUITTING}
    deadlines: list[threading.Timer] = []

    def quit_by(sig: signal.Signals) -> None:
        """Quit as `q` does; the process ends with 128 + the signal's number if that has not finished by
        QUIT_DEADLINE_S."""
        deadlines.append(exit_after(QUIT_DEADLINE_S, 128 + sig))
        app.quit_soon()

    installed = []
    for sig in QUITTING:
        try:
            loop.add_signal_handler(sig, quit_by, sig)
            installed.append(sig)
        except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, or no Unix signals
            break
    try:
        await app.run_async(headless=headless)
    finally:
        for deadline in deadlines:  # the app ended in time: a process that goes on (a test's) is not ended
            deadline.cancel()
        for sig in installed:
            loop.remove_signal_handler(sig)
            if before[sig] is not None:  # None: set outside Python, left as the loop leaves it
                signal.signal(sig, before[sig])
