"""The one pool-source contract (runtime.source): the live pool and a recording played back both answer it, and
say by their capabilities what a view may offer; a replay tells its subscribers what it applies, and a failure
to play as a "problem" update instead of an exception nobody sees."""

from __future__ import annotations

import asyncio
from pathlib import Path

from poolconsole.config import parse_config
from poolconsole.runtime.live import Backlog, LivePool, Update
from poolconsole.runtime.replay import Replay
from poolconsole.runtime.source import Capabilities, LiveSource, PoolSource
from tests.ui.test_events_timeline import write_recording

CONFIG = '[[engines]]\nname = "e"\nkind = "vllm"\nurl = "http://127.0.0.1:9"\n'


def test_capabilities_say_what_each_source_is(tmp_path: Path) -> None:
    runtime = LivePool(parse_config(CONFIG))
    live: PoolSource = LiveSource(runtime, read_only=True)
    assert live.capabilities == Capabilities(live=True, replay=False, read_only=True)
    assert live.playback is None and live.recorded is None and live.label() is None
    assert live.state is runtime.state and live.events is runtime.events
    assert not LiveSource(runtime, polling=False).capabilities.live
    path = tmp_path / "history.sqlite3"
    write_recording(path)
    replay = Replay(path)
    source: PoolSource = replay
    try:
        assert source.capabilities == Capabilities(live=False, replay=True, read_only=True)
        assert source.playback is not None and source.recorded == path
        assert (source.label() or "").startswith("replay 20")
    finally:
        replay.close()


async def test_a_replay_tells_its_subscribers_what_it_plays(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite3"
    engine, _ = write_recording(path)
    replay = Replay(path, speed=60.0)
    heard: list[Update] = []
    replay.subscribe(heard.append)
    try:
        replay.start()
        for _ in range(40):
            await asyncio.sleep(0.05)
            if any(u.target == engine for u in heard):
                break
        assert any(u.target == engine and u.kind == "engine" for u in heard), heard
        await replay.stop()
        told = len(heard)
        await asyncio.sleep(0.3)
        assert len(heard) == told  # stopped: nothing more is played
    finally:
        replay.close()


async def test_a_replay_that_fails_says_so(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite3"
    write_recording(path)
    replay = Replay(path)
    heard: list[Update] = []
    replay.subscribe(heard.append)
    replay.close()  # its reader closed: the first read fails
    replay.start()
    for _ in range(40):
        await asyncio.sleep(0.05)
        if heard:
            break
    assert [u.kind for u in heard] == ["problem"], heard
    assert (heard[0].message or "").startswith("the replay stopped: ")
    await replay.stop()


async def test_a_backlog_is_heard_first_then_the_live_updates() -> None:
    runtime = LivePool(parse_config(CONFIG))
    backlog = Backlog(runtime)
    early = Update("e", "problem", message="first")
    runtime._tell(early)  # as a poll loop tells, before the view subscribed
    source = LiveSource(runtime, backlog=backlog)
    heard: list[Update] = []
    source.subscribe(heard.append)
    assert heard == []  # held until start, as the console mounts
    source.start()
    later = Update("e", "problem", message="later")
    runtime._tell(later)
    assert heard == [early, later]
    await source.stop()
