"""Every screen, every action of the registry from each, through its key and through the palette (Ctrl+P):
the console must never raise or exit. This is the walk a new operator does on first contact."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from textual.command import CommandPalette
from textual.pilot import Pilot
from textual.widgets import Input

from poolconsole.collect.ssh import SSHPool
from poolconsole.config import parse_config
from poolconsole.ui import registry
from poolconsole.ui.app import PoolApp
from poolconsole.ui.grid import PoolGrid
from poolconsole.ui.screens.action import AuditScreen, ConfirmAction, ProfilePicker
from poolconsole.ui.screens.detail import DetailScreen
from poolconsole.ui.screens.events import EventsScreen
from poolconsole.ui.screens.ledger import LedgerScreen
from poolconsole.ui.screens.logs import LogScreen
from poolconsole.ui.screens.others import AlertsScreen, GatewayScreen, HelpScreen
from poolconsole.ui.screens.overview import OverviewScreen
from poolconsole.ui.screens.security import SecurityScreen
from poolconsole.ui.screens.smoke import SmokeScreen
from tests.helpers import uipool
from tests.ui.test_ledger_screen import write_store


def closed_port_config() -> str:
    """The example pool with every engine URL and host address on 127.0.0.1 ports nothing listens on:
    actions that reach out (smoke, restart) fail fast, on loopback only."""
    text = (uipool.ROOT / "hosts.toml").read_text()
    text = re.sub(r'url = "http://[^"]+"', 'url = "http://127.0.0.1:9"', text)
    text = re.sub(r'address = "[^"]+"', 'address = "127.0.0.1"', text)
    return re.sub(r"(?m)^port = \d+$", "port = 9", text).replace('name = "tp4"', 'name = "tp4"\nport = 9', 1)


def app_for(tmp_path: Path) -> PoolApp:
    app = PoolApp(
        parse_config(closed_port_config(), "hosts.toml"),
        live=False,
        clock=uipool.clock,
        theme_state=tmp_path / "ui.json",
        subtitle="test pool",
    )
    app.audit_path = tmp_path / "audit.db"
    app.smoke_db = tmp_path / "smoke.db"
    return app


SCREENS: dict[str, tuple[tuple[str, ...], type]] = {
    "overview": ((), OverviewScreen),
    "detail": (("enter",), DetailScreen),
    "gateway": (("g",), GatewayScreen),
    "alerts": (("a",), AlertsScreen),
    "help": (("question_mark",), HelpScreen),
    "audit": (("L",), AuditScreen),
    "smoke": (("m",), SmokeScreen),
    "profile picker": (("P",), ProfilePicker),
    "confirmation": (("R",), ConfirmAction),
    "logs": (("l",), LogScreen),
    "security": (("S", "enter"), SecurityScreen),  # the picker's first choice: the full audit
    "ledger": (("T",), LedgerScreen),
    "events": (("E",), EventsScreen),
}


def with_ssh(app: PoolApp, tmp_path: Path) -> None:
    """What a live console has: SSH to the hosts (here closed ports), so the log view opens (and fails fast)."""
    settings = app.config.settings
    app.runtime.ssh = SSHPool(
        [h for h in app.config.hosts if not h.local], settings.ssh_timeout_s, settings.ssh_concurrency
    )


def with_store(app: PoolApp, tmp_path: Path) -> None:
    """A history store with two days in it, so the ledger has something to show."""
    app.store_path = tmp_path / "history.db"
    write_store(app.store_path)


SETUP = {"logs": with_ssh, "ledger": with_store}
"""What a screen needs before it opens at all (the walk does not start the live pool)."""


async def back_to_overview(pilot: Pilot[None], app: PoolApp) -> None:
    for _ in range(8):
        if isinstance(app.screen, OverviewScreen) and len(app.screen_stack) == 2:
            app.screen.clear_filter()  # Esc: an open filter box would take the next keys
            app.screen.collapsed.clear()  # folded groups and the problems-only view hide the engine's row
            app.screen.problems_only = False
            app.screen.refresh_rows()
            return
        if isinstance(app.screen, (ProfilePicker, ConfirmAction, CommandPalette)):
            app.screen.dismiss(None)
        else:
            app.pop_screen()
        await pilot.pause()
    raise AssertionError(f"cannot get back to the overview from {app.screen!r}")


async def open_screen(pilot: Pilot[None], app: PoolApp, name: str) -> None:
    keys, kind = SCREENS[name]
    await back_to_overview(pilot, app)
    grid = app.screen.query_one(PoolGrid)
    grid.move_cursor(row=list(grid.order).index("engine:qwen3-next-80b"))  # an engine with profiles and control
    await pilot.press(*keys)
    for _ in range(20):
        if isinstance(app.screen, kind):
            return
        await pilot.pause(0.05)
    raise AssertionError(f"{name}: expected {kind.__name__}, got {type(app.screen).__name__}")


def alive(app: PoolApp, where: str) -> None:
    assert app.is_running, f"the console exited ({where})"
    assert app.return_code is None, f"the console exited with {app.return_code} ({where})"


WALKED = [a for a in registry.ACTIONS if a.id != "quit" and not a.replay]  # replay keys: test_replay.py


@pytest.mark.parametrize("screen", list(SCREENS))
async def test_every_action_by_key_and_palette_from(screen: str, tmp_path: Path) -> None:
    app = app_for(tmp_path)
    if screen in SETUP:
        SETUP[screen](app, tmp_path)
    async with app.run_test(size=(140, 40)) as pilot:
        for host in uipool.host_snapshots(app.config):
            app.apply_host(host)
        for snap in uipool.engine_snapshots(app.config):
            app.apply_engine(snap)
        app.refresh_screen()
        await pilot.pause()
        for action in WALKED:
            if action.id == "close" and screen == "overview":
                continue  # q on the overview is quit (walked last, from the palette)
            await open_screen(pilot, app, screen)
            await pilot.press(action.key)
            await pilot.pause()
            alive(app, f"{action.key} on {screen}")

            await open_screen(pilot, app, screen)
            await pilot.press("ctrl+p")
            await pilot.pause()
            assert isinstance(app.screen, CommandPalette), f"Ctrl+P on {screen} opened {app.screen!r}"
            app.screen.query_one(Input).value = action.title
            await pilot.pause(0.3)  # the palette searches in a worker
            await pilot.press("enter")
            await pilot.pause()
            alive(app, f"palette {action.title!r} on {screen}")
        await back_to_overview(pilot, app)
        await pilot.press("ctrl+p")
        await pilot.pause()
        app.screen.query_one(Input).value = "Quit"
        await pilot.pause(0.3)
        await pilot.press("enter")
        await pilot.pause(0.3)
    assert app.return_code == 0


async def test_palette_lists_every_action_with_its_key_as_plain_text(tmp_path: Path) -> None:
    app = app_for(tmp_path)
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press("ctrl+p")
        await pilot.pause(0.5)
        assert isinstance(app.screen, CommandPalette)
        entries = [e.title for e in app.palette_entries()]
        assert "Filter  (/)" in entries and "Help  (?)" in entries
        titles = {t.split("  (")[0] for t in entries}
        assert {a.title for a in registry.ACTIONS if not a.replay and registry.applies(a, "overview")} <= titles
        assert not {a.title for a in registry.ACTIONS if not registry.applies(a, "overview")} & titles  # the detail's
        assert not {a.title for a in registry.ACTIONS if a.replay} & {t.split("  (")[0] for t in entries}
        await pilot.press("escape")
        await pilot.pause()
        alive(app, "after the palette closed")


async def test_the_demo_says_how_to_point_the_console_at_a_real_pool(tmp_path: Path) -> None:
    from textual.widgets import Static

    from poolconsole.cli import DEMO_HINT

    hint = DEMO_HINT.format(user="~/.config/poolconsole/hosts.toml")
    app = PoolApp(parse_config(closed_port_config()), live=False, theme_state=tmp_path / "ui.json", hint=hint)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        shown = str(app.screen.query_one("#hint", Static).render())
        assert "--config FILE" in shown and "~/.config/poolconsole/hosts.toml" in shown
        assert len(hint) <= 118  # one line at 120 columns


async def test_palette_finds_an_action_by_the_words_of_its_help(tmp_path: Path) -> None:
    """'alert log' is what the help calls the Alerts screen: the palette finds it though the title has no 'log'."""
    from textual.command import CommandList

    app = app_for(tmp_path)
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press("ctrl+p")
        await pilot.pause()
        app.screen.query_one(Input).value = "alert log"
        for _ in range(20):
            await pilot.pause(0.1)  # the palette searches in a worker
            listed = app.screen.query_one(CommandList)
            if listed.option_count:
                break
        prompts = [str(listed.get_option_at_index(i).prompt) for i in range(listed.option_count)]
        assert any(p.startswith("Alerts  (a)") for p in prompts), prompts
        await pilot.press("enter")
        await pilot.pause(0.3)
        assert isinstance(app.screen, AlertsScreen)
        # by the action ids the help screen lists; whole words only: "audit" is not Restart's "audited"
        for query, title, not_listed in (
            ("security", "Exposure audit", None),
            ("rollover", "Switch profile", None),
            ("refresh", "Poll now", None),
            ("audit", "Audit log", "Restart"),
        ):
            await back_to_overview(pilot, app)
            await pilot.press("ctrl+p")
            await pilot.pause()
            app.screen.query_one(Input).value = query
            prompts = []
            for _ in range(20):
                await pilot.pause(0.1)
                listed = app.screen.query_one(CommandList)
                prompts = [str(listed.get_option_at_index(i).prompt) for i in range(listed.option_count)]
                if any(p.startswith(title) for p in prompts):
                    break
            assert any(p.startswith(title) for p in prompts), (query, prompts)
            assert not_listed is None or not any(p.startswith(not_listed) for p in prompts), (query, prompts)
            await pilot.press("escape")
