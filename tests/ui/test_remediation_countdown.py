"""The alert log shows what the watcher is about to do (issue 38, item 3): a row on the remediation board in the
watcher's state file reads "auto-restart of X in N s (2 of 3 left this hour)" above the log, counting each
second; `X` (the registry's cancel_auto) asks for a confirmation showing the plan, then writes the
cancellation the watcher reads and audits it; --read-only refuses it and writes nothing."""

from __future__ import annotations

import re
import time
from pathlib import Path

from textual.pilot import Pilot
from textual.widgets import Static

from poolconsole.ops import audit
from poolconsole.runtime.pager import state_path
from poolconsole.runtime.remediation_board import Board, Pending
from poolconsole.ui.app import PoolApp
from poolconsole.ui.screens.action import ConfirmAction
from poolconsole.ui.screens.others import AlertsScreen
from tests.ui.test_alert_log_pager import ENGINE, console

LINE = re.compile(rf"auto-restart of {ENGINE} in (\d+) s \(2 of 3 left this hour\)")


def board(tmp_path: Path) -> tuple[Board, Pending]:
    """The watcher's board with one case 40 s from acting (the console counts down from the wall clock)."""
    now = time.time()
    row = Pending(ENGINE, "down", "restart", now + 40.0, 2, 3, now - 20.0)
    shown = Board(state_path(tmp_path / "history.sqlite3"))
    shown.show([row])
    return shown, row


async def seconds_shown(pilot: Pilot[None], app: PoolApp, below: int = 10**9) -> int:
    """The countdown's seconds once it shows fewer than `below` (each read within 2.5 s)."""
    said = ""
    for _ in range(50):
        await pilot.pause(0.05)
        said = str(app.screen.query_one("#alerts-summary", Static).render())
        found = LINE.search(said)
        if found and int(found[1]) < below:
            return int(found[1])
    raise AssertionError(f"no countdown below {below} s: {said!r}")


async def test_the_countdown_shows_and_x_confirms_then_writes_the_cancellation(tmp_path: Path) -> None:
    shown, row = board(tmp_path)
    app = console(tmp_path, "")
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.press("a")
            first = await seconds_shown(pilot, app)
            assert 35 <= first <= 40
            assert "(X cancels)" in str(app.screen.query_one("#alerts-summary", Static).render())
            await seconds_shown(pilot, app, below=first)  # refreshed each second while it waits
            await pilot.press("X")
            await pilot.pause()
            assert isinstance(app.screen, ConfirmAction), app.screen
            assert app.screen.title_text == f"Cancel the automatic restart of {ENGINE}?"
            words = " ".join(app.screen.lines.plain.split())
            assert f"A cancellation is written to {state_path(tmp_path / 'history.sqlite3')}" in words
            assert "Audited as: cancel_remediation" in words
            assert shown.cancels(0.0) == []  # nothing before the yes
            await pilot.press("y")
            for _ in range(100):
                await pilot.pause(0.05)
                if shown.cancels(0.0):
                    break
        (cancel,) = shown.cancels(0.0)
        assert (cancel.engine, cancel.rule, cancel.opened_at) == (ENGINE, "down", row.opened_at)
    finally:
        shown.close()
    assert app.audit_path is not None
    (entry,) = audit.entries(app.audit_path, 5)
    assert (entry.action, entry.target, entry.outcome) == ("cancel_remediation", f"{ENGINE}/down", "ok")


async def test_no_after_x_writes_nothing(tmp_path: Path) -> None:
    shown, _ = board(tmp_path)
    app = console(tmp_path, "")
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.press("a")
            await seconds_shown(pilot, app)
            await pilot.press("X")
            await pilot.pause()
            assert isinstance(app.screen, ConfirmAction)
            await pilot.press("n")
            await pilot.pause(0.3)
        assert shown.cancels(0.0) == []
    finally:
        shown.close()


async def test_read_only_shows_the_countdown_and_refuses_to_cancel(tmp_path: Path) -> None:
    shown, _ = board(tmp_path)
    app = console(tmp_path, "", read_only=True)
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.press("a")
            await seconds_shown(pilot, app)
            assert "cancels" not in str(app.screen.query_one("#alerts-summary", Static).render())
            await pilot.press("X")
            await pilot.pause()
            assert isinstance(app.screen, AlertsScreen)  # no confirmation
        assert shown.cancels(0.0) == [] and app.audit_path is not None and not app.audit_path.exists()
    finally:
        shown.close()
