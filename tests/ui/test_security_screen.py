"""The exposure audit in the console, on `poolconsole demo --scenario oom`: `S` asks whether to send the
one-token completion, then lists each engine and the gateway with whether it answers without a key, where
it listens and the verdict, and every finding with its fix: `embeddings` (Ollama, no key) is flagged, the
keyed engines and the gateway pass. Skipping the completion sends none: the demo's llama.cpp lists its
models without a key even when started with one (as some llama.cpp builds do), and its key-guarded
/metrics, refused, shows that it requires a key."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from textual import events
from textual.containers import VerticalScroll
from textual.pilot import Pilot
from textual.widget import Widget
from textual.widgets import DataTable, Static

from poolconsole.config import parse_config
from poolconsole.sim.demo import KEYLESS_ENGINE, SimPool
from poolconsole.ui import registry
from poolconsole.ui.app import PoolApp
from poolconsole.ui.screens.action import ProfilePicker
from poolconsole.ui.screens.security import COMPLETION_CHOICES, SecurityScreen
from tests.helpers.simpools import answering

KEY = next(a.key for a in registry.ACTIONS if a.id == "security")
KEYED = ("qwen3-next-80b", "gemma3-27b-nvfp4", "gateway")
LLAMACPP_KEYED = "qwen2.5-coder-3090"
"""llama.cpp with --api-key: /v1/models answers without the key, /metrics and the completion do not."""
MAC_ENGINE = "deepseek-studio"
"""On the Mac Studio, which has no `ss`."""


@pytest.fixture
async def oom_pool(tmp_path: Path) -> AsyncIterator[SimPool]:
    pool = SimPool("oom", seed=7)
    pool.oom_after_s = 3600.0  # no crash during this test
    async with answering(pool, tmp_path / "keys"):
        yield pool


async def audited(pilot: Pilot[None], app: PoolApp, choice: str) -> SecurityScreen:
    await pilot.press(KEY)
    await pilot.pause()
    assert isinstance(app.screen, ProfilePicker) and list(COMPLETION_CHOICES) == app.screen.profiles
    app.screen.dismiss(choice)
    for _ in range(150):
        await pilot.pause(0.1)
        screen = app.screen
        if isinstance(screen, SecurityScreen) and (screen.results is not None or screen.problem is not None):
            assert screen.problem is None, screen.problem
            return screen
    raise AssertionError(f"the audit did not finish: {app.screen!r}")


def cell(screen: SecurityScreen, row: str, column: str) -> str:
    return str(screen.query_one("#security-table", DataTable).get_cell(row, column))


async def test_security_screen_flags_the_keyless_engine(oom_pool: SimPool, tmp_path: Path) -> None:
    pool = oom_pool
    app = PoolApp(parse_config(pool.config_toml()), theme_state=tmp_path / "ui.json", read_only=True)
    async with app.run_test(size=(160, 45)) as pilot:
        await asyncio.sleep(1.0)
        screen = await audited(pilot, app, COMPLETION_CHOICES[1])  # read-only: the audit is still there
        assert not screen.completion
        assert cell(screen, LLAMACPP_KEYED, "key") == "requires a key"  # its models list is public, /metrics is not
        assert cell(screen, LLAMACPP_KEYED, "verdict") == "ok"
        assert cell(screen, KEYLESS_ENGINE, "key") == "answers without a key"
        assert cell(screen, KEYLESS_ENGINE, "verdict") == "EXPOSED"
        for name in KEYED:
            assert cell(screen, name, "key") == "requires a key", name
            assert cell(screen, name, "verdict") != "EXPOSED", name
        port = pool.engines[KEYLESS_ENGINE].port
        assert cell(screen, KEYLESS_ENGINE, "listen") == f"0.0.0.0:{port}"  # its host's `ss -ltnH`
        assert cell(screen, "qwen3-next-80b", "listen") == f"127.0.0.1:{pool.engines['qwen3-next-80b'].port}"
        assert cell(screen, MAC_ENGINE, "listen") == "n/a"  # macOS has no `ss`: unknown, not "none"
        summary = str(screen.query_one("#security-summary", Static).render())
        assert summary.startswith(f"EXPOSED: {KEYLESS_ENGINE} (1 of 8)"), summary  # the Mac's llama.cpp too is not
        findings = str(screen.query_one("#security-findings", Static).render())
        assert "/v1/models answers without a key" in findings and "fix: Ollama has no keys" in findings
        assert f"OLLAMA_HOST=127.0.0.1:{port}" in findings  # its own port, not Ollama's default 11434
        assert "start llama-server with --api-key" not in findings  # both llama.cpp engines have one
        assert "every interface" in findings
        assert "studio has no `ss`" in findings  # what could not be checked is said

        await pilot.press("escape")
        await pilot.pause()
        screen = await audited(pilot, app, COMPLETION_CHOICES[0])
        assert screen.completion
        assert cell(screen, LLAMACPP_KEYED, "key") == "requires a key"  # the completion went out, and was refused
        assert cell(screen, KEYLESS_ENGINE, "verdict") == "EXPOSED"
        for name in KEYED:
            assert cell(screen, name, "key") == "requires a key", name
        summary = str(screen.query_one("#security-summary", Static).render())
        assert summary.startswith(f"EXPOSED: {KEYLESS_ENGINE} (1 of 8)"), summary


def wheel_down(app: PoolApp, widget: Widget) -> None:
    """One turn of the mouse wheel over the widget, as the terminal reports it."""
    x, y = widget.region.x + 2, widget.region.y + 2
    app.post_message(events.MouseScrollDown(None, x, y, 0, 1, 0, False, False, False, screen_x=x, screen_y=y))


async def test_exposed_findings_come_first_and_the_findings_pane_scrolls(oom_pool: SimPool, tmp_path: Path) -> None:
    """At 80x24 the exposed engine's findings open the pane, ahead of the contained engines' and what could
    not be checked (the Mac's), and the rest is reached with PageDown, End and the wheel; Tab reaches the
    table, whose cursor still moves."""
    app = PoolApp(parse_config(oom_pool.config_toml()), theme_state=tmp_path / "ui.json", read_only=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await asyncio.sleep(1.0)
        screen = await audited(pilot, app, COMPLETION_CHOICES[1])
        await pilot.pause()
        findings = screen.query_one("#security-findings", Static)
        lines = str(findings.render()).splitlines()
        assert lines[0].startswith(f"{KEYLESS_ENGINE} (ollama, ") and lines[0].endswith(": EXPOSED"), lines[:3]
        assert lines[1].startswith("  !! "), lines[:3]  # its exposed findings first, before its contained ones
        first_other = next(i for i, line in enumerate(lines) if line and not line.startswith(" ") and i)
        assert MAC_ENGINE in "\n".join(lines[first_other:])  # the other engines (the Mac's ?? lines) after it
        pane = screen.query_one("#security-findings-pane", VerticalScroll)
        assert screen.focused is pane
        top = findings.region.y
        assert pane.region.y == top and top + 1 < pane.region.bottom  # the first !! line shows, unscrolled
        assert pane.max_scroll_y > 0, "the findings fit: nothing to scroll"

        await pilot.press("pagedown")
        assert pane.scroll_y > 0 and findings.region.y < top  # the text moved up
        await pilot.press("end")
        assert pane.scroll_y == pane.max_scroll_y
        await pilot.press("home")
        assert pane.scroll_y == 0 and findings.region.y == top
        wheel_down(app, pane)
        await pilot.pause()
        assert pane.scroll_y > 0 and findings.region.y < top

        table = screen.query_one("#security-table", DataTable)
        await pilot.press("shift+tab")
        assert app.focused is table
        row = table.cursor_row
        await pilot.press("down")
        assert table.cursor_row == row + 1
