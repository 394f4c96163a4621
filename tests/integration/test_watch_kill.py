"""`kill -9` of `poolconsole watch` loses no resolve (issue 37): the command pages `down` for an engine the
test stops, is SIGKILLed once its state file holds the send, the engine comes back while no watcher runs,
and a watcher restarted on the same store sends exactly one resolve and no second page. The state file is
written as the alerts change (SQLite, WAL), so what a killed watcher had recorded is what the next one
reads; a kill between a send and its record would repeat the page (at least once), never drop a resolve."""

from __future__ import annotations

import asyncio
import json
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from poolconsole.runtime.notifier import state_path
from tests.helpers.rawhttp import free_port
from tests.helpers.receivers import Receiver, until
from tests.helpers.tiny_engine import TinyEngine
from tests.integration.test_watch import ROOT, config_text, notify


@pytest.fixture
def engine() -> Iterator[TinyEngine]:
    tiny = TinyEngine(free_port())
    tiny.start()
    yield tiny
    tiny.stop()


def _sent_down(store: Path) -> bool:
    """The state file records the firing `down` as sent to a receiver (what a restarted watcher reads)."""
    path = state_path(store)
    if not path.exists():
        return False
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
    try:
        rows = db.execute("SELECT sent FROM alerts WHERE rule = 'down' AND ends_at IS NULL").fetchall()
    except sqlite3.OperationalError:
        return False
    finally:
        db.close()
    return any(json.loads(sent) for (sent,) in rows)


def _watcher(hosts: Path, store: Path) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "poolconsole", "watch", "--config", str(hosts), "--store", str(store)]
    return subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_a_killed_watcher_loses_no_resolve_and_pages_no_twice(engine: TinyEngine, tmp_path: Path) -> None:
    loop = asyncio.new_event_loop()
    receiver = Receiver()
    loop.run_until_complete(receiver.start())
    hosts = tmp_path / "hosts.toml"
    hosts.write_text(config_text(engine, notify("webhook", f"{receiver.url}/hook")))
    store = tmp_path / "history.sqlite3"
    procs: list[subprocess.Popen[bytes]] = []
    try:
        first = _watcher(hosts, store)
        procs.append(first)
        engine.stop()
        loop.run_until_complete(until(lambda: receiver.webhooks("firing", "down"), 60, "the page"))
        loop.run_until_complete(until(lambda: _sent_down(store), 30, "the send recorded in the state file"))
        first.send_signal(signal.SIGKILL)
        first.communicate(timeout=30)
        assert first.returncode == -signal.SIGKILL

        engine.start()  # it comes back while no watcher runs
        second = _watcher(hosts, store)
        procs.append(second)
        loop.run_until_complete(until(lambda: receiver.webhooks("resolved", "down"), 60, "the resolve"))
        loop.run_until_complete(asyncio.sleep(3.0))  # ten more polls: nothing else to say
        second.send_signal(signal.SIGTERM)
        out, err = second.communicate(timeout=30)
        assert second.returncode == 0, err.decode()
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        loop.run_until_complete(receiver.stop())
        loop.close()
    assert len(receiver.webhooks("firing", "down")) == 1, receiver.received
    assert len(receiver.webhooks("resolved", "down")) == 1, receiver.received
    assert "1 alert(s) still firing from the last run, not paged again" in out.decode()
    assert "Traceback" not in err.decode() and "Warning" not in err.decode(), err.decode()
