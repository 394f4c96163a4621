"""The demo pool and the recorder as subprocesses, as an operator runs them: `poolconsole demo --serve-only`
(its hosts.toml once written) and `poolconsole record` (once it says it records)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@contextmanager
def served_demo(folder: Path, seed: int = 7) -> Iterator[Path]:
    """The demo pool's hosts.toml, written once the pool answers; the pool is stopped with SIGINT after."""
    config = folder / "demo.toml"
    proc = subprocess.Popen(
        [sys.executable, "-m", "poolconsole", "demo", "--serve-only", "--config-out", str(config), "--seed", str(seed)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 120
        while not config.is_file():
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else "demo pool died"
            assert time.monotonic() < deadline, "the demo pool did not come up"
            time.sleep(0.2)
        yield config
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def start_record(config: Path, store: Path) -> tuple[subprocess.Popen[str], str]:
    """`poolconsole record` on `config` into `store`, and its first line ("recording ...")."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "poolconsole", "record", "--config", str(config), "--store", str(store)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    first = proc.stdout.readline()
    assert first.startswith("recording "), first + (proc.stderr.read() if proc.stderr else "")
    return proc, first
