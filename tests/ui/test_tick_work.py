"""One tick of the console at 1,000 engines (issue 39, item 4): a new poll of one engine in view builds that
engine's row and makes that engine's part of the summary's totals, and nothing else: no other row, no other
target's part (counting wrappers around the parts; the overview's own count of rows built)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from poolconsole.model import tally
from poolconsole.model.snapshots import EngineState
from poolconsole.ui.app import PoolApp
from poolconsole.ui.grid import PoolGrid
from poolconsole.ui.screens import overview_order
from poolconsole.ui.screens.overview_book import RowBook, signature
from tests.helpers import bigpool
from tests.ui.test_console import settle
from tests.ui.test_overview_scale import ENGINES, big_app, overview, poll
from tests.unit.test_summary_tally import counted


@asynccontextmanager
async def polled(tmp_path: Path, engines: int) -> AsyncIterator[tuple[PoolApp, Pilot[None], bigpool.Pages]]:
    """The console at 120x40 on `engines` engines of tests/helpers/bigpool, each polled twice."""
    pages = bigpool.Pages()
    app = big_app(tmp_path, bigpool.config(engines))
    async with app.run_test(size=(120, 40)) as pilot:
        poll(app, pages, 0)
        poll(app, pages, 1)
        await settle(pilot, app)
        yield app, pilot, pages


async def test_one_engine_changed_builds_its_row_and_its_part_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with polled(tmp_path, ENGINES) as (app, _pilot, pages):
        cfg = app.config
        screen, grid = overview(app), app.screen.query_one(PoolGrid)
        made = counted(monkeypatch)
        built = screen.built
        screen.refresh_rows()  # a tick with nothing new: no row built, no part made
        assert screen.built == built and not made
        assert screen.book.stamped <= grid.size.height  # the rows in view (their ages), not the pool
        in_view = next(k for k in grid.order[int(grid.scroll_y) + 3 :] if k.startswith("engine:"))
        name = in_view.removeprefix("engine:")
        app.apply_engine(bigpool.engine_poll(cfg, pages, int(name[1:]), 3))
        screen.refresh_rows()
        assert screen.built == built + 1  # its row, no other
        assert sum(made.values()) == 1 and made[f"engine {name}"] == 1  # its part of the totals, no other
        assert tally._TALLIES[app.state].touched == (("engine", name),)
        # the book stamped that engine's row, its host's line and the rows in view, not the pool's 1,250 rows
        assert screen.book.stamped <= 2 + grid.size.height < ENGINES


async def test_the_rows_kept_from_what_changed_are_the_rows_made_afresh(tmp_path: Path) -> None:
    """Ticks of new polls (a few engines down, then up again: their "why" and need move, and their hosts'),
    each taken in from what changed: every row's cells are those a book made afresh would build."""
    async with polled(tmp_path, 200) as (app, _pilot, pages):
        cfg = app.config
        screen = overview(app)
        for step in range(2, 8):
            hosts, engines = bigpool.polls(cfg, pages, step, every=3)
            for host in hosts:  # its cards' memory moves: its engines' rows show their share
                used = (step % 5 + 1) * 2**33
                app.apply_host(replace(host, gpus=tuple(replace(g, memory_used_bytes=used) for g in host.gpus)))
            for snap in engines:
                index = int(snap.name[1:])
                if index % 7 == step % 7:  # down this tick, up again the next time it is polled
                    snap = replace(snap, state=EngineState.DOWN, error="connection refused", metrics=None)
                app.apply_engine(snap)
            screen.refresh_rows()
            book = screen.book
            assert book.stamped < len(book.cache)
            assert book.inputs is not None
            fresh = RowBook(app.state)
            fresh.build(book.why, book.needs, book.inputs.c, book.inputs.widths, book.inputs.span_width,
                        book.inputs.grouping, set(book.inputs.collapsed))  # fmt: skip
            assert fresh.cache.keys() == book.cache.keys()
            assert (fresh.rank, fresh.group_of, fresh.members, fresh.spans) == (
                book.rank,
                book.group_of,
                book.members,
                book.spans,
            )
            for key in fresh.cache:
                assert signatures(book.cells_of(key)) == signatures(fresh.cells_of(key)), (step, key)


async def test_a_why_that_moved_alone_makes_its_rows_again(tmp_path: Path) -> None:
    """A host's trouble told by the summary alone (no new poll of it): its line and its engines' rows are
    made again (a host's "why" is its engines'), and no other row, once they are read."""
    cfg = bigpool.config(200)
    app = big_app(tmp_path, cfg)
    async with app.run_test(size=(120, 40)) as pilot:
        poll(app, bigpool.Pages(), 0)
        await settle(pilot, app)
        book = overview(app).book
        assert book.inputs is not None
        i = book.inputs
        book.build({}, {}, i.c, i.widths, i.span_width, i.grouping, set(i.collapsed))
        book.current()
        before = dict(book.cache)
        host = bigpool.host_name(3)
        book.build({host: "swap in use"}, {host: 1}, i.c, i.widths, i.span_width, i.grouping, set(i.collapsed))
        rows = {f"host:{host}"} | {f"engine:{bigpool.engine_name(n)}" for n in range(12, 16)}
        assert book.dirty == rows and book.stamped == 0  # made again when drawn or read
        book.current()
        assert {k for k in book.cache if book.cache[k] is not before[k]} == rows
        assert book.rank[f"engine:{bigpool.engine_name(12)}"] == 1
        assert "swap in use" in str(book.cells_of(f"engine:{bigpool.engine_name(13)}")["why"])


def signatures(cells: dict[str, Any]) -> dict[str, str]:
    return {column: signature(value) for column, value in cells.items()}


async def test_a_row_that_changed_out_of_view_shows_its_change_when_scrolled_into_view(tmp_path: Path) -> None:
    """A row drawn once, then changed while out of view, is drawn from the model when it scrolls back into
    view, before the next refresh: not from what the grid drew of it before."""
    async with polled(tmp_path, 200) as (app, pilot, pages):
        cfg = app.config
        screen, grid = overview(app), app.screen.query_one(PoolGrid)
        last = grid.order[-1]
        grid.action_jump(-1)  # drawn once ...
        await pilot.pause()
        assert grid.get_cell(last, "state").plain == "ok"
        grid.action_jump(0)  # ... and out of view again
        await pilot.pause()
        screen.refresh_rows()
        assert last not in grid.stale
        assert "qwen-new" not in grid.get_cell(last, "model").plain
        app.apply_engine(replace(bigpool.engine_poll(cfg, pages, int(last[8:]), 2), models=("qwen-new",)))
        screen.refresh_rows()
        assert grid.order[-1] == last and last in grid.stale
        grid.action_jump(-1)
        await pilot.pause()
        assert "qwen-new" in grid.get_cell(last, "model").plain


async def test_the_filter_reads_a_row_that_changed_out_of_view_as_it_is_now(tmp_path: Path) -> None:
    """The filter matches the rows' words as the model has them: an engine out of view whose model changed
    is found by its new model's name."""
    async with polled(tmp_path, 200) as (app, _pilot, pages):
        cfg = app.config
        screen, grid = overview(app), app.screen.query_one(PoolGrid)
        last = grid.order[-1]
        app.apply_engine(replace(bigpool.engine_poll(cfg, pages, int(last[8:]), 2), models=("qwen-new",)))
        screen.refresh_rows()
        screen.filter_text = "qwen-new"
        screen.refresh_rows()
        assert [k for k in grid.order if k.startswith("engine:")] == [last]


async def test_the_order_is_made_again_only_when_what_it_reads_moved(tmp_path: Path) -> None:
    """A tick in which no row's need moved gives the last order again (the default view: by host, grouped by
    host); an engine down moves its need (the problems first), and the order made then is the one a fresh
    order would be; sorting by a number makes it every tick."""
    async with polled(tmp_path, 200) as (app, pilot, pages):
        cfg = app.config
        screen, grid = overview(app), app.screen.query_one(PoolGrid)
        memo = screen.order_memo
        screen.refresh_rows()
        made = memo.remade
        app.apply_engine(bigpool.engine_poll(cfg, pages, 5, 3))  # new figures, the same need
        screen.refresh_rows()
        assert memo.remade == made
        before = list(grid.order)
        down = replace(bigpool.engine_poll(cfg, pages, 150, 4), state=EngineState.DOWN, error="refused", metrics=None)
        app.apply_engine(down)
        screen.refresh_rows()
        assert memo.remade == made + 1
        choices = screen.choices()
        assert choices.first and overview_order.steady(choices)
        fresh = overview_order.shown(screen.book.cache, screen.book, choices)
        assert grid.order == fresh.order != before  # its host's group among the problems, first
        await pilot.press("s")  # by tok/s: read from the figures, made each refresh
        screen.refresh_rows()
        screen.refresh_rows()
        assert memo.remade >= made + 3 and memo.made is None
