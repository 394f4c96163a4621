"""SIGTERM quits the console as `q` does (ui.launch.quit_on_sigterm): run as an operator runs it, in a
terminal (a pty here), `kill PID` gives the terminal back, closes the history store and exits 0; so does
`poolconsole replay`. Without it the process died where it stood: alternate screen and mouse reporting left
on in the operator's shell, the store's write-ahead log left for the next opener to recover."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import signal
import sqlite3
import struct
import sys
import termios
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LEAVE_ALTERNATE_SCREEN = b"\x1b[?1049l"
MOUSE_OFF = b"\x1b[?1000l"


ESCAPE = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]")


def _read(fd: int, seconds: float) -> tuple[bytes, bool]:
    """What the pty gives within `seconds`, and whether it closed (the child exited) meanwhile."""
    out = b""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.1)
        if not ready:
            continue
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # EIO: the child side closed
            return out, True
        if not chunk:
            return out, True
        out += chunk
    return out, False


def _exit_code(pid: int, seconds: float) -> int | None:
    """The child's exit code once it exits within `seconds`, else None."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.05)
    return None


def _terminated(
    args: list[str], env: dict[str, str], ready: Path, sig: signal.Signals = signal.SIGTERM, module: str = "-m"
) -> tuple[int | None, bytes, bytes]:
    """`python -m poolconsole ARGS` on a 120x30 pty, sent SIGTERM 2.5 s after it drew a frame that names the
    engine and `ready` exists: its exit code (None: still running 30 s later, then killed), what it drew
    before and what it wrote after the signal."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: as `poolconsole ARGS` in a terminal
        program = ["-m", "poolconsole"] if module == "-m" else [module]  # or a script that runs it
        os.execve(sys.executable, [sys.executable, *program, *args], env)
    code: int | None = None
    try:
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 120, 0, 0))
        shown, closed = b"", False
        deadline = time.monotonic() + 90  # a loaded machine starts it slowly
        while (
            time.monotonic() < deadline and not closed and not (b"eng-a" in ESCAPE.sub(b"", shown) and ready.exists())
        ):
            chunk, closed = _read(fd, 0.3)
            shown += chunk
        assert b"eng-a" in ESCAPE.sub(b"", shown) and ready.exists(), shown[-2000:]
        chunk, closed = _read(fd, 2.5)  # a few polls recorded (the console) or replayed
        shown += chunk
        assert not closed and LEAVE_ALTERNATE_SCREEN not in shown, shown[-2000:]
        os.kill(pid, sig)
        after, _ = _read(fd, 30)
        code = _exit_code(pid, 30)
    finally:
        if code is None:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        os.close(fd)
    return code, shown, after


def test_sigterm_gives_the_terminal_back_and_closes_the_store(tmp_path: Path) -> None:
    config = tmp_path / "hosts.toml"
    config.write_text(
        '[settings]\npoll_interval_s = 1.0\n\n[[engines]]\nname = "eng-a"\nkind = "vllm"\nurl = "http://127.0.0.1:9"\n'
    )
    env = {k: v for k, v in os.environ.items() if k != "POOLCONSOLE_CONFIG"}
    env.update({f"XDG_{kind}_HOME": str(tmp_path / kind.lower()) for kind in ("CONFIG", "DATA", "STATE", "CACHE")})
    env.update(HOME=str(tmp_path / "home"), TERM="xterm-256color", PYTHONPATH=str(ROOT))
    store = tmp_path / "data" / "poolconsole" / "history.sqlite3"

    code, shown, after = _terminated(["--config", str(config)], env, store)
    assert code == 0, after[-2000:]
    assert LEAVE_ALTERNATE_SCREEN in after and MOUSE_OFF in after
    assert b"Traceback" not in shown + after
    assert not Path(f"{store}-wal").exists(), "the store was not closed: its write-ahead log is left"
    with sqlite3.connect(store) as db:
        (polls,) = db.execute("SELECT count(*) FROM polls").fetchone()
    assert polls >= 2  # the engine's polls, the last ones included

    code, shown, after = _terminated(["replay", "--store", str(store)], env, store)
    assert code == 0, after[-2000:]
    assert LEAVE_ALTERNATE_SCREEN in after and MOUSE_OFF in after
    assert b"Traceback" not in shown + after


def test_closing_the_terminal_quits_the_demo_and_removes_its_keys(tmp_path: Path) -> None:
    """The operator closes the terminal window (or the SSH session drops): the kernel sends SIGHUP. The demo
    console quits as `q` does: its hosts.toml and throwaway SSH keys go, its history store is closed. Before,
    SIGHUP killed it where it stood and left the private key and the store's write-ahead log behind."""
    env = {k: v for k, v in os.environ.items() if k != "POOLCONSOLE_CONFIG"}
    env.update({f"XDG_{kind}_HOME": str(tmp_path / kind.lower()) for kind in ("CONFIG", "DATA", "STATE", "CACHE")})
    env.update(XDG_RUNTIME_DIR=str(tmp_path / "run"), HOME=str(tmp_path / "home"), TERM="xterm-256color")
    env["PYTHONPATH"] = str(ROOT)
    (tmp_path / "run").mkdir(mode=0o700)
    runtime = tmp_path / "run" / "poolconsole"
    pid, fd = pty.fork()
    if pid == 0:
        os.execve(sys.executable, [sys.executable, "-m", "poolconsole", "demo"], env)
    code: int | None = None
    try:
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 120, 0, 0))
        shown, closed = b"", False
        deadline = time.monotonic() + 120  # the demo's pool starts first: slow on a loaded machine
        while time.monotonic() < deadline and not closed and b"qwen3-next-80b" not in ESCAPE.sub(b"", shown):
            chunk, closed = _read(fd, 0.3)
            shown += chunk
        assert b"qwen3-next-80b" in ESCAPE.sub(b"", shown), shown[-2000:]
        chunk, closed = _read(fd, 2.5)  # polls recorded into the demo's history store
        assert not closed
        keys = list(runtime.glob("demo-*.toml.ssh/id_ed25519"))
        assert len(keys) == 1 and list(runtime.glob("demo-*.toml"))  # what the demo wrote, while it runs
        os.close(fd)  # the terminal goes away: the session's foreground process gets SIGHUP
        fd = -1
        code = _exit_code(pid, 60)
    finally:
        if code is None:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        if fd >= 0:
            os.close(fd)
    assert code == 0
    assert not list(runtime.glob("demo-*.toml")) and not list(runtime.glob("demo-*.toml.ssh")), list(runtime.iterdir())
    (history,) = runtime.glob("demo-*.history.sqlite3")
    assert not Path(f"{history}-wal").exists(), "the demo's history store was not closed"


HANGING = """
import sys
from poolconsole.ui import launch
from poolconsole.ui.app import PoolApp
launch.QUIT_DEADLINE_S = 1.0
PoolApp.quit_soon = lambda self: None  # a shutdown that never finishes, as Textual's can with the terminal gone
from poolconsole.__main__ import main
sys.argv = ["poolconsole", "--config", sys.argv[1]]
raise SystemExit(main())
"""


def test_a_shutdown_that_never_finishes_still_ends_the_process(tmp_path: Path) -> None:
    """With its terminal gone, Textual's shutdown can wait for ever on its output thread's full queue (a
    console killed with its tmux server 1.0-1.3 s after launch stayed alive, holding the history store's
    lock). SIGHUP ends the process by ui.launch.QUIT_DEADLINE_S whatever the shutdown does, with 128 + 1."""
    config = tmp_path / "hosts.toml"
    config.write_text(
        '[settings]\npoll_interval_s = 1.0\n\n[[engines]]\nname = "eng-a"\nkind = "vllm"\nurl = "http://127.0.0.1:9"\n'
    )
    script = tmp_path / "hanging.py"
    script.write_text(HANGING)
    env = {k: v for k, v in os.environ.items() if k != "POOLCONSOLE_CONFIG"}
    env.update({f"XDG_{kind}_HOME": str(tmp_path / kind.lower()) for kind in ("CONFIG", "DATA", "STATE", "CACHE")})
    env.update(HOME=str(tmp_path / "home"), TERM="xterm-256color", PYTHONPATH=str(ROOT))
    code, _, after = _terminated([str(config)], env, config, signal.SIGHUP, module=str(script))
    assert code == 128 + signal.SIGHUP, after[-2000:]
