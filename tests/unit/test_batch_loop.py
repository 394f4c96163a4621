"""The targets read from one shared batch (a query API's engines, its hosts) are polled by one loop, a pass a
tick, not a loop each (runtime.live.LivePool._batch_loop, issue 39): the rest of the event loop gets a turn
every HANDOUT of them, and a target whose result fails to apply is told and left out, as its own loop's end
was, while the others go on."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from poolconsole.config.models import Engine, Host, PoolConfig
from poolconsole.model.hosts import HostSnapshot
from poolconsole.model.snapshots import EngineSnapshot
from poolconsole.runtime import live
from poolconsole.runtime.live import HANDOUT, LivePool, Update
from tests.helpers import uipool


class Batch:
    """What the sources of one batch share (a query API's reads)."""


class FakeEngineSource:
    def __init__(self, engine: Engine, snapshot: EngineSnapshot, shared: Batch | None, log: list[str]) -> None:
        self.engine = engine
        self.snapshot = snapshot
        self._shared = shared
        self.log = log
        self.polls = 0
        self.closed = False

    @property
    def shared(self) -> Batch | None:
        return self._shared

    async def poll(self) -> EngineSnapshot:
        self.polls += 1
        self.log.append(self.engine.name)
        return replace(self.snapshot, monotonic=self.snapshot.monotonic + self.polls)

    async def aclose(self) -> None:
        self.closed = True


class FakeHostSource:
    def __init__(self, host: Host, snapshot: HostSnapshot, shared: Batch) -> None:
        self.host = host
        self.snapshot = snapshot
        self._shared = shared
        self.polls = 0

    @property
    def shared(self) -> Batch:
        return self._shared

    async def poll(self) -> HostSnapshot:
        self.polls += 1
        return self.snapshot

    async def aclose(self) -> None:
        pass


def sources(cfg: PoolConfig, direct: int, log: list[str]) -> tuple[list[FakeEngineSource], list[FakeHostSource]]:
    """The config's engines, the first `direct` of them on their own endpoints, the rest from one batch; its
    hosts from another."""
    snapshots = {s.name: s for s in uipool.engine_snapshots(cfg)}
    engines, hosts = Batch(), Batch()
    out = [
        FakeEngineSource(e, snapshots[e.name], None if place < direct else engines, log)
        for place, e in enumerate(cfg.engines)
    ]
    host_snapshots = {s.name: s for s in uipool.host_snapshots(cfg)}
    return out, [FakeHostSource(h, host_snapshots[h.name], hosts) for h in cfg.hosts]


def many_engines(count: int) -> PoolConfig:
    """uipool's pool with its first engine copied until it has `count`."""
    cfg = uipool.config()
    first = cfg.engines[0]
    more = [first.model_copy(update={"name": f"{first.name}-{n}"}) for n in range(count - len(cfg.engines))]
    return cfg.model_copy(update={"engines": [*cfg.engines, *more]})


def started(
    monkeypatch: pytest.MonkeyPatch, cfg: PoolConfig, direct: int, log: list[str]
) -> tuple[LivePool, list[FakeEngineSource], list[FakeHostSource]]:
    engines, hosts = sources(cfg, direct, log)
    monkeypatch.setattr(live, "engine_pollers", lambda _: engines)
    monkeypatch.setattr(live, "host_pollers", lambda *_, **__: hosts)
    return LivePool(cfg), engines, hosts


def loops() -> list[str]:
    """The poll loops running (not the one-off reads a result spawns: a container check, a log read)."""
    looping = ("_loop", "_batch_loop")
    return sorted(
        t.get_name() for t in asyncio.all_tasks() if getattr(t.get_coro(), "__name__", "") in looping and not t.done()
    )


async def test_the_targets_of_one_batch_are_polled_by_one_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = many_engines(3 * HANDOUT + 2)
    log: list[str] = []
    pool, engines, hosts = started(monkeypatch, cfg, 2, log)
    pool.start(settle_gc=False)
    try:
        await asyncio.sleep(0.05)
        shared = len(cfg.engines) - 2
        direct = sorted(f"poll {e.engine.name}" for e in engines[:2])
        assert loops() == sorted([*direct, f"poll {shared} engines", f"poll {len(hosts)} hosts"])
        assert all(e.polls == 1 for e in engines), [e.polls for e in engines]
        assert all(h.polls == 1 for h in hosts)
        assert all(pool.state.engines[e.engine.name].view is not None for e in engines)
        pool.poll_now()  # `r` wakes the batch loops as it woke each target's
        await asyncio.sleep(0.05)
        assert all(e.polls == 2 for e in engines), [e.polls for e in engines]
        assert all(h.polls == 2 for h in hosts)
    finally:
        await pool.stop()
    assert all(e.closed for e in engines)


async def test_a_pass_gives_the_event_loop_a_turn_every_few_targets(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = many_engines(4 * HANDOUT)
    log: list[str] = []
    pool, _, _ = started(monkeypatch, cfg, 0, log)

    async def redraw() -> None:  # something else on the loop, as the console's redraw after the first result
        while len(log) < 1:
            await asyncio.sleep(0)
        log.append("redraw")

    other = asyncio.ensure_future(redraw())
    pool.start(settle_gc=False)
    try:
        await asyncio.sleep(0.05)
        await other
        assert 0 < log.index("redraw") <= HANDOUT + 1, log  # served within the pass's first turn, not after it
        assert len(log) == len(cfg.engines) + 1
    finally:
        await pool.stop()


async def test_a_target_that_fails_to_apply_is_told_and_the_others_go_on(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = many_engines(HANDOUT + 3)
    log: list[str] = []
    pool, engines, _ = started(monkeypatch, cfg, 0, log)
    broken = engines[4]
    broken.snapshot = replace(broken.snapshot, name="not in the pool")  # applying it raises (KeyError)
    heard: list[Update] = []
    pool.subscribe(heard.append)
    pool.start(settle_gc=False)
    try:
        await asyncio.sleep(0.05)
        pool.poll_now()
        await asyncio.sleep(0.05)
        problems = [u for u in heard if u.kind == "problem"]
        assert [(u.target, u.message) for u in problems] == [
            (broken.engine.name, f"the poll loop of {broken.engine.name} stopped: KeyError('not in the pool')")
        ]
        assert broken.polls == 1  # left out of the passes after
        assert all(e.polls == 2 for e in engines if e is not broken), [e.polls for e in engines]
    finally:
        await pool.stop()
