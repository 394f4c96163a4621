"""`poolconsole watch` (issue 37) on an engine served by a process the test stops and starts (the real vLLM
0.32 capture), with receivers the test runs on 127.0.0.1: a firing `down` for that engine reaches a webhook
(Alertmanager's format) and ntfy (its headers) and a resolved message follows when it is back; a receiver
that is down during the fault gets the page once back, and the failure is counted on /metrics; a restarted
watcher does not page again for what it sent and sends the resolve for what cleared while it was down; the
command says what it watches and where it notifies, and a token_env's value reaches only the
Authorization header, never its output."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from poolconsole.config import parse_config
from poolconsole.config.models import PoolConfig
from poolconsole.runtime.notifier import Notifier, state_path
from poolconsole.runtime.watch import Watching, watch
from tests.helpers.rawhttp import free_port
from tests.helpers.receivers import Receiver, until
from tests.helpers.tiny_engine import TinyEngine

ROOT = Path(__file__).resolve().parents[2]
ENGINE = "tiny-vllm"


def config_text(engine: TinyEngine, notify: str) -> str:
    return f"""
[settings]
poll_interval_s = 0.3
http_timeout_s = 1.0

[[engines]]
name = "{ENGINE}"
kind = "vllm"
url = "{engine.url}"
host = "box"

{notify}
"""


def notify(kind: str, url: str, extra: str = "") -> str:
    return f'[[notify]]\nkind = "{kind}"\nurl = "{url}"\n{extra}\n'


@pytest.fixture
def engine() -> Iterator[TinyEngine]:
    tiny = TinyEngine(free_port())
    tiny.start()
    yield tiny
    tiny.stop()


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    r = await Receiver().start()
    yield r
    await r.stop()


class Watcher:
    """`watch` in this process, as a task: started, ready, stopped."""

    def __init__(self, config: PoolConfig, store: Path, listen: tuple[str, int] | None = None) -> None:
        self.config = config
        self.store = store
        self.listen = listen
        self.stop = asyncio.Event()
        self.watching: Watching | None = None
        self.problems: list[str] = []
        self.task: asyncio.Task[Notifier] | None = None

    async def __aenter__(self) -> Watcher:
        def ready(w: Watching) -> None:
            self.watching = w

        self.task = asyncio.create_task(
            watch(self.config, self.store, self.stop, listen=self.listen, ready=ready,
                  on_problem=self.problems.append, gather_s=0.2, settle_gc=False)
        )  # fmt: skip
        await until(lambda: self.watching is not None or self.task is None or self.task.done(), 30, "the watcher")
        if self.task.done():
            self.task.result()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.stop.set()
        assert self.task is not None
        await asyncio.wait_for(self.task, 30)


def down_alert(doc: dict[str, Any]) -> dict[str, Any]:
    alerts: list[dict[str, Any]] = doc["alerts"]
    return next(a for a in alerts if a["labels"]["alertname"] == "down")


async def test_a_stopped_engine_pages_down_to_a_webhook_and_ntfy_and_its_return_resolves(
    engine: TinyEngine, receiver: Receiver, tmp_path: Path
) -> None:
    ntfy = await Receiver().start()
    try:
        text = config_text(engine, notify("webhook", f"{receiver.url}/hook") + notify("ntfy", f"{ntfy.url}/pool"))
        config = parse_config(text, "hosts.toml")
        async with Watcher(config, tmp_path / "history.sqlite3", ("127.0.0.1", 0)) as w:
            assert w.watching is not None and w.watching.metrics is not None
            await asyncio.sleep(1.0)  # a few polls of a healthy engine: nothing to say
            assert receiver.received == [] and ntfy.received == []
            engine.stop()
            await until(lambda: receiver.webhooks("firing", "down"), 30, "a firing down at the webhook")
            doc = receiver.webhooks("firing", "down")[0]
            assert doc["version"] == "4" and doc["receiver"] == "poolconsole"
            assert doc["groupKey"] == '{}:{alertname="down"}' and doc["commonLabels"]["alertname"] == "down"
            assert doc["externalURL"].startswith("http://127.0.0.1:")
            alert = down_alert(doc)
            assert alert["status"] == "firing"
            assert alert["labels"] == {"alertname": "down", "severity": "critical", "engine": ENGINE, "host": "box"}
            assert alert["annotations"]["summary"].startswith(f"{ENGINE}: down")
            assert alert["startsAt"].endswith("Z") and alert["endsAt"] == "0001-01-01T00:00:00Z"
            await until(lambda: ntfy.received, 30, "the ntfy message")
            message = ntfy.received[0]
            assert message.path == "/pool"
            assert message.headers["Priority"] == "5"
            assert message.headers["Title"] == f"[FIRING:1] down: {ENGINE}"
            assert message.headers["Tags"] == "rotating_light,down,critical"
            assert message.body.decode().startswith(f"{ENGINE}: down")

            engine.start()
            await until(lambda: receiver.webhooks("resolved", "down"), 30, "the resolve at the webhook")
            resolved = down_alert(receiver.webhooks("resolved", "down")[0])
            assert resolved["status"] == "resolved" and resolved["startsAt"] == alert["startsAt"]
            assert resolved["endsAt"] != "0001-01-01T00:00:00Z"
            await until(lambda: len(ntfy.received) >= 2, 30, "the ntfy resolve")
            assert ntfy.received[1].headers["Title"] == f"[RESOLVED] down: {ENGINE}"
            assert ntfy.received[1].headers["Priority"] == "3"
            assert len(receiver.webhooks("firing", "down")) == 1  # once, no repeat within repeat_s

            async with httpx.AsyncClient() as client:
                page = (await client.get(w.watching.metrics)).text
            assert 'poolconsole_notifications_sent_total{kind="webhook"} 2.0' in page
            assert 'poolconsole_notifications_failed_total{kind="ntfy"} 0.0' in page
            assert 'poolconsole_engine_up{engine="tiny-vllm"' in page  # the exporter's own, same runtime
    finally:
        await ntfy.stop()


async def test_a_receiver_down_during_the_fault_gets_the_page_once_back(engine: TinyEngine, tmp_path: Path) -> None:
    hook = Receiver()  # not started: down
    config = parse_config(config_text(engine, notify("webhook", f"{hook.url}/hook")), "hosts.toml")
    async with Watcher(config, tmp_path / "history.sqlite3", ("127.0.0.1", 0)) as w:
        engine.stop()
        await until(lambda: any("retrying" in p for p in w.problems), 30, "the failed send said")
        assert w.watching is not None and w.watching.metrics is not None
        async with httpx.AsyncClient() as client:
            page = (await client.get(w.watching.metrics)).text
        failed = [line for line in page.splitlines() if line.startswith("poolconsole_notifications_failed_total")]
        assert failed and float(failed[0].split()[-1]) >= 1, failed
        await hook.start()
        try:
            await until(lambda: hook.webhooks("firing", "down"), 60, "the page, once the receiver is back")
            assert any("delivered again" in p for p in w.problems)
        finally:
            await hook.stop()


async def test_a_restarted_watcher_does_not_page_again_and_resolves_what_cleared_while_it_was_down(
    engine: TinyEngine, receiver: Receiver, tmp_path: Path
) -> None:
    store = tmp_path / "history.sqlite3"
    config = parse_config(config_text(engine, notify("webhook", f"{receiver.url}/hook")), "hosts.toml")
    engine.stop()
    async with Watcher(config, store):
        await until(lambda: receiver.webhooks("firing", "down"), 30, "the first page")
    assert state_path(store).exists()

    first = _polled(store)
    async with Watcher(config, store) as second:  # still down: the page was sent, nothing new to say
        assert second.watching is not None and second.watching.still_firing == 1
        await until(lambda: _polled(store) >= first + 5, 30, "five polls of the down engine recorded")
    assert len(receiver.webhooks("firing", "down")) == 1, receiver.received

    engine.start()  # it comes back while no watcher runs
    async with Watcher(config, store):
        await until(lambda: receiver.webhooks("resolved", "down"), 30, "the resolve for what cleared meanwhile")
    assert len(receiver.webhooks("firing", "down")) == 1


def _polled(store: Path) -> int:
    """The polls the watchers have recorded (committed once a second)."""
    db = sqlite3.connect(store)
    try:
        return int(db.execute("SELECT count(*) FROM polls").fetchone()[0])
    finally:
        db.close()


def test_the_command_says_what_it_watches_keeps_the_token_out_of_its_output_and_stops_on_sigterm(
    engine: TinyEngine, tmp_path: Path
) -> None:
    secret = "s3cr3t-t0ken-value-9d7f"
    dead = free_port()  # a receiver that never answers: its failures are printed, without the token
    hook_port = free_port()
    hosts = tmp_path / "hosts.toml"
    hosts.write_text(
        config_text(
            engine,
            notify("webhook", f"http://127.0.0.1:{hook_port}/hook", 'token_env = "POOL_HOOK_TOKEN"')
            + notify("ntfy", f"http://127.0.0.1:{dead}/pool", 'token_env = "POOL_HOOK_TOKEN"\nmin_severity = "info"'),
        )
    )
    receiver = Receiver(hook_port)
    loop = asyncio.new_event_loop()
    loop.run_until_complete(receiver.start())
    env = {**os.environ, "POOL_HOOK_TOKEN": secret}
    store = tmp_path / "h.sqlite3"
    argv = [sys.executable, "-m", "poolconsole", "watch", "--config", str(hosts), "--store", str(store)]
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        engine.stop()

        async def paged() -> None:
            await until(lambda: receiver.webhooks("firing", "down"), 60, "the page from the command")

        loop.run_until_complete(paged())
        assert receiver.received[0].headers["Authorization"] == f"Bearer {secret}"
        loop.run_until_complete(asyncio.sleep(1.5))  # the dead receiver's failure is said
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        loop.run_until_complete(receiver.stop())
        loop.close()
    stdout, stderr = out.decode(), err.decode()
    assert proc.returncode == 0, stderr
    assert f"watching 1 engine(s) and 0 host(s) of {hosts}" in stdout
    assert f"recording into {store}" in stdout
    said = f"webhook http://127.0.0.1:{hook_port}/hook (warning and above, bearer token from $POOL_HOOK_TOKEN)"
    assert said in stdout
    assert f"ntfy http://127.0.0.1:{dead}/pool (info and above" in stdout
    assert "retrying with backoff" in stderr, stderr
    for text in (stdout, stderr, state_path(store).read_bytes().decode(errors="replace")):
        assert secret not in text
    assert secret not in " ".join(argv)
