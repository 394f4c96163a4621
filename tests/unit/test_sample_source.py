"""`status`'s bounded sampling run is a PoolSource (runtime.sampling.SampleSource): it answers the contract, holds
each engine's view of its whole run in its state, tells its subscribers what it applied, and `status` reads the
pool through it. Everything on loopback: a served vLLM capture, and ports nothing listens on."""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from poolconsole.commands import status
from poolconsole.config import parse_config
from poolconsole.config.models import PoolConfig
from poolconsole.model.hosts import HostState
from poolconsole.model.snapshots import EngineState
from poolconsole.runtime import sampling
from poolconsole.runtime.live import Update
from poolconsole.runtime.sampling import SampleSource
from poolconsole.runtime.source import Capabilities, PoolSource
from tests.helpers.rawhttp import RawHTTPServer, free_port
from tests.integration.test_engine_http import vllm_routes


def dead_pool() -> PoolConfig:
    """An engine and a host that refuse at once: nothing listens on their ports."""
    return parse_config(
        f'[[hosts]]\nname = "gpu1"\naddress = "127.0.0.1"\nport = {free_port()}\n\n'
        f'[[engines]]\nname = "d"\nkind = "sglang"\nurl = "http://127.0.0.1:{free_port()}"\nhost = "gpu1"\n'
    )


@pytest.fixture
async def vllm() -> AsyncIterator[RawHTTPServer]:
    server = await RawHTTPServer(vllm_routes()).start()
    yield server
    await server.stop()


def test_the_sampling_run_answers_the_contract() -> None:
    source: PoolSource = SampleSource(dead_pool(), samples=1, interval_s=0)
    assert source.capabilities == Capabilities(live=True, replay=False, read_only=True)
    assert source.playback is None and source.recorded is None and source.label() is None
    assert set(source.state.engines) == {"d"} and set(source.state.hosts) == {"gpu1"}


async def test_subscribers_hear_each_applied_result_and_the_state_holds_it() -> None:
    source = SampleSource(dead_pool(), samples=2, interval_s=0)
    heard: list[Update] = []
    source.subscribe(heard.append)
    source.start()
    taken = await asyncio.wait_for(source.finished(), 20)
    await source.stop()
    assert sorted((u.target, u.kind) for u in heard) == [("d", "engine"), ("gpu1", "host")]
    view = source.state.engines["d"].view
    host = source.state.hosts["gpu1"].snapshot
    assert view is not None and view.state is EngineState.DOWN
    assert host is not None and host.state is HostState.UNREACHABLE
    assert taken.engines == (view,) and taken.hosts == (host,) and not taken.healthy
    assert source.clock() == pytest.approx(time.time(), abs=5)


async def test_an_engine_view_spans_every_sample_of_the_run(vllm: RawHTTPServer) -> None:
    """The state holds the view of all three polls (what `status` prints), not of the last two."""
    config = parse_config(f'[[engines]]\nname = "v"\nkind = "vllm"\nurl = "{vllm.url}"\n')
    source = SampleSource(config, samples=3, interval_s=0.3)
    taken = await asyncio.wait_for(source.finished(), 20)
    await source.stop()
    view = source.state.engines["v"].view
    assert view is not None and view.state is EngineState.OK and taken.healthy
    assert view.window_s is not None and view.window_s >= 0.55, view.window_s
    assert source.state.engines["v"].last_ok_at is not None


async def test_poll_now_cuts_the_wait_between_polls(vllm: RawHTTPServer) -> None:
    config = parse_config(f'[[engines]]\nname = "v"\nkind = "vllm"\nurl = "{vllm.url}"\n')
    source = SampleSource(config, samples=2, interval_s=60)
    finished = asyncio.ensure_future(source.finished())
    for _ in range(200):  # until the wait after the first poll is cut short (a loaded machine polls late)
        if finished.done():
            break
        source.poll_now()
        await asyncio.sleep(0.05)
    await asyncio.wait_for(finished, 1)
    await source.stop()
    assert vllm.hits["/metrics"] == 2


async def test_stop_ends_a_run_early() -> None:
    source = SampleSource(dead_pool(), samples=5, interval_s=60)
    heard: list[Update] = []
    source.subscribe(heard.append)
    source.start()
    for _ in range(200):  # the host answers at once (refused); the engine waits a minute for its next poll
        if heard:
            break
        await asyncio.sleep(0.05)
    await asyncio.wait_for(source.stop(), 10)
    assert source.taken_at is None and [u.kind for u in heard] == ["host"]  # the engine never finished its run
    with pytest.raises(RuntimeError):
        source.sample()


def test_status_reads_the_pool_through_the_sampling_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    used: list[SampleSource] = []
    stopped: list[SampleSource] = []

    class Watched(SampleSource):
        def start(self) -> None:
            used.append(self)
            super().start()

        async def stop(self) -> None:
            stopped.append(self)
            await super().stop()

    monkeypatch.setattr(sampling, "SampleSource", Watched)
    config = tmp_path / "hosts.toml"
    config.write_text(f'[[engines]]\nname = "d"\nkind = "sglang"\nurl = "http://127.0.0.1:{free_port()}"\n')
    args = argparse.Namespace(
        command="status", config=str(config), prometheus=None, json=False, samples=1, interval=0.0
    )
    assert status.run(args) == 1
    out = capsys.readouterr().out
    assert len(used) == 1 and stopped == used and used[0].samples == 1
    assert out.splitlines()[1].split()[:4] == ["d", "sglang", "-", "down"]
    assert out.splitlines()[2].startswith("! d: connection refused by 127.0.0.1:")
