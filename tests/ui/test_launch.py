"""The console's start-up (ui.launch): the runtime's first requests go out before the UI modules load, and
the app then takes over the started runtime: its loops once, what it told before the app subscribed, and the
polls it applied before the history store opened (issue 14: the first frame with data within 0.6 s)."""

from __future__ import annotations

import asyncio
import gc
import time
from pathlib import Path

import pytest

from poolconsole.config import PoolConfig, parse_config
from poolconsole.runtime.live import GC_THRESHOLD, Backlog, LivePool, Update
from poolconsole.runtime.store import read_history
from poolconsole.ui import launch
from poolconsole.ui.app import PoolApp
from poolconsole.ui.screens.overview import OverviewScreen
from tests.helpers.rawhttp import RawHTTPServer, Reply

VLLM = Path(__file__).resolve().parents[1] / "fixtures" / "real" / "vllm-0.32.0-cpu"
FIRST_POLL = ("/metrics", "/v1/models", "/version")


async def vllm_engines(count: int) -> list[RawHTTPServer]:
    """vLLM 0.32.0 as captured: /metrics, /v1/models and /version, each engine on its own port."""
    routes = {
        "/metrics": Reply.file(VLLM / "metrics.idle.txt"),
        "/v1/models": Reply.file(VLLM / "v1_models.json", "application/json"),
        "/version": Reply.file(VLLM / "version.json", "application/json"),
    }
    return [await RawHTTPServer(routes).start() for _ in range(count)]


def pool(engines: list[RawHTTPServer]) -> PoolConfig:
    tables = "".join(f'[[engines]]\nname = "e{i}"\nkind = "vllm"\nurl = "{e.url}"\n' for i, e in enumerate(engines))
    return parse_config(tables + "[settings]\npoll_interval_s = 60\n")  # one poll in the test's time


async def test_the_first_requests_go_out_before_the_ui_loads_and_the_app_takes_the_runtime_over(
    tmp_path: Path,
) -> None:
    engines = await vllm_engines(3)
    config = pool(engines)
    asked_before_ui: list[dict[str, int]] = []
    shown: list[tuple[Path | None, Path | None]] = []

    class Console(PoolApp):
        def on_mount(self) -> None:  # Textual calls PoolApp's own on_mount as well
            self.set_interval(0.05, self._check)

        def _check(self) -> None:
            screen = self.screen
            if isinstance(screen, OverviewScreen) and all(t.view for t in self.state.engines.values()):
                shown.append((self.audit_path, self.smoke_db))
                self.exit()

    def load_app() -> type[PoolApp]:
        asked_before_ui.extend(dict(e.hits) for e in engines)
        return Console

    store = tmp_path / "history.sqlite3"
    stores = (tmp_path / "audit.sqlite3", tmp_path / "smoke.sqlite3")  # a demo's own, say
    threshold = gc.get_threshold()
    gc.disable()  # as the command's entry point leaves it (poolconsole/__main__.py)
    try:
        await asyncio.wait_for(
            launch.run_console(
                config, read_only=True, subtitle="t", store=store, stores=stores, headless=True, load_app=load_app
            ),
            60,
        )
        collector = (gc.isenabled(), gc.get_threshold()[0])
    finally:
        gc.enable()
        gc.unfreeze()
        gc.set_threshold(*threshold)
        for engine in engines:
            await engine.stop()
    assert collector == (True, GC_THRESHOLD), "the console left the collector paused or on its defaults"
    # every first request is out by then on an idle machine; a busy one may hand loopback's packets on later
    assert sum(sum(hits.values()) for hits in asked_before_ui) > 0, "no request was out before the UI loaded"
    assert shown == [stores], "the console never showed the first polls, or not with the stores it was given"
    assert [e.hits for e in engines] == [dict.fromkeys(FIRST_POLL, 1)] * 3, "the runtime's loops ran twice"
    stored = read_history(store, config, 0, time.time() + 1)
    assert sorted(stored.engines) == ["e0", "e1", "e2"], "the polls applied before the store opened were lost"


async def test_until_idle_waits_for_the_loops_work() -> None:
    """A loop that works in steps (connects, sends) is turned until it waits on nothing but the network."""
    steps: list[int] = []

    async def work() -> None:
        for step in range(6):
            began = time.perf_counter()
            while time.perf_counter() - began < 0.003:  # busy, as connecting and sending a request are
                pass
            steps.append(step)
            await asyncio.sleep(0)

    task = asyncio.get_running_loop().create_task(work())
    await launch.until_idle(max_wait_s=60)
    assert task.done() and steps == list(range(6))


async def test_until_idle_gives_up_on_a_loop_that_never_goes_idle() -> None:
    async def spin() -> None:
        while True:
            began = time.perf_counter()
            while time.perf_counter() - began < 0.001:
                pass
            await asyncio.sleep(0)

    task = asyncio.get_running_loop().create_task(spin())
    try:
        await asyncio.wait_for(launch.until_idle(max_wait_s=0.2), 30)  # a TimeoutError: it waited on
    finally:
        task.cancel()


def test_a_backlog_hands_over_what_was_told_in_order_then_the_updates_that_follow() -> None:
    runtime = LivePool(parse_config(""))
    backlog = Backlog(runtime)
    runtime._tell(Update("a", "engine"))
    runtime._tell(Update("b", "problem", message="the poll loop of b stopped"))
    heard: list[Update] = []
    backlog.hand_over(heard.append)
    runtime._tell(Update("c", "engine"))
    assert [u.target for u in heard] == ["a", "b", "c"]
    assert backlog.updates == [], "the backlog kept collecting after it handed over"


async def test_a_problem_told_before_the_app_subscribed_is_shown(tmp_path: Path) -> None:
    config = parse_config("")
    runtime = LivePool(config)
    backlog = Backlog(runtime)
    runtime._tell(Update("a", "problem", message="the poll loop of a stopped: boom"))
    app = PoolApp(config, theme_state=tmp_path / "ui.json", started=backlog)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        runtime._tell(Update("b", "problem", message="the poll loop of b stopped: bang"))  # after it subscribed
        await pilot.pause()
        told = [n.message for n in app._notifications]
        assert told.count("the poll loop of a stopped: boom") == 1, told
        assert told.count("the poll loop of b stopped: bang") == 1, told


async def test_a_launch_that_fails_before_the_app_runs_stops_the_loops() -> None:
    engines = await vllm_engines(1)

    def broken() -> type[PoolApp]:
        raise RuntimeError("the UI did not import")

    try:
        with pytest.raises(RuntimeError, match="did not import"):
            await launch.run_console(pool(engines), read_only=True, subtitle="t", headless=True, load_app=broken)
        loops = [t for t in asyncio.all_tasks() if t.get_name().startswith("poll ") and not t.done()]
        assert not loops, f"poll loops left running: {loops}"
    finally:
        for engine in engines:
            await engine.stop()
