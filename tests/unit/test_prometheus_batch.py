"""The batch coalescer (collect/prometheus/batch.py) hands a group's answer out HANDOUT members at a time: what
else runs on the event loop (the console's redraw after the first result) is served between them, not
after every member of a 1,000-engine batch has gone on."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from poolconsole.collect.prometheus.batch import HANDOUT, Batch, Coalescer


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
