"""The batch coalescer (collect/prometheus/batch.py) hands a group's answer out HANDOUT members at a time: what
else runs on the event loop (the console's redraw after the first result) is served between them, not
after every member of a 1,000-engine batch has gone on."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import pytest

from poolconsole.collect.prometheus import batch as batch_module
from poolconsole.collect.prometheus.batch import HANDOUT, REUSE_S, Batch, Coalescer


@dataclass(frozen=True)
class Group:
    keys: tuple[int, ...]


class NoTargets:
    async def active_targets(self) -> list[dict[str, Any]]:
        return []


class OneQuery(Coalescer[str, Group, str]):
    """Every member in one group, answered at once."""

    def groups(self, members: dict[int, str]) -> list[Group]:
        return [Group(tuple(members))]

    async def run(self, batch: Batch[str, str], group: Group) -> dict[int, str]:
        await asyncio.sleep(0.01)
        return {key: f"reading of {batch.members[key]}" for key in group.keys}


def test_a_groups_answer_is_handed_out_a_few_members_at_a_time() -> None:
    async def walk() -> list[str]:
        reads = OneQuery(NoTargets())
        members = 20 * HANDOUT
        for key in range(members):
            reads.join(key, f"e{key}")
        went_on: list[str] = []

        async def member(key: int) -> None:
            reading, _ = await reads.fetch(key)
            assert reading == f"reading of e{key}"
            went_on.append(f"e{key}")
            if key == 0:  # the first result: the console asks for a redraw, which takes a few turns
                redraws.append(asyncio.ensure_future(redraw()))

        async def redraw() -> None:
            for _ in range(4):  # Textual's message pump awaits a few times before the callback runs
                await asyncio.sleep(0)
            went_on.append("redraw")

        redraws: list[asyncio.Task[None]] = []
        await asyncio.gather(*(member(key) for key in range(members)))
        await asyncio.gather(*redraws)
        assert reads.queries == 1  # one query for all of them
        return went_on

    went_on = asyncio.run(walk())
    assert len(went_on) == 20 * HANDOUT + 1 and went_on[-1] != "redraw"
    assert went_on.index("redraw") <= 6 * HANDOUT, went_on.index("redraw")  # a hand per turn of the loop


class Clock:
    """The batch module's monotonic clock, set by the test."""

    def __init__(self) -> None:
        self.now = 100.0

    def monotonic(self) -> float:
        return self.now


def test_a_loop_that_asks_within_half_an_interval_of_a_batchs_start_reads_that_batch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The loops' polls of one batch are spread over its hand-out. A loop that asked later than REUSE_S after
    the batch answered, but within reuse_s (half the poll interval) of its start, read a batch of every member
    of its own before: a second full batch each tick from then on (6.3-6.8 queries a second at 1,000 engines
    where one batch a tick is 5.0)."""
    clock = Clock()
    monkeypatch.setattr(batch_module, "time", clock)

    async def walk(reuse_s: float) -> list[int]:
        reads = OneQuery(NoTargets(), reuse_s)
        reads.join(0, "e0")
        reads.join(1, "e1")
        sent = []
        for at, key in ((0.0, 0), (REUSE_S + 0.1, 1), (0.9, 0), (1.05, 1), (1.1, 0)):
            clock.now = 100.0 + at
            await reads.fetch(key)  # the batch answers at the time it was sent (the clock stands still)
            sent.append(reads.queries)
        return sent

    assert asyncio.run(walk(reuse_s=1.0)) == [1, 1, 1, 2, 2]  # one batch a second, read by both loops
    assert asyncio.run(walk(reuse_s=0.0)) == [1, 2, 3, 3, 3]  # REUSE_S after the answer alone: 3 in 1.1 s


def test_a_batch_every_member_left_is_not_read_again() -> None:
    """Its queries were cancelled as the last member left (a pool stopping, a sampling run's end): a member
    that joins again, under the same key, starts a batch of its own and gets its reading, not the cancelled
    one's CancelledError."""

    async def walk() -> str:
        reads = OneQuery(NoTargets())
        reads.join(1, "e1")
        first = asyncio.ensure_future(reads.fetch(1))
        await asyncio.sleep(0)  # the batch is in flight
        assert reads.latest is not None and reads.queries == 1
        reads.leave(1)
        with pytest.raises(asyncio.CancelledError):
            await first
        reads.join(1, "e1 again")
        reading, batch = await reads.fetch(1)
        assert batch is reads.latest and reads.queries == 2
        return reading

    assert asyncio.run(walk()) == "reading of e1 again"
