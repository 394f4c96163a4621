"""Text wider than the screen ends in "…", never cut silently at the screen's edge: the events timeline,
the help screen and the smoke results at 80x24 (and the timeline again after the terminal shrinks to it).
Each check reads what the table renders, and that the table lies within the screen."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from textual.geometry import Region
from textual.pilot import Pilot
from textual.widgets import DataTable, Static

from poolconsole.model.smoke import Change, CheckResult
from poolconsole.ui import registry
from poolconsole.ui.app import PoolApp
from poolconsole.ui.screens.detail import DetailScreen
from poolconsole.ui.screens.events import EventsScreen
from poolconsole.ui.screens.others import HelpScreen
from poolconsole.ui.screens.smoke import SmokeScreen
from tests.ui.test_console import feed, settle
from tests.ui.test_every_screen import app_for

KEY = {a.id: a.key for a in registry.ACTIONS}
DETAIL = "the engine did not answer its health check in time; " * 6
REASON = "connection refused by 127.0.0.1:9 (is the engine up? is the port right?) " * 3


def rendered(table: DataTable[object], app: PoolApp, fits: bool = True) -> list[str]:
    """The table's lines as drawn, after checking that it lies within the screen and, where it `fits`, that
    nothing is left to scroll to sideways (no blank or hidden columns past its right edge)."""
    assert table.region.right <= app.size.width, f"{table.region} runs past the screen ({app.size})"
    assert not fits or table.max_scroll_x == 0, f"the table scrolls sideways by {table.max_scroll_x}"
    return [strip.text for strip in table.render_lines(Region(0, 0, table.size.width, table.size.height))]


def line_with(lines: list[str], text: str) -> str:
    found = [line for line in lines if text in line]
    assert found, f"no line contains {text!r}: {lines}"
    return found[0].rstrip()


async def opened(pilot: Pilot[None], app: PoolApp, key: str, kind: type) -> None:
    await pilot.press(key)
    for _ in range(20):
        await pilot.pause(0.05)
        if isinstance(app.screen, kind):
            await pilot.pause()
            return
    raise AssertionError(f"{key}: expected {kind.__name__}, got {type(app.screen).__name__}")


async def test_a_long_event_ends_in_an_ellipsis_at_80x24(tmp_path: Path) -> None:
    app = app_for(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        app.events.action(app.state.clock(), "restart", "qwen3-next-80b", "failed", DETAIL)
        await opened(pilot, app, KEY["events"], EventsScreen)
        line = line_with(rendered(app.screen.query_one("#event-log", DataTable), app), "restart failed")
        assert line.endswith("…"), line
        assert "qwen3-next-80b" in line  # the target is whole: the text gives way first


async def test_the_timeline_is_cut_again_when_the_terminal_shrinks(tmp_path: Path) -> None:
    app = app_for(tmp_path)
    async with app.run_test(size=(160, 40)) as pilot:
        app.events.action(app.state.clock(), "restart", "qwen3-next-80b", "failed", DETAIL)
        await opened(pilot, app, KEY["events"], EventsScreen)
        table = app.screen.query_one("#event-log", DataTable)
        wide = line_with(rendered(table, app), "restart failed")
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        await pilot.pause()
        narrow = line_with(rendered(table, app), "restart failed")
        assert narrow.endswith("…") and len(narrow) < len(wide), (wide, narrow)


async def test_a_long_help_line_ends_in_an_ellipsis_at_80x24(tmp_path: Path) -> None:
    app = app_for(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await opened(pilot, app, KEY["help"], HelpScreen)
        line = line_with(rendered(app.screen.query_one("#help", DataTable), app), "Node detail:")
        assert line.endswith("…"), line
        # the note under the table (the palette, remapping keys) stays on screen: the table scrolls itself
        note = app.screen.query_one("#help-note")
        footer_top = app.size.height - 1
        assert note.region.height and note.region.bottom <= footer_top, (note.region, app.size)
        # the highlighted action's words are whole under it, wrapped (a newcomer reads them here)
        table = app.screen.query_one("#help", DataTable)
        ids = [str(table.get_row_at(i)[1]) for i in range(table.row_count)]
        table.move_cursor(row=ids.index("collapse"))
        await pilot.pause()
        what = app.screen.query_one("#help-what")
        shown = " ".join(s.text.strip() for s in what.render_lines(Region(0, 0, what.region.width, what.region.height)))
        assert (
            shown
            == "c  Fold group: Fold or unfold the selected row's group (its line keeps the count and the worst state)"
        )
        assert what.region.bottom <= note.region.y, (what.region, note.region)


def failed_check(target: str) -> CheckResult:
    return CheckResult(target, "Qwen3-Next-80B-A3B-Instruct-AWQ-4bit", "models", False, REASON)


async def test_a_long_smoke_reason_ends_in_an_ellipsis(tmp_path: Path) -> None:
    """At 120 columns the results fit, the reason cut to what is left; at 80 they cannot (the measured
    columns alone are wider), so the table scrolls sideways and the reason, at most the table's width,
    still ends in "…" once scrolled to."""
    for size in ((120, 40), (80, 24)):
        app = app_for(tmp_path)
        async with app.run_test(size=size) as pilot:
            screen = SmokeScreen(["qwen3-next-80b"])
            await app.push_screen(screen)
            await pilot.pause()
            screen.add(failed_check("qwen3-next-80b"))
            await pilot.pause()
            table = screen.query_one("#smoke-results", DataTable)
            fits = size == (120, 40)
            assert "qwen3-next-80b" in line_with(rendered(table, app, fits), "FAIL")  # cut only where it helps
            assert fits or table.max_scroll_x > 0
            table.scroll_to(x=table.max_scroll_x, animate=False, immediate=True)
            await pilot.pause()
            line = line_with(rendered(table, app, fits), "connection refused")
            assert line.endswith("…"), (size, line)
            # under the table, the highlighted check with its reason whole
            below = screen.query_one("#smoke-reason")
            shown = " ".join(s.text.strip() for s in below.render_lines(Region(0, 0, *below.region.size)))
            said = f"qwen3-next-80b models (concurrency -): FAIL: {REASON.strip()}"
            assert " ".join(shown.split()) == " ".join(said.split()), (size, shown)


async def test_a_smoke_checks_figures_wrap_between_figures_never_inside_one(tmp_path: Path) -> None:
    """A chat_stream check's reason at 80 columns had wrapped as "...512 tokens in 1.12" / "s; connect ...":
    it wraps between its figures, each whole on one line."""
    figures = (
        "TTFT p50 54.3 ms, p95 108.2 ms; ITL p95 12.0 ms; 48.2 tok/s per stream, 190.1 aggregate; "
        "256 tokens in 1.12 s; connect 2.4 ms mean, 3.1 ms p95 (4 new connection(s), part of TTFT)"
    )
    app = app_for(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = SmokeScreen(["qwen3-next-80b"])
        await app.push_screen(screen)
        await pilot.pause()
        screen.add(CheckResult("qwen3-next-80b", "Qwen3-Next-80B-A3B", "chat_stream", True, figures, concurrency=4))
        await pilot.pause()
        below = screen.query_one("#smoke-reason")
        rows = [s.text.strip() for s in below.render_lines(Region(0, 0, *below.region.size)) if s.text.strip()]
        for figure in ("256 tokens in 1.12 s;", "ITL p95 12.0 ms;", "TTFT p50 54.3 ms, p95 108.2 ms;"):
            assert any(figure in row for row in rows), (figure, rows)
        said = f"qwen3-next-80b chat_stream (concurrency 4): PASS: {figures}"
        assert " ".join(" ".join(rows).split()) == said  # all of it, in order


async def test_the_smoke_screen_names_its_regressions(tmp_path: Path) -> None:
    """`M` ended "64 checks, 0 failed, 2 regression(s) against the baseline" and no row said which: the
    status names each (a few; the rest counted), an improvement is not one of them."""
    app = app_for(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = SmokeScreen([])
        await app.push_screen(screen)
        await pilot.pause()
        slower = Change("qwen3-30b-a3b", "Qwen3-30B", "chat_stream", 4, "ttft_p95", 0.12, 0.18, True)
        faster = Change("gemma3-27b-nvfp4", "gemma", "chat_stream", 1, "tps_per_stream", 40.0, 44.0, False)
        others = [replace(slower, concurrency=c) for c in (8, 16, 32, 64)]
        screen.finish([slower, faster, *others])
        await pilot.pause()
        status = str(screen.query_one("#smoke-status", Static).render())
        assert "5 regression(s) against the baseline" in status
        assert "regression: qwen3-30b-a3b chat_stream c=4 ttft_p95: 120 ms -> 180 ms (+50.0%)" in status, status
        assert "gemma3-27b-nvfp4" not in status and status.count("regression: ") == 4 and "and 1 more" in status
        await pilot.resize_terminal(80, 24)  # the status's lines leave the table room for its checks
        for target in ("qwen3-30b-a3b", "gemma3-27b-nvfp4", "embeddings"):
            screen.add(failed_check(target))
        await pilot.pause(0.2)
        table = screen.query_one("#smoke-results", DataTable)
        assert table.region.height >= 5, table.region  # header and a few rows (it had one line at 80x24)


async def test_a_result_that_comes_before_the_smoke_screen_is_mounted_is_kept_and_an_error_stops_it(
    tmp_path: Path,
) -> None:
    """The run starts as the screen is pushed: a first result before the table had its columns raised 'More
    values provided than there are columns', the run stopped after one check and the status still said
    'finished, 0 failed'."""
    app = app_for(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = SmokeScreen(["qwen3-next-80b"])
        screen.add(failed_check("qwen3-next-80b"))  # before it is mounted
        await app.push_screen(screen)
        await pilot.pause()
        table = screen.query_one("#smoke-results", DataTable)
        assert table.row_count == 1 and str(table.get_row_at(0)[4]) == "FAIL"
        screen.add(failed_check("qwen3-30b-a3b"))
        screen.finish([], "smoke test stopped: TimeoutError: the pool did not answer")
        await pilot.pause()
        status = str(screen.query_one("#smoke-status").render())
        assert status.startswith("smoke test of qwen3-next-80b: stopped, 2 checks, 2 failed"), status
        assert table.row_count == 2


async def test_an_actions_long_progress_line_wraps_whole(tmp_path: Path) -> None:
    """The rollover's progress cut a long line at the screen's edge with no mark ("...
    POOL_GPU_MEMORY_UTILIZATI"): it wraps, every word of it on screen."""
    from textual.widgets import RichLog

    from poolconsole.ui.screens.action import ActionScreen

    names = " ".join(f"POOL_GPU_MEMORY_UTILIZATION_{n}" for n in range(6))
    line = f"$ (write /srv/pool/qwen3-next-80b.env atomically: profile fp8-tp4: {names})"
    app = app_for(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = ActionScreen("rollover qwen3-next-80b -> fp8-tp4")
        await app.push_screen(screen)
        await pilot.pause()
        screen.progress(line)
        await pilot.pause()
        log = screen.query_one("#action-log", RichLog)
        rows = [strip.text.rstrip() for strip in log.lines]
        assert len(rows) >= 2 and all(len(row) <= log.size.width for row in rows), rows
        assert " ".join(" ".join(rows).split()) == line  # nothing cut away


async def test_the_detail_gpu_table_fits_80_columns(tmp_path: Path) -> None:
    """At 80x24 the node detail's GPU table ran past the screen, cut at "Proce": the processes (which engine
    holds each card) were out of sight. The card is named by its model, and a table still too wide cuts the
    processes with "…" first, then the name."""
    app = app_for(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await feed(app)
        await settle(pilot, app)
        app.open_detail("engine:qwen3-next-80b")
        await pilot.pause()
        await pilot.pause(0.1)
        assert isinstance(app.screen, DetailScreen)
        lines = rendered(app.screen.query_one("#gpus", DataTable), app)  # within the screen, no sideways scroll
        assert "Processes" in lines[0] and "Power/limit" in lines[0]
        row = line_with(lines, " H200 ")  # the card by its model ("NVIDIA GeFor…" had lost it), processes whole
        assert row.endswith("100:qwen3-next-80b 40.0G"), row
