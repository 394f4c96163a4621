"""The smoke screen while a pool run goes on (minutes of real requests): the cursor follows the newest result
unless the operator moved it back, and the charts fill as the streamed checks land, titled as figures so
far; the baseline comparison comes when the run ends."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import cast

from textual.pilot import Pilot
from textual.widgets import Static
from textual_plotext import PlotextPlot

from poolconsole.model.smoke import CheckResult
from poolconsole.ui.app import PoolApp
from poolconsole.ui.screens.overview import OverviewScreen
from poolconsole.ui.screens.smoke import SmokeScreen
from poolconsole.ui.tables import FitTable
from tests.ui.test_console import demo_app, demo_pool
from tests.ui.test_every_screen import app_for


def streamed(target: str, p95_s: float) -> CheckResult:
    return CheckResult(
        target,
        "m",
        "chat_stream",
        True,
        f"TTFT p95 {p95_s * 1000:.0f} ms",
        concurrency=1,
        ttft_s={"p50": p95_s / 2, "p95": p95_s},
        output_tokens_per_s={"per_stream": 40.0, "aggregate": 40.0},
    )


async def pushed(pilot: Pilot[None], app: PoolApp) -> SmokeScreen:
    """A pool run's screen, open and empty (no run behind it: the tests hand it results)."""
    screen = SmokeScreen([])
    await app.push_screen(screen)
    await pilot.pause()
    return screen


async def test_the_results_follow_the_newest_row_and_the_charts_fill_while_it_runs(tmp_path: Path) -> None:
    app = app_for(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await pushed(pilot, app)
        table = screen.query_one("#smoke-results", FitTable)
        assert screen.chart_titles == {}
        for i, target in enumerate(("a", "b", "c")):
            screen.add(streamed(target, 0.1 * (i + 1)))
            await pilot.pause()
            assert table.row_count == i + 1 and table.highlighted() == str(i + 1)  # on the newest row
        assert screen.chart_titles["ttft"] == "TTFT p95 (ms): so far (against the baseline when the run ends)"
        assert screen.chart_titles["tps"].startswith("tok/s per stream: so far")

        table.focus()
        await pilot.press("up")  # the operator reads an earlier result: it stays under the cursor
        await pilot.pause()
        screen.add(streamed("d", 0.4))
        await pilot.pause()
        assert table.row_count == 4 and table.highlighted() == "2"
        assert "a chat_stream" not in str(screen.query_one("#smoke-reason").render())

        screen.finish([])
        await pilot.pause()
        assert screen.chart_titles["ttft"] == "TTFT p95 (ms): now (no baseline yet for 4 of 4)"


async def test_closed_while_it_runs_it_keeps_the_results_and_m_opens_it_again(tmp_path: Path) -> None:
    """Leaving a pool run's screen (q) had stopped the run with "a poll loop stopped: No nodes match
    '#smoke-status'", and no record of it anywhere; M then offered a second run."""
    app = app_for(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = SmokeScreen([])
        app.runner.smoke_screen = screen  # as _start_smoke sets it
        app.runner.show(screen)
        await pilot.pause()
        screen.add(streamed("a", 0.1))
        await pilot.press("q")  # closed: the run goes on
        await pilot.pause(0.3)  # long enough for a popped screen to be removed (it was, and came back blank)
        assert app.screen is not screen
        screen.add(streamed("b", 0.2))  # results landing meanwhile: kept, nothing raised
        screen.add(streamed("c", 0.3))
        await pilot.press("M")  # opens the running one again (no second run, no confirmation)
        await pilot.pause()
        assert app.screen is screen
        await pilot.pause(0.1)
        table = screen.query_one("#smoke-results", FitTable)
        assert table.row_count == 3 and [r.target for r in screen.results] == ["a", "b", "c"]
        assert table.region.height > 3  # laid out and drawn, not a blank screen over a frozen frame
        assert "3 checks" in str(screen.query_one("#smoke-status", Static).render())
        await pilot.press("q")
        await pilot.pause()
        screen.finish([])  # the run ends while closed: nothing raised
        await pilot.pause()
        await pilot.press("m")  # finished: m starts a new run as usual (here: no engine row selected)
        await pilot.pause()
        assert app.screen is not screen


async def test_a_bar_through_the_gateway_is_named_by_its_model(tmp_path: Path) -> None:
    """A pool run's gateway checks were all labelled "gateway c1": which model each bar measured was lost."""
    app = app_for(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await pushed(pilot, app)
        for model in ("qwen3-next-80b", "gemma-3-27b-it"):
            screen.add(replace(streamed("gateway", 0.2), model=model))
        await pilot.pause()
        drawn = screen.query_one("#chart-ttft", PlotextPlot).plt.build()
        for label in ("qwen3-next-… c1", "gemma-3-27b… c1"):  # a long name ends in "…"
            assert label in drawn, drawn
        assert "gateway c1" not in drawn


async def test_a_pool_run_left_and_opened_again_on_the_demo(tmp_path: Path) -> None:
    """On the demo, as the operator did it: M, y, q while it runs, M. The screen came back blank (popped, it
    had been removed), over a frozen frame of the overview, keys going nowhere."""
    async with demo_pool(12, None) as pool:
        app = demo_app(pool, tmp_path)
        async with app.run_test(size=(100, 30)) as pilot:
            await asyncio.sleep(1.5)
            await pilot.press("M")
            await pilot.pause(0.3)
            await pilot.press("y")
            for _ in range(100):  # the first results (the demo answers within seconds)
                await asyncio.sleep(0.1)
                if isinstance(app.screen, SmokeScreen) and len(app.screen.results) >= 2:
                    break
            screen = app.screen
            assert isinstance(screen, SmokeScreen) and not screen.finished
            await pilot.press("q")
            await asyncio.sleep(4.0)  # the run goes on with its screen closed (long enough to be removed)
            assert isinstance(app.screen, OverviewScreen)
            await pilot.press("M")
            await asyncio.sleep(2.0)  # drawn at once, it then went blank as the popped screen's removal ran
            assert cast(object, app.screen) is screen  # the running one again, not a second run
            table = screen.query_one("#smoke-results", FitTable)
            assert table.region.height > 3 and table.row_count == len(screen.results) >= 2


async def test_a_failed_worker_is_named_by_what_it_was(tmp_path: Path) -> None:
    """A smoke run's failure had been toasted as "a poll loop stopped: ...": the poll loops are not workers."""
    app = app_for(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:

        async def boom() -> None:
            raise RuntimeError("the store is locked")

        worker = app.run_worker(boom(), group="ledger", description="reading the ledger", exit_on_error=False)
        assert worker.group == "ledger"
        for _ in range(40):
            await pilot.pause(0.05)
            if app._notifications:
                break
        said = [str(n.message) for n in app._notifications]
        assert "reading the ledger stopped: the store is locked" in said, said
