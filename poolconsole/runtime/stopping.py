"""What stops a headless command (`record`, `exporter`, the demo's pool): SIGINT (Ctrl+C), SIGTERM (`kill`, a
service manager's stop) and SIGHUP (its terminal closed), each a clean stop: the store flushed and closed, the
demo's throwaway hosts.toml and SSH key removed. Without SIGHUP a closed terminal ended them where they
stood. The console quits on the same signals through its app (ui/launch.py)."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
from collections.abc import Iterator

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def stop_on_signals(stop: asyncio.Event) -> Iterator[None]:
    """While inside, each of STOP_SIGNALS sets `stop` (in the main thread only: a loop in another thread
    cannot take signals, and its caller sets `stop` itself)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    loop = asyncio.get_running_loop()
    for sig in STOP_SIGNALS:
        loop.add_signal_handler(sig, stop.set)
    try:
        yield
    finally:
        for sig in STOP_SIGNALS:
            with contextlib.suppress(ValueError, RuntimeError):
                loop.remove_signal_handler(sig)
