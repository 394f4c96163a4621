"""The alert log shows the pager's side (issue 37 item 7): where the watcher sent an alert and when, and a
receiver that failed, read from the watcher's state file beside the history store; `Z` silences the selected
alert for a chosen time (picker, confirmation, audit), locally where no Alertmanager is configured (the
watcher, driven here with a fake clock, holds it back until the silence ends), else in a real Alertmanager."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from textual.pilot import Pilot
from textual.widgets import Static

from poolconsole.config import parse_config
from poolconsole.model.alerts import AlertEvent
from poolconsole.model.notify import from_event
from poolconsole.ops import audit
from poolconsole.runtime.notifier import Notifier, NotifyState
from poolconsole.runtime.pager import hms, read_pager, state_path
from poolconsole.ui.app import PoolApp
from poolconsole.ui.screens.action import ConfirmAction, ProfilePicker
from poolconsole.ui.screens.others import AlertsScreen
from tests.helpers import uipool
from tests.helpers.pager import page
from tests.helpers.rawhttp import free_port
from tests.helpers.receivers import Receiver, until
from tests.integration.test_watch_alertmanager import alertmanager  # noqa: F401 - the fixture
from tests.ui.test_every_screen import closed_port_config

ENGINE = "gemma3-27b-nvfp4"
HOST = "duo5090"


@pytest.fixture
async def hook() -> AsyncIterator[Receiver]:
    r = await Receiver().start()
    yield r
    await r.stop()


def console(tmp_path: Path, notify: str, read_only: bool = False) -> PoolApp:
    config = parse_config(closed_port_config() + "\n" + notify, "hosts.toml")
    app = PoolApp(config, live=False, clock=uipool.clock, theme_state=tmp_path / "ui.json", read_only=read_only)
    app.audit_path = tmp_path / "audit.db"
    app.store_path = tmp_path / "history.sqlite3"
    app.alerts._set(ENGINE, "down", True, "no answer from /health", uipool.T0, "")
    return app


async def shown(pilot: Pilot[None], app: PoolApp, text: str) -> str:
    for _ in range(100):
        await pilot.pause(0.05)
        said = " ".join(
            str(app.screen.query_one(f"#{w}", Static).render()) for w in ("alert-message", "alerts-summary")
        )
        if text in said:
            return said
    raise AssertionError(f"{text!r} not shown: {said}")


async def test_the_alert_log_says_where_the_watcher_sent_it_when_and_what_failed(
    tmp_path: Path, hook: Receiver
) -> None:
    dead = free_port()
    notify = f'[[notify]]\nkind = "webhook"\nurl = "{hook.url}/hook"\n[[notify]]\nkind = "ntfy"\nurl = "http://127.0.0.1:{dead}/t"\n'
    app = console(tmp_path, notify)
    event = AlertEvent(uipool.T0, ENGINE, "down", True, "no answer from /health")
    notifier = await page(app.config, tmp_path / "history.sqlite3", [event])
    sent_at = next(iter(read_pager(tmp_path / "history.sqlite3").alerts.values())).sent  # type: ignore[union-attr]
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("a")
        await pilot.pause()
        assert isinstance(app.screen, AlertsScreen)
        said = await shown(pilot, app, "sent to webhook")
        at = hms(sent_at[notifier.receivers[0].id])
        assert f"sent to webhook http://127.0.0.1:{hook.port}/hook at {at}" in said
        assert f"failed to reach ntfy http://127.0.0.1:{dead}/t at " in said and "ClientConnectorError" in said
        assert "FAILED" in str(app.screen.query_one("#alert-log").get_row_at(0)[3])  # type: ignore[attr-defined]


async def test_without_a_watcher_the_alert_log_says_so(tmp_path: Path) -> None:
    app = console(tmp_path, "")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("a")
        await shown(pilot, app, "no watcher has paged from this store")
    assert not state_path(tmp_path / "history.sqlite3").exists()  # read-only: nothing created


async def silence_for_an_hour(pilot: Pilot[None], app: PoolApp) -> ConfirmAction:
    await pilot.press("a")
    await pilot.pause()
    await pilot.press("Z")
    await pilot.pause()
    assert isinstance(app.screen, ProfilePicker), app.screen
    await pilot.press("down", "enter")  # 15m, 1h: 1h
    await pilot.pause()
    assert isinstance(app.screen, ConfirmAction), app.screen
    return app.screen


async def test_a_local_silence_is_confirmed_audited_and_honoured_by_the_watcher(tmp_path: Path, hook: Receiver) -> None:
    app = console(tmp_path, f'[[notify]]\nkind = "webhook"\nurl = "{hook.url}/hook"\n')
    store = tmp_path / "history.sqlite3"
    async with app.run_test(size=(120, 40)) as pilot:
        dialog = await silence_for_an_hour(pilot, app)
        assert dialog.title_text == "Silence down on gemma3-27b-nvfp4 for 1h?"
        words = " ".join(dialog.lines.plain.split())
        assert f"A local silence written to {state_path(store)}" in words and "Audited as: silence" in words
        await pilot.press("y")
        for _ in range(100):
            await pilot.pause(0.05)
            if audit.entries(app.audit_path, 5):  # type: ignore[arg-type]
                break
        await shown(pilot, app, "silenced until")
    assert app.audit_path is not None
    (entry,) = audit.entries(app.audit_path, 5)
    assert entry.action == "silence" and entry.target == f"{ENGINE}/down" and entry.outcome == "ok"
    assert entry.detail.startswith("for 1h until ") and "local" in entry.detail
    view = read_pager(store)
    assert view is not None
    (silence,) = view.silences
    assert silence.matchers == {"alertname": "down", "engine": ENGINE, "host": HOST}
    assert silence.ends_at - silence.starts_at == 3600.0

    # the watcher on this store, its clock faked: nothing sent while the silence lasts, the page once it ends
    clock = [silence.starts_at + 60]
    state = NotifyState(state_path(store))
    notifier = Notifier(app.config, state, clock=lambda: clock[0], gather_s=0.0)
    event = AlertEvent(clock[0], ENGINE, "down", True, "no answer from /health")
    alert = from_event(event, {e.name: e.host for e in app.config.engines}, [h.name for h in app.config.hosts])
    notifier.alerts[alert.key] = alert
    await notifier.start()
    try:
        await asyncio.sleep(1.0)
        assert hook.received == [], "a silenced alert was sent"
        clock[0] = silence.ends_at + 1
        notifier._changed()
        await until(lambda: hook.webhooks("firing", "down"), 10, "the page once the silence ended")
    finally:
        await notifier.stop()
        state.close()


async def test_read_only_refuses_to_silence(tmp_path: Path) -> None:
    app = console(tmp_path, "", read_only=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("a")
        await pilot.pause()
        await pilot.press("Z")
        await pilot.pause()
        assert isinstance(app.screen, AlertsScreen)  # no picker
    assert not state_path(tmp_path / "history.sqlite3").exists()


async def test_with_alertmanager_configured_the_silence_is_alertmanagers(
    tmp_path: Path,
    alertmanager: str,  # noqa: F811 - the fixture imported above
) -> None:
    app = console(tmp_path, f'[[notify]]\nkind = "alertmanager"\nurl = "{alertmanager}"\n')
    async with app.run_test(size=(120, 40)) as pilot:
        await silence_for_an_hour(pilot, app)
        await pilot.press("y")
        await shown(pilot, app, "silenced until")
    async with httpx.AsyncClient() as client:
        found = (await client.get(f"{alertmanager}/api/v2/silences")).json()
    (silence,) = [s for s in found if s["status"]["state"] == "active"]
    assert {m["name"]: m["value"] for m in silence["matchers"]} == {"alertname": "down", "engine": ENGINE, "host": HOST}
    assert silence["createdBy"] and silence["comment"] == "silenced from poolconsole for 1h"
    assert app.audit_path is not None
    (entry,) = audit.entries(app.audit_path, 5)
    assert entry.outcome == "ok" and f"alertmanager {alertmanager} id {silence['id']}" in entry.detail
