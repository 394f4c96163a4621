"""q as an operator presses it: on a screen opened from the overview it goes back (it had quit the whole
console from the detail, the audit or a finished action's progress); on the overview it quits, but while a
restart or rollover runs it asks first, since quitting stops the action where it stands: no rollback runs.
Quitting anyway leaves the action in the audit log as abandoned, with where it stood."""

from __future__ import annotations

import asyncio
import importlib
import inspect
import pkgutil
from pathlib import Path
from typing import cast

from textual.screen import ModalScreen, Screen
from textual.widgets import RichLog

from poolconsole.ops import audit
from poolconsole.sim.hosts import BROKEN_PROFILE
from poolconsole.ui import registry, screens
from poolconsole.ui.screens.action import ActionScreen, ConfirmAction
from poolconsole.ui.screens.overview import OverviewScreen
from tests.ui.test_console import demo_app, demo_pool, feed, pick_profile, select_row, settle, static_app


async def test_q_closes_a_screen_and_quits_from_the_overview(tmp_path: Path) -> None:
    app = static_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await feed(app)
        await settle(pilot, app)
        for key in ("enter", "L", "question_mark"):  # the detail, the audit log, the help
            await pilot.press(key)
            await pilot.pause()
            assert not isinstance(app.screen, OverviewScreen), key
            await pilot.press("q")
            await pilot.pause()
            assert app.is_running and isinstance(app.screen, OverviewScreen), key
        await pilot.press("q")
        await pilot.pause()
        assert not app.is_running


async def test_q_while_a_rollover_runs_asks_and_quitting_anyway_is_audited(tmp_path: Path) -> None:
    async with demo_pool(12, tmp_path / "keys") as pool:
        app = demo_app(pool, tmp_path)
        async with app.run_test(size=(160, 45)) as pilot:
            await select_row(pilot, app, "engine:qwen3-next-80b")
            await pick_profile(pilot, app, BROKEN_PROFILE)  # it fits, then never serves (refused: loading)
            assert isinstance(app.screen, ConfirmAction)
            await pilot.press("y")
            await pilot.pause()
            assert isinstance(app.screen, ActionScreen)
            progress = app.screen
            for _ in range(200):
                if any("waiting for" in line for line in progress.said):
                    break
                await asyncio.sleep(0.05)
            await pilot.press("q")  # the progress screen: back to the overview, the rollover runs on
            await pilot.pause()
            assert isinstance(app.screen, OverviewScreen) and progress.outcome is None
            await pilot.press("q")
            await pilot.pause()
            dialog = app.screen
            assert isinstance(dialog, ConfirmAction) and dialog.title_text == "An action is still running. Quit anyway?"
            assert f"running: rollover qwen3-next-80b -> {BROKEN_PROFILE}" in dialog.lines.plain
            await pilot.press("n")  # no: the console and the rollover go on
            await pilot.pause()
            assert app.is_running and isinstance(app.screen, OverviewScreen) and progress.outcome is None
            await pilot.press("q")
            await pilot.pause()
            await pilot.press("y")
            await settle(pilot, app)
        assert not app.is_running
        [entry] = audit.entries(app.audit_path)
        assert (entry.action, entry.outcome, entry.profile_to) == ("rollover", "abandoned", BROKEN_PROFILE)
        assert "no rollback ran (roll over to awq-4bit-tp4 to restore it)" in entry.detail
        assert audit.active_profile(app.audit_path, "qwen3-next-80b") == BROKEN_PROFILE


async def test_an_action_runs_on_with_its_screen_closed_and_shows_it_all_when_reopened(tmp_path: Path) -> None:
    """Escape from a restart's progress while it runs: the restart goes on to its outcome (its next progress
    line had found no screen to write to, and the action died there), and its screen holds every line."""
    async with demo_pool(12, tmp_path / "keys") as pool:
        app = demo_app(pool, tmp_path)
        async with app.run_test(size=(160, 45)) as pilot:
            await select_row(pilot, app, "engine:qwen3-30b-a3b")
            await pilot.press("R")
            await pilot.pause()
            await pilot.press("y")
            await pilot.pause()
            progress = app.screen
            assert isinstance(progress, ActionScreen) and progress.outcome is None
            await pilot.press("escape")
            await pilot.pause()
            assert isinstance(app.screen, OverviewScreen)
            for _ in range(160):
                if progress.outcome:
                    break
                await asyncio.sleep(0.25)
            assert progress.outcome == "ok", progress.said
            assert progress.said[-1].startswith("== ok: serving after ")
            assert [e.outcome for e in audit.entries(cast(Path, app.audit_path))] == ["ok"]
            app.push_screen(progress)  # opened again: every line said, the closed stretch included
            said, shown = " ".join(" ".join(progress.said).split()), ""
            for _ in range(40):  # composed again, then a RichLog draws what it is given once it knows its size
                await pilot.pause(0.05)
                for log in progress.query("#action-log").results(RichLog):
                    shown = " ".join(" ".join(strip.text for strip in log.lines).split())
                if shown == said:
                    break
            assert shown == said


def test_q_closes_every_screen_opened_from_the_overview() -> None:
    """Every full screen but the overview is one q closes (a new screen left out would quit on q again)."""
    modules = [importlib.import_module(f"{screens.__name__}.{m.name}") for m in pkgutil.iter_modules(screens.__path__)]
    full = {
        cls.__name__.removesuffix("Screen").lower()  # registry.screen_name, of the class
        for module in modules
        for _, cls in inspect.getmembers(module, inspect.isclass)
        if issubclass(cls, Screen) and not issubclass(cls, ModalScreen) and cls.__module__ == module.__name__
    }
    assert full - {"overview"} == set(registry.SUBSCREENS)
