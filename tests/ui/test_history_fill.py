"""A live console fills its charts from the history store once its first polls are on screen (issue 14:
"on launch its charts are filled from it"), not before: the read would delay the first frame with data.

The engine answers nothing (a closed port on 127.0.0.1): its first poll is a failure, which is a result
drawn like any other, so the fill follows it."""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import cast

import pytest
from textual.pilot import Pilot

from poolconsole.config import PoolConfig, parse_config
from poolconsole.model.pool_state import PoolState
from poolconsole.ops import audit
from poolconsole.runtime.store import Store, read_history
from poolconsole.ui import app as app_module
from poolconsole.ui.app import PoolApp
from poolconsole.ui.grid import PoolGrid
from tests.helpers import uipool


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_a_live_console_fills_its_charts_from_the_store(tmp_path: Path) -> None:
    cfg = uipool.config()
    state = PoolState(cfg)
    view = next(
        v
        for v in (state.apply_engine(s) for s in uipool.engine_snapshots(cfg))
        if v.kind == "vllm" and v.kv_cache_usage
    )
    config = parse_config(
        f'[[engines]]\nname = "{view.name}"\nkind = "vllm"\nurl = "http://127.0.0.1:{closed_port()}"\n'
        "[settings]\npoll_interval_s = 1\n"
    )
    path = tmp_path / "history.sqlite3"
    store = Store(path, background=False)
    t0 = time.time() - 120
    for i in range(30):
        store.engine(replace(view, polled_at=t0 + 2 * i, kv_cache_usage=i / 100), {}, t0 + 2 * i)
    store.close()

    app = PoolApp(config, theme_state=tmp_path / "ui.json", store=path)
    async with app.run_test(size=(120, 40)) as pilot:
        for _ in range(100):  # the first poll fails at once: its frame, then the read
            await pilot.pause(0.05)
            if len(app.state.engines[view.name].history.times) >= 30:
                break
        track = app.state.engines[view.name]
        assert track.view is not None and not track.view.state.answering, "the failed first poll was not applied"
        assert track.history.kv.tail(31)[:30] == [i / 100 for i in range(30)], "the stored points are not in the chart"
        assert track.history.times.tail(31)[0] == t0


async def test_the_first_poll_is_drawn_at_once_after_the_audit_log_was_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The audit log's entries, read at launch, reach the timeline before any poll: that change must not
    take the first frame's immediate redraw, leaving the first poll on screen only at the next tick. Here
    the tick never comes (REDRAW_S an hour): only the first poll's own redraw can draw it."""
    monkeypatch.setattr(app_module, "REDRAW_S", 3600.0)
    with socket.socket() as silent:  # accepts (the backlog) and never answers: the poll times out in 1 s
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        config = parse_config(
            f'[[engines]]\nname = "slow"\nkind = "vllm"\nurl = "http://127.0.0.1:{port}"\n'
            "[settings]\npoll_interval_s = 60\nhttp_timeout_s = 1\n"
        )
        audit.record(tmp_path / "audit.db", "restart", "slow", [], "ok", "an earlier action", 1.0)
        app = PoolApp(config, theme_state=tmp_path / "ui.json", store=tmp_path / "history.sqlite3")
        app.audit_path = tmp_path / "audit.db"
        async with app.run_test(size=(120, 40)) as pilot:
            for _ in range(200):
                await pilot.pause(0.05)
                if app.state.engines["slow"].view is not None:
                    break
            assert app.state.engines["slow"].view is not None, "the first poll was not applied"
            assert any("restart" in e.message for e in app.events.entries), "the audit log was not read"
            await pilot.pause(0.3)
            grid = app.screen.query_one(PoolGrid)
            assert grid.get_cell("engine:slow", "state").plain == "down", "the first poll is not on screen"


def held_open(monkeypatch: pytest.MonkeyPatch) -> tuple[threading.Event, list[float]]:
    """Store.for_config made to wait (a busy disk) until the test sets the event; the times it opened."""
    opening = Store.for_config.__func__  # type: ignore[attr-defined]
    release = threading.Event()
    opened_at: list[float] = []

    def slow_open(cls: type[Store], /, *args: object, **kw: object) -> Store:
        release.wait(30)
        store = opening(cls, *args, **kw)
        opened_at.append(time.time())
        return store  # type: ignore[no-any-return]

    monkeypatch.setattr(Store, "for_config", classmethod(slow_open))
    return release, opened_at


async def first_polls(pilot: Pilot[None], app: PoolApp) -> list[float]:
    """The times of the engine's first polls applied (two at least, or as many as 10 s gave)."""
    for _ in range(200):
        await pilot.pause(0.05)
        if len(app.state.engines["gone"].history.times) >= 2:
            break
    return cast(list[float], list(app.state.engines["gone"].history.times.tail(50)))


def gone_engine() -> PoolConfig:
    return parse_config(
        f'[[engines]]\nname = "gone"\nkind = "vllm"\nurl = "http://127.0.0.1:{closed_port()}"\n'
        "[settings]\npoll_interval_s = 0.2\n"
    )


def gone_console(tmp_path: Path) -> tuple[PoolConfig, Path, PoolApp]:
    """A console on the refused engine, recording into a store of its own."""
    config = gone_engine()
    path = tmp_path / "history.sqlite3"
    return config, path, PoolApp(config, theme_state=tmp_path / "ui.json", store=path)


def recorded(path: Path, config: PoolConfig) -> list[float]:
    """The times of the engine's polls the store holds, in its order."""
    return [at for at, *_ in read_history(path, config, 0, time.time() + 1).engines.get("gone", [])]


async def test_the_store_opens_off_the_event_loop_and_keeps_the_polls_applied_meanwhile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Opening the store can wait on the disk (recovering the write-ahead log of a console killed before):
    it is opened in a thread, the first polls are applied and drawn meanwhile, and the store gets them,
    in order, once it is open."""
    release, opened_at = held_open(monkeypatch)
    config, path, app = gone_console(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        applied = await first_polls(pilot, app)
        assert len(applied) >= 2, "the first polls waited for the store"
        assert app.screen.query_one(PoolGrid).get_cell("engine:gone", "state").plain == "down"
        assert app.history_store is None and not opened_at
        release.set()
        for _ in range(100):
            await pilot.pause(0.05)
            if app.history_store is not None:
                break
        assert app.history_store is not None, "the store never opened"
    polled = recorded(path, config)
    assert polled[: len(applied)] == applied, "the polls applied while the store opened were not recorded"
    assert polled == sorted(polled) and all(at < opened_at[0] for at in applied)


async def test_a_console_closed_while_its_store_opens_still_records_what_it_held(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    release, opened_at = held_open(monkeypatch)
    config, path, app = gone_console(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        applied = await first_polls(pilot, app)
        assert len(applied) >= 2 and not opened_at
        threading.Timer(0.3, release.set).start()  # the disk answers while the console closes
    assert opened_at, "the store never opened"
    polled = recorded(path, config)
    assert polled[: len(applied)] == applied, "the polls held while the console closed were lost"


async def told_at_open(app: PoolApp, pilot: Pilot[None], words: str) -> str:
    """The toast containing `words`, once the console's polls went on (or '' after 10 s)."""
    for _ in range(200):
        await pilot.pause(0.05)
        said = [n.message for n in app._notifications if words in n.message]
        if said and app.state.engines["gone"].view is not None:
            return said[0]
    return ""


async def test_a_file_that_is_no_history_store_is_told_and_left_as_it_is(tmp_path: Path) -> None:
    _, path, app = gone_console(tmp_path)
    path.write_bytes(b"my notes, not a database\n" * 100)
    async with app.run_test(size=(120, 40)) as pilot:
        said = await told_at_open(app, pilot, "no history recorded")
        assert said == f"{path} is not a SQLite file (file is not a database): no history recorded"
        assert app.history_store is None and app.runtime.recorder is None, "polls still held for no store"
    assert path.read_bytes() == b"my notes, not a database\n" * 100


async def test_an_open_that_fails_unexpectedly_is_told_naming_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(cls: type[Store], /, *args: object, **kw: object) -> Store:
        raise RuntimeError("the disk is on fire")

    monkeypatch.setattr(Store, "for_config", classmethod(broken))
    _, path, app = gone_console(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        said = await told_at_open(app, pilot, "did not open")
        assert said == f"the history store {path} did not open: RuntimeError('the disk is on fire')"
        assert app.history_store is None and app.runtime.recorder is None
