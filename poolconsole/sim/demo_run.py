"""`poolconsole demo`'s ways to run the simulated pool: alone until a signal (`--serve-only`), or on its own
event loop in a thread beside the console; where its throwaway hosts.toml goes."""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

from poolconsole.sim.demo import SimPool
from poolconsole.sim.demo_config import DEMO_KEY_ENV
from poolconsole.sim.demo_files import prune_ended


def write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


async def _serve(
    args: argparse.Namespace, ready: Callable[[Path | None], None] | None = None, stop: asyncio.Event | None = None
) -> int:
    """Run the pool until `stop` is set; `ready(config_path)` once every target answers."""
    sim = SimPool(args.scenario, args.nodes, args.seed)
    stop = stop or asyncio.Event()
    config_path = Path(args.config_out) if args.config_out else None
    keys_dir = config_path.with_name(config_path.name + ".ssh") if config_path is not None else None
    try:
        await sim.start(keys_dir)
        await sim.wait_ready()
        if config_path is not None:
            write_atomically(config_path, sim.config_toml())
        if ready is not None:
            ready(config_path)
        await stop.wait()
        return 0
    finally:
        await sim.stop()
        if config_path is not None and config_path == demo_config_path():
            # its own hosts.toml and SSH keys name ports that are gone now; the audit log and the smoke
            # runs beside them stay (`poolconsole audit` points at the newest)
            config_path.unlink(missing_ok=True)
            if keys_dir is not None:
                shutil.rmtree(keys_dir, ignore_errors=True)


def serve_only(args: argparse.Namespace, stopping: Callable[[asyncio.Event], AbstractContextManager[None]]) -> int:
    """The pool alone until a stop: `stopping(stop)` is the caller's (the command's signals: SIGINT, SIGTERM,
    SIGHUP, each a clean stop that removes its throwaway hosts.toml and SSH key)."""
    if args.config_out is None:
        args.config_out = str(demo_config_path())

    def ready(path: Path | None) -> None:
        print(f"simulated pool serving on 127.0.0.1; its config is {path}; Ctrl-C stops it", flush=True)
        if args.scenario == "oom":
            key = os.environ.get(DEMO_KEY_ENV, "")
            print(f"its engines and gateway want a key: export {DEMO_KEY_ENV}={key}", flush=True)

    async def run() -> int:
        stop = asyncio.Event()
        with stopping(stop):
            return await _serve(args, ready, stop)

    return asyncio.run(run())


class BackgroundPool:
    """The simulated pool on its own event loop in a thread, so the console's loop stays its own."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.loop = asyncio.new_event_loop()
        self.stop_event: asyncio.Event | None = None
        self.ready = threading.Event()
        self.config_path: Path | None = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="sim-pool", daemon=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)

        async def main() -> None:
            self.stop_event = asyncio.Event()

            def ready(path: Path | None) -> None:
                self.config_path = path
                self.ready.set()

            await _serve(self.args, ready, self.stop_event)

        try:
            self.loop.run_until_complete(main())
        except BaseException as exc:
            self.error = exc
            self.ready.set()

    def __enter__(self) -> Path:
        self.thread.start()
        self.ready.wait(60)
        if self.error is not None or self.config_path is None:
            raise RuntimeError(f"the simulated pool did not start: {self.error}")
        return self.config_path

    def __exit__(self, *exc: object) -> None:
        if self.stop_event is not None:
            self.loop.call_soon_threadsafe(self.stop_event.set)
        self.thread.join(15)


def demo_config_path() -> Path:
    """Where `poolconsole demo` writes the simulated pool's hosts.toml when no --config-out is given."""
    import warnings

    from platformdirs import user_runtime_path

    with warnings.catch_warnings():
        # without $XDG_RUNTIME_DIR (a plain root shell) platformdirs warns, on the terminal the console
        # then draws over, before falling back to its own checked directory: that fallback is fine here
        warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR")
        runtime = user_runtime_path("poolconsole", ensure_exists=True)
    prune_ended(runtime)
    return runtime / f"demo-{os.getpid()}.toml"


def latest_demo_audit() -> Path | None:
    """The newest demo console's audit log (where `poolconsole audit` points a user who tried the demo)."""
    written: list[tuple[float, Path]] = []
    for log in demo_config_path().parent.glob("demo-*.audit.sqlite3"):
        try:
            written.append((log.stat().st_mtime, log))
        except OSError:  # removed meanwhile
            continue
    return max(written)[1] if written else None
