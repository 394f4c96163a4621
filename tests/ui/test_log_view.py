"""The engine log view on `poolconsole demo --scenario oom`: from the detail screen `l` reads the crashed
engine's container log over the simulated host's SSH (the same bounded `docker logs` read as `poolconsole
logs`), follows it while open, finds text (`f`, `n` / `N`), and `x` jumps to the CUDA out-of-memory line,
then back through the error lines; secrets in the log stay redacted; the log's own text never becomes a
command; closing the screen stops the follow."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from textual.geometry import Region
from textual.pilot import Pilot
from textual.widgets import Input, Static

from poolconsole.config import parse_config
from poolconsole.model.log_view import LogView
from poolconsole.sim.demo import OOM_ENGINE, SimPool
from poolconsole.sim.logs import OOM_LINE
from poolconsole.ui import registry
from poolconsole.ui.app import PoolApp
from poolconsole.ui.grid import PoolGrid
from poolconsole.ui.screens.detail import DetailScreen
from poolconsole.ui.screens.logs import LogScreen
from tests.helpers.simpools import answering
from tests.ui.test_console import feed, select_row, settle

KEYS = {a.id: a.key for a in registry.ACTIONS}
SECRET = "hf_Zq9secretTOKENvalue123"


@pytest.fixture
async def oom_pool(tmp_path: Path) -> AsyncIterator[SimPool]:
    pool = SimPool("oom", seed=5)
    pool.oom_after_s = 2.0
    pool.oom_loading_s = 1.0
    pool.oom_every_s = 3600.0
    async with answering(pool, tmp_path / "keys"):
        yield pool


async def until(pilot: Pilot[None], check: object, tries: int = 80) -> None:
    for _ in range(tries):
        if callable(check) and check():
            return
        await pilot.pause(0.1)
    raise AssertionError("condition not met in time")


async def type_text(pilot: Pilot[None], text: str) -> None:
    for ch in text:
        await pilot.press("space" if ch == " " else ch)


def status(screen: LogScreen) -> str:
    """The status line as drawn, its rows joined."""
    line = screen.query_one("#log-status", Static)
    return " ".join(strip.text.strip() for strip in line.render_lines(Region(0, 0, *line.region.size)))


async def test_log_view_reads_follows_searches_and_jumps_to_the_oom(oom_pool: SimPool, tmp_path: Path) -> None:
    pool = oom_pool
    log = pool.engines[OOM_ENGINE].log
    for _ in range(100):  # the crash, then the restart after it
        if pool.engines[OOM_ENGINE].restarts >= 1:
            break
        await asyncio.sleep(0.1)
    assert pool.engines[OOM_ENGINE].restarts >= 1
    marker = tmp_path / "ran"
    log.write(f"(APIServer pid=1) INFO launch with HF_TOKEN={SECRET} --api-key {SECRET}")
    log.write(f"(APIServer pid=1) INFO odd line $(touch {marker}) `touch {marker}`; touch {marker}")
    for n in range(80):  # longer than the screen: it opens at the newest lines, as it follows
        log.write(f"(APIServer pid=1) INFO Avg prompt throughput: {n}.0 tokens/s")

    app = PoolApp(parse_config(pool.config_toml()), theme_state=tmp_path / "ui.json")
    async with app.run_test(size=(160, 45)) as pilot:
        await select_row(pilot, app, f"engine:{OOM_ENGINE}")
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, DetailScreen)
        await pilot.press(KEYS["logs"])
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, LogScreen)
        await until(pilot, lambda: screen.state == "following")
        lines = screen.lines_widget
        # at the end once laid out (a loaded machine draws a refresh or two later: waited for, not assumed)
        await until(pilot, lambda: lines.max_scroll_y > 0 and lines.scroll_y == lines.max_scroll_y)
        assert lines.max_scroll_y > 0 and lines.scroll_y == lines.max_scroll_y, (lines.scroll_y, lines.max_scroll_y)
        got = screen.read_result
        assert got is not None and got.error is None
        assert got.source == f"docker logs {OOM_ENGINE}"
        shown = list(got.lines)
        assert any(OOM_LINE in line for line in shown)
        assert not any(SECRET in line for line in shown)  # redacted before it reaches the screen
        assert any("HF_TOKEN=<redacted>" in line for line in shown)
        head = str(screen.query_one("#log-head", Static).render())
        assert "CUDA out of memory" in head and "change:" in head

        # x: the failure-mode line first, then back through the error lines before it
        await pilot.press(KEYS["log_error"])
        await pilot.pause()
        oom_at = screen.view.current
        assert oom_at is not None and OOM_LINE in (screen.view.line(oom_at) or "")
        assert "CUDA out of memory" in status(screen)
        await pilot.press(KEYS["log_error"])
        await pilot.pause()
        before = screen.view.current
        assert before is not None and before < oom_at and "ERROR" in (screen.view.line(before) or "")

        # follow: a line written now arrives while the screen is open, once
        read_last = shown[-1]
        log.write("(APIServer pid=1) INFO markerfollowed one")
        await until(pilot, lambda: any("markerfollowed" in line for line in screen.view.lines))
        lines = list(screen.view.lines)
        assert sum("markerfollowed" in line for line in lines) == 1
        at = len(shown) - 1
        assert lines[at] == read_last and lines[at + 1] != read_last  # the follow skipped the line already read

        # f: find; n / N walk the matches
        await pilot.press(KEYS["log_find"])
        await pilot.pause()
        box = screen.query_one("#log-search", Input)
        assert box.has_focus
        await type_text(pilot, "startup complete")
        await pilot.press("enter")
        await pilot.pause()
        matches = [n for n in range(screen.view.first, screen.view.last + 1) if screen.view.matches(n)]
        assert len(matches) >= 2  # the first run and the restart
        assert screen.view.current == matches[-1]
        assert f"match {len(matches)} of {len(matches)}" in status(screen)
        await pilot.press(KEYS["log_previous"])
        await pilot.pause()
        assert screen.view.current == matches[-2]
        await pilot.press(KEYS["log_next"])
        await pilot.pause()
        assert screen.view.current == matches[-1]
        await pilot.press(KEYS["log_next"])  # wraps to the first
        await pilot.pause()
        assert screen.view.current == matches[0]

        # Esc in the search box closes the box, not the screen
        await pilot.press(KEYS["log_find"])
        await pilot.pause()
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is screen and not box.display

        # F pauses: a new line no longer arrives
        await pilot.press(KEYS["log_follow"])
        await pilot.pause()
        assert screen.state == "paused"
        log.write("(APIServer pid=1) INFO markerpaused")
        await pilot.pause(0.8)
        assert not any("markerpaused" in line for line in screen.view.lines)

        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, DetailScreen)
    assert not marker.exists()  # the log's text was shown, never run


def test_last_error_prefers_the_failure_mode_then_walks_back() -> None:
    view = LogView(max_lines=5)
    view.replace(["ok", "ERROR one", OOM_LINE, "ERROR later", "fine"])
    assert view.last_error() == 3  # the failure mode, though a later line has an error word
    assert view.last_error() == 2
    assert view.last_error() == 4  # wraps to the newest error line
    view.extend(["x", "y"])  # two oldest go: numbers stay
    assert view.first == 3 and view.line(3) == OOM_LINE and view.line(1) is None
    assert view.search("error") == 4
    assert view.next_match() == 3  # wraps around to the oldest match


def test_the_search_status_counts_in_words() -> None:
    from poolconsole.ui.screens.logs import match_words

    assert match_words("Load", None, 1) == "'Load': 1 match"
    assert match_words("Load", None, 3) == "'Load': 3 matches"
    assert match_words("Load", None, 0) == "'Load': 0 matches"
    assert match_words("Load", 2, 3) == "'Load': match 2 of 3"


async def test_the_status_line_wraps_between_its_fields_at_80_columns(tmp_path: Path) -> None:
    """It wrapped a key away from its action ("x last error  F" / "follow  Esc back")."""
    from poolconsole.model.log_read import LogRead

    async def read() -> LogRead:
        lines = (*(f"INFO line {i}" for i in range(27)), "ERROR CUDA out of memory")
        return LogRead("qwen", "tp4", "docker logs qwen", "docker logs qwen", lines, ())

    app = PoolApp(parse_config('[[engines]]\nname = "qwen"\nkind = "vllm"\nurl = "http://127.0.0.1:9"\n'),
                  live=False, theme_state=tmp_path / "ui.json")  # fmt: skip
    async with app.run_test(size=(80, 24)) as pilot:
        screen = LogScreen("qwen", "docker logs qwen", read, None)
        await app.push_screen(screen)
        await until(pilot, lambda: screen.state == "read")
        line = screen.query_one("#log-status", Static)
        rows = [s.text.strip() for s in line.render_lines(Region(0, 0, *line.region.size))]
        assert len(rows) > 1, rows  # it does wrap at 80 columns ...
        keys = ("f find", "n/N next/previous", "x last error", "F follow", "Esc back")
        for key in keys:  # ... and every key stays with its action on one row
            assert any(key in row for row in rows), (key, rows)


async def test_l_on_an_engine_with_no_log_source_says_what_to_declare_in_a_toast_that_holds_it(
    tmp_path: Path,
) -> None:
    """The gateway has no [engines.control] and no [engines.logs]: the whole message (two examples of the
    table) was cut by the toast before its advice. The toast's words are short and whole; the CLI keeps the
    long ones."""
    from tests.ui.test_every_screen import app_for, with_ssh

    app = app_for(tmp_path)
    with_ssh(app, tmp_path)
    gateway = next(e for e in app.config.engines if e.kind.value == "litellm")
    assert gateway.control is None and gateway.logs is None
    async with app.run_test(size=(120, 40)) as pilot:
        await feed(app)
        await settle(pilot, app)
        grid = app.screen.query_one(PoolGrid)
        grid.move_cursor(list(grid.order).index(f"engine:{gateway.name}"))
        await pilot.press(KEYS["logs"])
        await pilot.pause()
        told = [n.message for n in app._notifications]
        assert (
            f"{gateway.name}: no log source; declare [engines.logs] (`poolconsole logs {gateway.name}` shows how)"
            in told
        )
        assert not isinstance(app.screen, LogScreen)
