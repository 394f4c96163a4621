"""`poolconsole replay`: a recording of the demo pool played back shows what the pool looked like at each
recorded moment (the views as they were, ages on the recording's clock), with pause, seek and speed,
read-only, every screen working."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, cast

import pytest

from poolconsole.config import parse_config
from poolconsole.runtime.live import LivePool, Update
from poolconsole.runtime.replay import Replay
from poolconsole.runtime.store import Store, record
from poolconsole.sim.demo import SimPool
from poolconsole.ui.app import PoolApp
from poolconsole.ui.grid import PoolGrid
from poolconsole.ui.screens.overview import OverviewScreen


async def _record(tmp: Path) -> tuple[Path, dict[Any, Any]]:
    pool = SimPool(seed=31)
    await pool.start(tmp / "keys")
    try:
        await pool.wait_ready()
        text = pool.config_toml().replace("poll_interval_s = 1.0", "poll_interval_s = 0.5")
        config = parse_config(text)
        path = tmp / "history.sqlite3"
        path.with_name("demo.toml").write_text(text)  # the hosts.toml it was recorded with
        store = Store.for_config(config, path)
        live = LivePool(config, recorder=store)
        views: dict[Any, Any] = {}

        def heard(update: Update) -> None:
            track = live.state.engines.get(update.target)
            if update.kind == "engine" and track is not None and track.view is not None:
                views[(update.target, track.view.polled_at)] = track.view

        live.subscribe(heard)
        stop = asyncio.Event()
        asyncio.get_running_loop().call_later(6, stop.set)
        await record(live, store, stop)
        return path, views
    finally:
        await pool.stop()


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[Any, Any]]:
    """Six seconds of the demo pool in a history store, and every view the live pool held, by poll time."""
    return asyncio.run(_record(tmp_path_factory.mktemp("replay")))


async def test_the_recorded_moment_is_what_the_pool_showed(recording: tuple[Path, dict[Any, Any]]) -> None:
    path, views = recording
    replay = Replay(path)
    try:
        assert {e.name for e in replay.config.engines} == {name for name, _ in views}
        recorded_hosts = {name for kind, name in replay.reader.targets.values() if kind == "host"}
        assert "gateway" in recorded_hosts and "gateway" in {e.name for e in replay.config.engines}
        assert {h.name for h in replay.config.hosts} == recorded_hosts  # the host named as an engine too
        replay._rewind()
        middle = sorted(at for _, at in views)[len(views) // 2]
        replay.advance(middle - replay.position)
        assert replay.clock() == middle  # the time shown is the recording's
        for name, track in replay.state.engines.items():
            recorded = max((at for n, at in views if n == name and at <= middle), default=None)
            if recorded is None:
                continue
            assert track.view is not None
            assert track.view.polled_at == recorded
            live = views[(name, recorded)]
            for field in ("state", "requests_running", "requests_waiting", "kv_cache_usage", "generation_tokens_per_s"):
                assert getattr(track.view, field) == getattr(live, field), (name, field)
        host = replay.state.hosts["tp4"]
        assert host.snapshot is not None and len(host.snapshot.gpus) == 4
        assert (
            replay.state.age_s(host.last_ok_at) is not None and cast(float, replay.state.age_s(host.last_ok_at)) < 2.0
        )
        # seek back rebuilds the state at the earlier moment, pause stops the clock, speed steps
        before = replay.position
        replay.seek(-2.0)
        assert replay.position == pytest.approx(before - 2.0)
        earlier = replay.state.engines["qwen3-next-80b"].view
        assert earlier is not None and earlier.polled_at is not None and earlier.polled_at <= replay.position
        replay.toggle_pause()
        assert replay.paused and "paused" in replay.label()
        replay.faster(True)
        assert replay.speed == 2.0
    finally:
        replay.close()


def test_a_replay_given_the_hosts_toml_names_each_engines_model_and_profile(
    recording: tuple[Path, dict[Any, Any]],
) -> None:
    """The recording holds readings, not what an engine is configured as: the detail said "profile -" where
    the live console named the profile. Given the hosts.toml (`--config`), each engine it names the same way
    (name, kind, URL) has its model and profiles; one at another URL is not taken for it."""
    path, _ = recording
    known = parse_config(path.with_name("demo.toml").read_text())
    configured = {e.name: e for e in known.engines}
    assert configured["qwen3-30b-a3b"].profile  # so that the moved engine's None says something
    moved = known.model_copy(update={"engines": [
        e.model_copy(update={"url": "http://127.0.0.1:9"}) if e.name == "qwen3-30b-a3b" else e for e in known.engines
    ]})  # fmt: skip
    for given, profile_of_30b in ((known, configured["qwen3-30b-a3b"].profile), (moved, None)):
        replay = Replay(path, known=given)
        try:
            engines = {e.name: e for e in replay.config.engines}
            assert engines["qwen3-next-80b"].profile == "awq-4bit-tp4"
            assert engines["qwen3-next-80b"].profiles == configured["qwen3-next-80b"].profiles
            assert engines["qwen3-next-80b"].control is None  # a replay acts on nothing
            assert engines["qwen3-30b-a3b"].profile == profile_of_30b
        finally:
            replay.close()
    replay = Replay(path)
    try:
        assert {e.profile for e in replay.config.engines} == {None}  # without the file: not invented
    finally:
        replay.close()


async def test_the_console_plays_a_recording_read_only(recording: tuple[Path, dict[Any, Any]], tmp_path: Path) -> None:
    path, _ = recording
    replay = Replay(path, speed=4.0)
    app = PoolApp(replay.config, replay=replay, theme_state=tmp_path / "ui.json")
    try:
        async with app.run_test(size=(140, 40)) as pilot:
            for _ in range(40):
                await pilot.pause(0.1)
                if all(t.view is not None for t in app.state.engines.values()):
                    break
            assert isinstance(app.screen, OverviewScreen)
            assert all(t.view is not None for t in app.state.engines.values())
            assert app.sub_title.startswith("replay 20") and " UTC x4" in app.sub_title
            assert app.read_only and not app.check_action("restart", ()) and not app.check_action("smoke", ())
            assert app.check_action("replay_pause", ())
            await pilot.press("space")
            assert replay.paused and "paused (x4)" in app.sub_title
            await pilot.press("plus")  # the speed set while paused shows at once
            assert replay.speed == 8.0 and "paused (x8)" in app.sub_title
            at = replay.position
            await pilot.pause(0.6)
            assert replay.position == at  # paused: the recording's clock stands still
            for key in ("m", "R", "l"):  # what would reach the live pool, or change it, says why it does nothing
                await pilot.press(key)
            await pilot.pause()
            told = [n.message for n in app._notifications]
            assert "a replay has no live pool: Smoke test is refused" in told, told
            assert "a replay has no live pool: Engine log is refused" in told, told
            shown = {b.binding.action for b in app.active_bindings.values() if b.enabled}
            assert not {"app.logs", "app.security", "app.smoke"} & shown  # not offered in its footer either
            await pilot.resize_terminal(120, 40)
            await pilot.pause(0.3)
            keys = {k.description: k.region for k in app.screen.query("FooterKey")}  # type: ignore[attr-defined]
            palette = 120 - len("▏^p palette")  # the palette's mark covers the footer's right end
            for label in ("Pause", "-1 min", "+1 min", "Quit"):  # each whole at 120 columns
                assert label in keys and keys[label].right <= palette, (label, keys)
            assert "read-only console (a replay): Restart engine is refused" in told, told
            await pilot.press("left_square_bracket")
            assert replay.position <= at
            grid = app.screen.query_one(PoolGrid)  # Enter on an engine's row (on a host's line it folds the group)
            grid.move_cursor(next(i for i, k in enumerate(grid.order) if k.startswith("engine:")))
            await pilot.press("enter")
            await pilot.pause()
            assert type(app.screen).__name__ == "DetailScreen"
    finally:
        replay.close()


async def test_replay_keys_do_not_exist_in_a_live_console(tmp_path: Path) -> None:
    config = parse_config('[[engines]]\nname = "e"\nkind = "vllm"\nurl = "http://127.0.0.1:9"\n')
    app = PoolApp(config, live=False, theme_state=tmp_path / "ui.json")
    async with app.run_test(size=(120, 30)):
        assert not app.check_action("replay_pause", ()) and app.check_action("smoke", ())
        assert not [e for e in app.palette_entries() if "replay" in e.help.lower()]
