"""The pager's side as the console reads it (runtime.pager): the watcher's state file, written here by the
Notifier itself, read read-only: where each alert was sent and when, the last failure of a receiver (time
and words), shown by kind and shown URL (never a token), absence, and an older file without the receivers
and silences tables. And the silences the watcher honours (fake clock)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from poolconsole.config import parse_config
from poolconsole.model.alerts import AlertEvent
from poolconsole.model.notify import Alert
from poolconsole.runtime.notifier import Notifier, NotifyState
from poolconsole.runtime.pager import ABSENT, add_silence, hms, new_silence, read_pager, state_path
from tests.helpers.pager import page
from tests.helpers.rawhttp import free_port
from tests.helpers.receivers import Receiver

T0 = 1_700_000_000.0


def config_text(hook: str, dead: str) -> str:
    return f"""
[[engines]]
name = "qwen"
kind = "vllm"
url = "http://127.0.0.1:9"
host = "box"

[[notify]]
kind = "webhook"
url = "{hook}"
token_env = "POOLCONSOLE_TEST_NTFY_TOKEN"

[[notify]]
kind = "ntfy"
url = "{dead}"
"""


async def test_the_state_says_where_each_alert_went_when_and_what_failed(tmp_path: Path, monkeypatch: object) -> None:
    import pytest

    assert isinstance(monkeypatch, pytest.MonkeyPatch)
    monkeypatch.setenv("POOLCONSOLE_TEST_NTFY_TOKEN", "s3cret-token")
    store = tmp_path / "history.sqlite3"
    assert read_pager(store) is None and not state_path(store).exists()  # absent: said, and not created
    assert ABSENT == "no watcher has paged from this store"
    hook = await Receiver().start()
    dead = free_port()
    try:
        config = parse_config(config_text(f"{hook.url}/hook", f"http://user:pw@127.0.0.1:{dead}/alerts"))
        fired = AlertEvent(T0, "qwen", "down", True, "no answer")
        notifier = await page(config, store, [fired])
    finally:
        await hook.stop()
    webhook, ntfy = notifier.receivers
    assert webhook.sent == 1 and ntfy.failed >= 1
    view = read_pager(store)
    assert view is not None and view.path == state_path(store)
    lines = view.lines("down", "qwen", T0)
    sent_at = view.alerts[("down", "qwen")].sent[webhook.id]
    assert f"sent to webhook http://127.0.0.1:{hook.port}/hook at {hms(sent_at)}" in lines, lines
    failed = [line for line in lines if line.startswith(f"failed to reach ntfy http://127.0.0.1:{dead}/alerts at ")]
    assert failed and "ClientConnectorError" in failed[0] and "retrying" in failed[0], lines
    assert any(f.startswith(f"ntfy http://127.0.0.1:{dead}/alerts: last failure at ") for f in view.failures())
    raw = state_path(store).read_bytes()
    assert b"s3cret-token" not in raw and b"user:pw" not in raw  # neither the token nor the URL's password


def test_an_older_state_file_reads_with_receivers_by_hash_and_no_silence(tmp_path: Path) -> None:
    store = tmp_path / "history.sqlite3"
    db = sqlite3.connect(state_path(store))
    db.execute(
        "CREATE TABLE alerts (rule TEXT NOT NULL, target TEXT NOT NULL, labels TEXT NOT NULL, message TEXT NOT "
        "NULL, starts_at REAL NOT NULL, ends_at REAL, cleared TEXT, sent TEXT NOT NULL, resolved_sent TEXT NOT "
        "NULL, PRIMARY KEY (rule, target))"
    )
    labels = {"alertname": "down", "severity": "critical", "engine": "qwen"}
    db.execute(
        "INSERT INTO alerts VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        ("down", "qwen", json.dumps(labels), "no answer", T0, None, None, json.dumps({"abc123": T0 + 1}), "[]"),
    )
    db.commit()
    db.close()
    view = read_pager(store)
    assert view is not None and view.silences == ()
    assert view.lines("down", "qwen", T0) == [f"sent to receiver abc123 at {hms(T0 + 1)}"]


def watcher(tmp_path: Path, clock: list[float]) -> tuple[Notifier, NotifyState]:
    config = parse_config(config_text("http://127.0.0.1:9/hook", "http://127.0.0.1:9/alerts"))
    state = NotifyState(state_path(tmp_path / "history.sqlite3"))
    return Notifier(config, state, clock=lambda: clock[0]), state


async def test_the_watcher_holds_a_silenced_alert_back_until_the_silence_ends(tmp_path: Path) -> None:
    clock = [T0]
    notifier, state = watcher(tmp_path, clock)
    matchers = {"alertname": "down", "engine": "qwen", "host": "box"}
    add_silence(tmp_path / "history.sqlite3", new_silence(matchers, T0, T0 + 3600, "op", "test"))
    await notifier.refresh_silences()
    labels = {"alertname": "down", "severity": "critical", "engine": "qwen", "host": "box"}
    alert = Alert("down", "qwen", labels, "no answer", T0 + 10)
    other = Alert("down", "llama", {**labels, "engine": "llama"}, "no answer", T0 + 10)
    notifier.alerts = {alert.key: alert, other.key: other}
    webhook = notifier.receivers[0]
    assert notifier.due(webhook, T0 + 20) == [other]  # the silenced one held back, the other not
    assert notifier._next_due(webhook, T0 + 20) <= 60.0
    clock[0] = T0 + 3601
    assert {a.key for a in notifier.due(webhook, clock[0])} == {
        other.key,
        alert.key,
    }  # still firing when it ends: sent then
    # cleared under the silence, never told it fired: no resolve; a receiver told it fired gets the resolve
    clock[0] = T0 + 100
    alert.ends_at = T0 + 50
    assert alert not in notifier.due(webhook, clock[0])
    alert.sent[webhook.id] = T0 + 5
    assert alert in notifier.due(webhook, clock[0])
    state.close()
