"""Reads of many targets on one Prometheus query API coalesced into one batch per tick: the engines'
(prometheus.source.EngineReads) and the hosts' (prometheus.hosts.HostReads) share this piece.

Each target asks its coalescer for its reading: the live pool polls a batch's targets in one loop, a pass a
tick (runtime.live), and a bounded sampling run (`status`) each in its own. The first ask of a tick starts
a batch of every member: one query per group (a subclass says how members group and how a group's answer
is sliced per member); each member gets its slice as soon as its group answered. A loop that asks while a
batch is in flight, within REUSE_S of one that answered, or within `reuse_s` (half the poll interval) of
one's start, gets that batch's reading; so the loops keep their cadence and still never overlap
themselves, only the fetch is shared. A member that joined after the batch started, or a batch whose
queries were cancelled, starts the next one.

Why the start counts: the loops' polls of one batch are spread over its hand-out, and each loop sleeps an
interval from its own start. When a batch answered faster than the one before, the last loops of that one
woke more than REUSE_S after it and started a batch of every member for a few of them, and from then on
every tick (scale_bench at 1,000 engines: 6.8 queries a second where one batch a tick is 5.0).

The batch also reads /api/v1/targets at most once, for every stale target of it that wants Prometheus'
scrape error.

A group's answer would wake all its members at once; they go on HANDOUT at a time instead (one turn of
the event loop between two hands), so what else runs on the loop (the console's redraw, a key press) is
served between them, not after a thousand members' polls: at 1,000 engines the first frame waited for 800
of them to be applied, about 0.6 s.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Generic, Protocol, TypeVar

HANDOUT = 10
"""Members of a group that go on between two turns of the rest of the event loop."""
REUSE_S = 0.25
"""A loop that asks this soon after a batch answered takes that reading (Prometheus scrapes every few
seconds at most, so it is as fresh) instead of sending another query for every member."""


class TargetsAPI(Protocol):
    """What a batch needs of the query API itself: its active targets (for their scrape errors)."""

    async def active_targets(self) -> list[dict[str, Any]]: ...


class Grouped(Protocol):
    """One query of a batch: the members' keys it reads."""

    @property
    def keys(self) -> tuple[int, ...]: ...


M = TypeVar("M")
"""A member: what one poll loop reads (an Engine, a Host)."""
R = TypeVar("R")
"""One member's reading out of its group's answer."""
G = TypeVar("G", bound=Grouped)


def scrape_error_in(targets: Iterable[dict[str, Any]], labels: dict[str, str]) -> str | None:
    """The lastError of the first target with these job / instance labels."""
    for target in targets:
        mine = target.get("labels", {})
        if all(mine.get(k) == labels.get(k) for k in ("job", "instance") if k in labels):
            error = str(target.get("lastError") or "")
            return error or None
    return None


@dataclass
class Batch(Generic[M, R]):
    """One tick's reading of every member, by its poller's key."""

    api: TargetsAPI
    members: dict[int, M]
    tasks: dict[int, asyncio.Task[dict[int, R]]] = field(default_factory=dict)
    """Each member's group query: a group's members go on as soon as its answer is in (the first frame
    shows the first group without waiting for the other queries)."""
    started_at: float = 0.0
    """When its queries were sent (monotonic)."""
    done_at: float | None = None
    """When its last query answered."""
    queries: list[asyncio.Task[dict[int, R]]] = field(default_factory=list)
    """The group queries themselves, one task each (`tasks` names each once per member)."""
    gates: dict[int, asyncio.Future[None]] = field(default_factory=dict)
    """The turn of its group's hand-out each member past the first HANDOUT waits for."""
    handing: list[asyncio.Task[None]] = field(default_factory=list)
    cancelled: bool = False
    """Its queries were cancelled (every member left): the next ask starts another batch."""
    _targets: asyncio.Task[list[dict[str, Any]]] | None = None

    async def scrape_error(self, labels: dict[str, str]) -> str | None:
        """The last scrape error Prometheus reports for the target with these job / instance labels, with
        /api/v1/targets read once per batch for every stale member."""
        if self._targets is None:
            self._targets = asyncio.ensure_future(self.api.active_targets())
        return scrape_error_in(await asyncio.shield(self._targets), labels)


async def hand_out(hands: Sequence[asyncio.Future[None]]) -> None:
    """Open a group's turns one after the other, a turn of the event loop apart."""
    for hand in hands:
        await asyncio.sleep(0)
        if not hand.done():
            hand.set_result(None)


def start_hand_out(handing: list[asyncio.Task[None]], hands: Sequence[asyncio.Future[None]], _: object) -> None:
    """A group answered: its hand-out begins (the batch keeps the task)."""
    handing.append(asyncio.ensure_future(hand_out(hands)))


class Coalescer(Generic[M, G, R]):
    """Every member read from one query API, coalesced into one batch per tick (module docstring).
    Subclasses give `groups` (the queries of a batch) and `run` (one query, sliced per member)."""

    def __init__(self, api: TargetsAPI, reuse_s: float = 0.0) -> None:
        self.api = api
        self.reuse_s = reuse_s
        """A batch that started this recently is read again (module docstring): half the poll interval."""
        self.members: dict[int, M] = {}
        self.latest: Batch[M, R] | None = None
        self.queries = 0
        """Instant queries sent (tests and benchmarks read it)."""
        self.held: dict[int, object] = {}
        """Per member, what the reading its poller holds was made of (a scrape time, or the scrape times of
        its targets), told by the poller once it built its snapshot: a subclass's `run` reads again only the
        members scraped since."""

    def groups(self, members: dict[int, M]) -> Sequence[G]:
        raise NotImplementedError

    async def run(self, batch: Batch[M, R], group: G) -> dict[int, R]:
        raise NotImplementedError

    def handed(self, reading: R) -> R:
        """What the batch keeps of a member's reading once handed to its poller, for an ask of the same batch
        again (a poll now): the reading itself unless a subclass says a lighter one stands for it."""
        return reading

    def join(self, key: int, member: M) -> None:
        self.members[key] = member

    def leave(self, key: int) -> None:
        self.members.pop(key, None)
        self.held.pop(key, None)
        if not self.members and self.latest is not None:
            self.latest.cancelled = True
            for task in self.latest.queries:
                task.cancel()  # nobody waits for it any more

    async def fetch(self, key: int) -> tuple[R, Batch[M, R]]:
        """This member's reading: from the batch in flight, or the one that answered within REUSE_S or
        started within `reuse_s`, when it holds the member; else from a new batch of every member."""
        batch = self.latest
        now = time.monotonic()
        if (
            batch is None
            or key not in batch.tasks
            or (batch.done_at is not None and now - batch.done_at > REUSE_S and now - batch.started_at >= self.reuse_s)
            or batch.cancelled  # not asked of its queries: at every ask, that was 3 % of the console at 1,000 engines
        ):
            batch = self._start()
        readings = await asyncio.shield(batch.tasks[key])
        answer = readings[key]
        readings[key] = self.handed(answer)
        gate = batch.gates.get(key)
        if gate is not None and not gate.done():
            await asyncio.shield(gate)  # a member cancelled while it waits leaves the gate to the others
        return answer, batch

    def _start(self) -> Batch[M, R]:
        batch: Batch[M, R] = Batch(self.api, dict(self.members), started_at=time.monotonic())
        groups = self.groups(batch.members)
        left = len(groups)

        def answered(_: asyncio.Future[Any]) -> None:
            nonlocal left
            left -= 1
            if left == 0:
                batch.done_at = time.monotonic()

        loop = asyncio.get_running_loop()
        for group in groups:
            task = asyncio.ensure_future(self.run(batch, group))
            task.add_done_callback(answered)
            batch.tasks.update(dict.fromkeys(group.keys, task))
            batch.queries.append(task)
            hands = [loop.create_future() for _ in range((len(group.keys) - 1) // HANDOUT)]
            batch.gates.update(
                (key, hands[place // HANDOUT - 1]) for place, key in enumerate(group.keys[HANDOUT:], HANDOUT)
            )
            if hands:
                task.add_done_callback(partial(start_hand_out, batch.handing, hands))
        self.queries += len(groups)
        self.latest = batch
        return batch
