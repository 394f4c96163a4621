"""The overview at fleet scale (issue 16 item 5) and as a mouse and keyboard user expects it (issue 18 items 3
and 5): 1,000 engines on 250 hosts of 16 cards grouped by host or by model, groups folded with their count
and worst state on the line, a problems-only view whose status line says how many rows it hides, only the
rows whose data changed built again; the arrows scroll by whole columns; a click selects, a double click
opens; the footer shows the current screen's keys only (remapped ones included); and on the demo's overload
scenario the summary's tok/s is the sum of the rows and no column overflows."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from textual.widgets._footer import FooterKey

from poolconsole.config import PoolConfig, parse_config
from poolconsole.sim.demo import SimPool
from poolconsole.ui.app import PoolApp
from poolconsole.ui.grid import PoolGrid
from poolconsole.ui.screens.detail import DetailScreen
from poolconsole.ui.screens.overview import OverviewScreen
from tests.helpers import bigpool, uipool
from tests.ui.test_console import feed, settle, static_app
from tests.ui.test_overview_summary import assert_cells_fit, rows_tps, summary_tps

ENGINES = 1000
DOWN = [i for i in range(ENGINES) if i % bigpool.DOWN_EVERY == bigpool.DOWN_EVERY - 1]


def big_app(tmp_path: Path, cfg: PoolConfig) -> PoolApp:
    return PoolApp(cfg, live=False, clock=lambda: uipool.T0 + 1, theme_state=tmp_path / "ui.json")


def poll(app: PoolApp, pages: bigpool.Pages, step: int, every: int = 1) -> None:
    hosts, engines = bigpool.polls(app.config, pages, step, every)
    for host in hosts:
        app.apply_host(host)
    for snap in engines:
        app.apply_engine(snap)


def overview(app: PoolApp) -> OverviewScreen:
    assert isinstance(app.screen, OverviewScreen)
    return app.screen


def status(app: PoolApp) -> str:
    return str(app.screen.query_one("#status-line").render())


def footer(app: PoolApp) -> set[str]:
    return {key.description for key in app.screen.query(FooterKey)}


async def test_a_thousand_engines_group_fold_and_show_only_problems(tmp_path: Path) -> None:
    cfg = bigpool.config(ENGINES)
    pages = bigpool.Pages()
    app = big_app(tmp_path, cfg)
    async with app.run_test(size=(120, 40)) as pilot:
        poll(app, pages, 0)
        poll(app, pages, 1)
        await settle(pilot, app)
        screen, grid = overview(app), app.screen.query_one(PoolGrid)
        assert grid.row_count == 250 + ENGINES and "grouped by host" in status(app)
        assert sum(len(h.gpus) for t in app.state.hosts.values() if (h := t.snapshot)) == 4000
        # the down engines' hosts come first (attention first), each host line over its four engines
        first = bigpool.host_name(DOWN[0] // 4)
        assert grid.order[0] == f"host:{first}" and grid.order[1:5] == [
            f"engine:{bigpool.engine_name(i)}" for i in range(DOWN[0] // 4 * 4, DOWN[0] // 4 * 4 + 4)
        ]

        # only the rows in view are built: an unchanged pool builds none again, a poll of every engine builds
        # those in view (the table's 38 lines under its header at most), one engine's new poll in view builds
        # that row alone, and one out of view builds nothing until the row is scrolled into view and drawn
        built = screen.built
        screen.refresh_rows()
        assert screen.built == built
        poll(app, pages, 2)
        screen.refresh_rows()
        assert 0 < screen.built - built <= grid.size.height, screen.built - built
        await pilot.pause()
        built = screen.built
        in_view = next(k for k in grid.order[int(grid.scroll_y) + 3 :] if k.startswith("engine:"))
        app.apply_engine(bigpool.engine_poll(cfg, pages, int(in_view.split(":e")[1]), 3))
        screen.refresh_rows()
        assert screen.built == built + 1
        last = grid.order[-1]
        assert last.startswith("engine:")
        app.apply_engine(bigpool.engine_poll(cfg, pages, int(last.split(":e")[1]), 3))
        screen.refresh_rows()
        await pilot.pause()
        assert screen.built == built + 1 and last in grid.stale
        grid.action_jump(-1)  # End: the last rows in view, drawn, built now (those stale since the full poll)
        await pilot.pause()
        assert built + 2 <= screen.built <= built + 1 + grid.size.height and last not in grid.stale
        assert grid.get_cell(last, "engine").plain == last[7:]
        grid.action_jump(0)
        await settle(pilot, app)

        await pilot.press("G")  # grouped by model: 20 groups of 50, each under its line
        await settle(pilot, app)
        assert "grouped by model" in status(app)
        lines = [k for k in grid.order if grid.is_span(k)]
        assert lines == [f"model:{m}" for m in sorted(bigpool.MODELS, key=lambda m: (
            m not in {bigpool.MODELS[i % 20] for i in DOWN}, m))]  # fmt: skip
        group = lines[0]  # a group with a down engine comes first
        down_in = sum(1 for i in DOWN if f"model:{bigpool.MODELS[i % 20]}" == group)
        assert down_in and grid.order[0] == group
        line = grid.get_cell(group, "line").plain
        assert line.startswith(f"{group[6:]}  50 engines  {down_in} down  {50 - down_in} ok"), line

        grid.move_cursor(grid.position[group])
        await pilot.press("enter")  # Enter on a group line folds it: its line says what it holds
        await settle(pilot, app)
        line = grid.get_cell(group, "line").plain
        assert line.startswith(f"▸ {group[6:]}  [50 engines, worst down, {down_in} problem"), line
        assert "50 engines  " not in line  # the tag says it: the open line's counts are not repeated
        assert grid.row_count == 20 + ENGINES - 50 and grid.cursor_key == group
        assert f"{50} hidden" in status(app)
        await pilot.press("C")  # fold them all: 20 lines, the whole pool's summary above them
        await settle(pilot, app)
        assert grid.row_count == 20 and f"{ENGINES} hidden in folded groups (c / C opens them)" in status(app)
        assert status(app).startswith(f"0 of {ENGINES} engines  ")  # "0 engines" read as an empty pool
        assert "engines 990/1000 ok" in str(app.screen.query_one("#summary").render())
        await pilot.press("C")
        await settle(pilot, app)
        assert grid.row_count == 20 + ENGINES

        await pilot.press("p")  # problems only: the down engines under their groups' lines
        await settle(pilot, app)
        shown = {k for k in grid.order if not grid.is_span(k)}
        assert shown == {f"engine:{bigpool.engine_name(i)}" for i in DOWN}
        groups = {f"model:{bigpool.MODELS[i % 20]}" for i in DOWN}
        assert {k for k in grid.order if grid.is_span(k)} == groups
        assert f"{len(DOWN)} of {ENGINES} engines  " in status(app)  # engines counted, not the group lines
        assert f"problems only: {ENGINES - len(DOWN)} hidden" in status(app)
        await pilot.press("C")  # every group folded: the problems are folded away, not absent
        await settle(pilot, app)
        assert f"problems only: {len(DOWN)} in folded groups" in status(app), status(app)
        assert "nothing needs attention" not in status(app)
        await pilot.press("C")
        await settle(pilot, app)
        assert {k for k in grid.order if not grid.is_span(k)} == shown
        await pilot.press("slash", *"e00")  # the filter over what is left, fast at any size
        await settle(pilot, app)
        assert {k for k in grid.order if not grid.is_span(k)} == {k for k in shown if k.startswith("engine:e00")}
        matching = sum(1 for i in range(ENGINES) if bigpool.engine_name(i).startswith("e00"))
        down = sum(1 for k in grid.order if not grid.is_span(k))
        said = f"filter: 'e00' ({ENGINES - matching} hidden)  problems only: {matching - down} hidden"
        assert said in status(app), status(app)  # each count by what hides it
        await pilot.press(*"01")  # e0001 is healthy: nothing left, and the problems are hidden by the filter
        await settle(pilot, app)
        said = f"problems only: none of the {len(DOWN)} match the filter"
        assert not [k for k in grid.order if not grid.is_span(k)] and said in status(app), status(app)
        assert "nothing needs attention" not in status(app)  # it was said, with 10 engines down
        await pilot.press("escape", "p")
        await settle(pilot, app)
        assert grid.row_count == 20 + ENGINES and "hidden" not in status(app)
        await pilot.press("G")  # one flat list by name, then grouped by host again
        await settle(pilot, app)
        assert not any(grid.is_span(k) for k in grid.order) and "grouped" not in status(app)
        # sorted and filtered by words read from the model, the rows out of view never built for it
        healthy = [k for k in grid.order if k not in shown]
        assert healthy == sorted(healthy) and healthy[-1] == "engine:e0999"
        await pilot.press("slash", *"model-13")
        await settle(pilot, app)
        assert grid.row_count == 50 and all(int(k[8:]) % 20 == 13 for k in grid.order), grid.order
        await pilot.press("escape")
        await pilot.press("G")
        await settle(pilot, app)
        assert "grouped by host" in status(app) and grid.row_count == 250 + ENGINES


async def test_a_click_selects_a_double_click_opens_and_a_click_folds_a_group(tmp_path: Path) -> None:
    app = static_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await feed(app)
        await settle(pilot, app)
        grid = app.screen.query_one(PoolGrid)
        row = grid.order.index("engine:qwen3-30b-a3b")
        await pilot.click("#pool", offset=(20, row + 1))  # line 0 is the header
        await settle(pilot, app)
        assert isinstance(app.screen, OverviewScreen) and grid.cursor_key == "engine:qwen3-30b-a3b"
        await pilot.double_click("#pool", offset=(20, row + 1))
        await settle(pilot, app)
        assert isinstance(app.screen, DetailScreen) and app.screen.key == "engine:qwen3-30b-a3b"
        await pilot.press("escape")
        await settle(pilot, app)

        tp4 = grid.order.index("host:tp4")
        await pilot.click("#pool", offset=(20, tp4 + 1))  # a click on a host's line folds its engines
        await settle(pilot, app)
        assert "engine:qwen3-next-80b" not in grid.order
        assert grid.get_cell("host:tp4", "line").plain.startswith("▸ tp4  [1 engine, all ok]")
        await pilot.click("#pool", offset=(20, tp4 + 1))
        await settle(pilot, app)
        assert "engine:qwen3-next-80b" in grid.order
        await pilot.press("c")  # `c` from any row of a group folds it, the cursor on its line
        await settle(pilot, app)
        assert grid.cursor_key == "host:tp4" and "engine:qwen3-next-80b" not in grid.order


async def test_the_footer_shows_this_screens_keys_and_remapped_keys_work(tmp_path: Path) -> None:
    config = parse_config((uipool.ROOT / "hosts.toml").read_text() + '\n[keys]\ngroup = "b"\n')
    app = PoolApp(config, live=False, clock=uipool.clock, theme_state=tmp_path / "ui.json")
    async with app.run_test(size=(200, 40)) as pilot:
        await feed(app)
        await settle(pilot, app)
        keys = footer(app)
        assert {"Filter", "Problems", "Detail", "Restart", "Log", "Help", "Quit"} <= keys, keys
        assert not {"Window", "Pause", "Fast"} & keys, keys  # the detail's and the replay's (their footer labels)
        await pilot.press("w")  # not this screen's: does nothing here
        assert app.window_index == 0
        await pilot.press("b")  # the remapped key
        await settle(pilot, app)
        assert "grouped by model" in status(app)
        palette = {e.title.split("  (")[0] for e in app.palette_entries()}
        assert "Group by" in palette and "Chart window" not in palette

        grid = app.screen.query_one(PoolGrid)
        grid.move_cursor(grid.order.index("engine:qwen3-next-80b"))
        await pilot.press("enter")
        await settle(pilot, app)
        assert isinstance(app.screen, DetailScreen)
        keys = footer(app)
        assert "Window" in keys and not {"Filter", "Problems", "Detail"} & keys, keys
        await pilot.press("w")
        assert app.window_index == 1
        palette = {e.title.split("  (")[0] for e in app.palette_entries()}
        assert "Chart window" in palette and "Filter" not in palette


async def test_at_120_columns_every_footer_key_is_on_screen(tmp_path: Path) -> None:
    """The footer holds the keys that matter on each screen, and at 120 columns all of them show, Help first and
    q last: Quit on the overview, Back on a screen opened from it (the rest are in the help screen and the
    palette)."""
    app = PoolApp(uipool.config(), live=False, clock=uipool.clock, theme_state=tmp_path / "ui.json")
    async with app.run_test(size=(120, 40)) as pilot:
        await feed(app)
        await settle(pilot, app)
        for screen in ("overview", "detail"):
            if screen == "detail":
                grid = app.screen.query_one(PoolGrid)
                grid.move_cursor(grid.order.index("engine:qwen3-next-80b"))
                await pilot.press("enter")
                await settle(pilot, app)
                assert isinstance(app.screen, DetailScreen)
            shown = [k for k in app.screen.query(FooterKey) if k.description != "palette"]  # Ctrl+P, docked right
            last = "Quit" if screen == "overview" else "Back"
            assert shown and shown[-1].description == last, [k.description for k in shown]
            assert shown[0].description == "Help", [k.description for k in shown]
            palette = [k for k in app.screen.query(FooterKey) if k.description == "palette"]
            edge = palette[0].region.x if palette else app.size.width
            cut = [k.description for k in shown if k.region.right > edge or not k.region.width]
            assert not cut, f"{screen}: off screen or cut: {cut}"


async def test_at_80_columns_the_footer_still_shows_help(tmp_path: Path) -> None:
    """At 80 columns the footer is cut after seven keys or so: Help comes first, whole on screen, so a new
    operator finds every other key from there."""
    app = PoolApp(uipool.config(), live=False, clock=uipool.clock, theme_state=tmp_path / "ui.json")
    async with app.run_test(size=(80, 24)) as pilot:
        await feed(app)
        await settle(pilot, app)
        shown = [k for k in app.screen.query(FooterKey) if k.description != "palette"]
        palette = [k for k in app.screen.query(FooterKey) if k.description == "palette"]
        edge = palette[0].region.x if palette else app.size.width
        first = shown[0]
        assert first.description == "Help" and first.key == "question_mark", [k.description for k in shown]
        assert first.region.width and first.region.right <= edge, first.region


@asynccontextmanager
async def overload_pool(keys: Path) -> AsyncIterator[SimPool]:
    """`poolconsole demo --scenario overload`: four times the demo's traffic (hosts over SSH)."""
    pool = SimPool("overload", seed=7)
    await pool.start(keys)
    try:
        await pool.wait_ready()
        yield pool
    finally:
        await pool.stop()


async def test_on_the_overload_scenario_the_totals_add_up_and_nothing_overflows(tmp_path: Path) -> None:
    async with overload_pool(tmp_path / "keys") as pool:
        config = parse_config(pool.config_toml().replace("poll_interval_s = 1.0", "poll_interval_s = 0.5"))
        app = PoolApp(config, theme_state=tmp_path / "ui.json")
        for size in ((120, 40), (80, 24)):
            async with app.run_test(size=size) as pilot:
                await asyncio.sleep(3.0)
                for _ in range(3):  # three refreshes, each adding up on its own
                    await asyncio.sleep(0.5)
                    await settle(pilot, app)
                    assert summary_tps(app) == rows_tps(app) > 0
                    assert_cells_fit(app)
            app = PoolApp(config, theme_state=tmp_path / "ui.json")
