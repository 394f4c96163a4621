"""The pool's totals kept from what changed (issue 39): each target's part of the summary (up or not, its
rates and queue, its host's memory and power, when it last answered) is kept, and when the pool state says a
target changed, its old part is taken away from the totals and its new part added. A tick in which one of
1,000 engines changed makes one part, not 1,000; the summary then reads the totals.

Every total is exact, so a sum kept this way is the sum over the pool made afresh (whole numbers add as
ints; a value with a fraction adds as an int count of 2**-1074, the smallest step of a float, and the total
shown is that exact sum rounded once)."""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass
from weakref import WeakKeyDictionary

from poolconsole.config.models import EngineKind
from poolconsole.model.hosts import HostState
from poolconsole.model.pool_state import EngineTrack, HostTrack, PoolState, TargetKey
from poolconsole.model.snapshots import EngineState
from poolconsole.model.units import NA, gib

WHOLE_LIMIT = 2.0**40
"""Whole values under this add as ints: thousands of them still sum below 2**53, where a float sum of whole
values is exact too (so the total is the one a fresh sum gives, to the last bit)."""
TINY = 1074
"""Every finite float is a whole number of 2**-TINY: as such a count, a value with a fraction adds as an int
(exact; as a Fraction it was about a third of the summary's time at 1,000 engines under cProfile)."""
HEAP_SLACK = 64
"""Stale times the oldest-answer heap may hold beyond twice its live ones before it is made again."""


class Total:
    """A sum of the known values and a count of the unknown ones, kept by adding and taking away values."""

    __slots__ = ("down", "inexact", "known", "missing", "nan", "rest", "up", "whole")

    def __init__(self) -> None:
        self.whole = 0
        self.rest = 0
        """The values with a fraction, in 2**-TINY."""
        self.inexact = 0
        self.known = 0
        self.missing = 0
        self.nan = self.up = self.down = 0  # NaN, +inf, -inf: what IEEE makes of them, in any order

    def add(self, value: float | None, sign: int = 1) -> None:
        if value is None:
            self.missing += sign
            return
        self.known += sign
        if type(value) is float and value.is_integer() and -WHOLE_LIMIT < value < WHOLE_LIMIT:  # the usual case
            self.whole += sign * int(value)
        elif math.isnan(value):
            self.nan += sign
        elif math.isinf(value):
            if value > 0:
                self.up += sign
            else:
                self.down += sign
        elif float(value).is_integer() and abs(value) < WHOLE_LIMIT:
            self.whole += sign * int(value)
        else:
            numerator, denominator = value.as_integer_ratio()  # the denominator a power of two
            self.rest += sign * (numerator << (TINY + 1 - denominator.bit_length()))
            self.inexact += sign

    def swap(self, old: float | None, new: float | None) -> None:
        """A target's value changed from `old` to `new`."""
        self.add(old, -1)
        self.add(new, 1)

    def value(self) -> float | None:
        """The sum of the known values (None when none is known)."""
        if not self.known:
            return None
        if self.nan or (self.up and self.down):
            return math.nan
        if self.up or self.down:
            return math.inf if self.up else -math.inf
        if not self.inexact:
            return float(self.whole)
        return ((self.whole << TINY) + self.rest) / (1 << TINY)  # int / int: correctly rounded, once

    def text(self, unit: str = "") -> str:
        """The total as the summary shows it: n/a when none is known, the unknown ones counted."""
        total = self.value()
        if total is None:
            return NA
        return f"{total:.0f}{unit}" + (f" ({self.missing} n/a)" if self.missing else "")


def shown_rate(value: float | None) -> float | None:
    """A rate as its row's cell shows it (a whole number), so the summary is the sum of what is on screen."""
    return None if value is None else float(round(value))


@dataclass(slots=True)
class EnginePart:
    polled: bool
    ok: bool
    gen: float | None
    prompt: float | None
    running: float | None
    waiting: float | None
    last_ok_at: float | None
    routes: tuple[object, ...]
    """What the gateway's routes read of it (models, answering, what it last served); a change redoes them."""

    @property
    def down(self) -> bool:
        return self.polled and not self.ok


def engine_part(track: EngineTrack, routes_read: bool = True) -> EnginePart:
    """Its part; `routes_read`: the pool has a gateway, whose routes read the engine's models and state."""
    v = track.view
    routes: tuple[object, ...] = ()
    if v is None:
        routes = (None, track.last_read.models if track.last_read else None) if routes_read else ()
        return EnginePart(False, False, None, None, None, None, track.last_ok_at, routes)
    if routes_read and track.config.kind is EngineKind.LITELLM:
        readiness = v.details.get("readiness")
        ready = readiness.get("status") if isinstance(readiness, dict) else None
        routes = (tuple(v.models), v.state, v.error, ready)
    elif routes_read:
        routes = (tuple(v.models), v.state.answering, track.last_read.models if track.last_read else None)
    return EnginePart(
        True,
        v.state is EngineState.OK,
        None if (gen := v.generation_tokens_per_s) is None else float(round(gen)),  # shown_rate, inline: per poll
        None if (prompt := v.prompt_tokens_per_s) is None else float(round(prompt)),
        v.requests_running,
        v.requests_waiting,
        track.last_ok_at,
        routes,
    )


def has_gpus(track: HostTrack, kind: str | None = None) -> bool:
    """Whether a host not answering has GPUs the totals miss: its config says so, or it reported some."""
    unified = track.config.memory_kind == "unified" or track.gpu_memory_kind == "unified"
    dedicated = bool(track.config.gpu_memory_gib) or (track.gpu_memory_kind is not None and not unified)
    return {None: unified or dedicated, "unified": unified, "dedicated": dedicated and not unified}[kind]


@dataclass(slots=True)
class HostPart:
    polled: bool
    ok: bool
    memory_kind: str
    memory_unknown: bool
    memory_seen: bool
    used: int
    total: int
    power_unknown: bool
    watts: float | None
    last_ok_at: float | None

    @property
    def down(self) -> bool:
        return self.polled and not self.ok


def host_part(track: HostTrack) -> HostPart:
    """Its GPU memory (dedicated or unified) and power as the totals count them: a host that does not answer,
    or does not report all its GPUs' figures, is counted n/a when it has GPUs."""
    snap = track.snapshot
    kind = "unified" if has_gpus(track, "unified") else "dedicated"
    if snap is not None and snap.memory_kind == "unified":
        kind = "unified"
    polled, ok, last = snap is not None, snap is not None and snap.state is HostState.OK, track.last_ok_at
    if snap is None or not snap.state.answering:
        return HostPart(polled, ok, kind, has_gpus(track, kind), False, 0, 0, has_gpus(track), None, last)
    gpus = snap.gpus
    memory_unknown = any(g.memory_used_bytes is None or not g.memory_total_bytes for g in gpus)
    seen = bool(gpus) and not memory_unknown
    used = sum(g.memory_used_bytes or 0 for g in gpus) if seen else 0
    total = sum(g.memory_total_bytes or 0 for g in gpus) if seen else 0
    watts = [g.power_w for g in gpus]
    power_unknown = any(w is None for w in watts)
    power = sum(w for w in watts if w is not None) if watts and not power_unknown else None
    return HostPart(polled, ok, kind, bool(gpus) and memory_unknown, seen, used, total, power_unknown, power, last)


def hosts_na(count: int) -> str:
    return f" ({count} host{'s' if count > 1 else ''} n/a)" if count else ""


class Tally:
    """The summary's totals over one pool state, kept from the targets that changed since the last read."""

    def __init__(self, state: PoolState) -> None:
        self.state = state
        self.revision = -1
        self.order = {name: i for i, name in enumerate(state.engines)}
        self.host_order = {name: i for i, name in enumerate(state.hosts)}
        self.gateways = tuple(n for n, t in state.engines.items() if t.config.kind is EngineKind.LITELLM)
        self.engines: dict[str, EnginePart] = {}
        self.hosts: dict[str, HostPart] = {}
        self.polled = self.ok = self.hosts_polled = self.hosts_ok = 0
        self.down_engines: set[str] = set()
        self.down_hosts: set[str] = set()
        self.gen, self.prompt, self.running, self.waiting = Total(), Total(), Total(), Total()
        self.memory = {kind: [0, 0, 0, 0] for kind in ("dedicated", "unified")}  # used, total, seen, unknown
        self.power, self.power_unknown = Total(), 0
        self.answered: dict[TargetKey, float] = {}
        """Each target that has answered -> when it last did."""
        self.stamps: dict[float, set[TargetKey]] = {}
        """When -> the targets whose last answer that was (a batch read through Prometheus shares one)."""
        self.oldest: list[float] = []
        """A heap of those times; one no target holds any more is dropped when it comes to the top, and the
        heap is made again once it holds more than twice the live times (HEAP_SLACK)."""
        self.routes_changed = True
        """The gateways' routes are to be made again (the summary keeps them in `routes`)."""
        self.routes: tuple[list[tuple[str, str, str | None]], str] | None = None
        self.touched: tuple[TargetKey, ...] = ()
        """The targets whose part the last update made again (the count issue 39's test reads)."""
        self.parts_made = 0

    def update(self) -> Tally:
        """Takes in the targets that changed since the last update (all of them the first time)."""
        state = self.state
        if state.revision == self.revision:
            self.touched = ()
            return self
        if self.revision < 0:
            changed: list[TargetKey] = [("engine", n) for n in state.engines] + [("host", n) for n in state.hosts]
        else:
            changed = state.changed_since(self.revision)
        for kind, name in changed:
            if kind == "engine":
                self._engine(name, engine_part(state.engines[name], bool(self.gateways)))
            else:
                self._host(name, host_part(state.hosts[name]))
        self.touched = tuple(changed)
        self.parts_made += len(changed)
        self.revision = state.revision
        return self

    def _engine(self, name: str, new: EnginePart) -> None:
        old = self.engines.get(name)
        if old is None:  # the first time: its part added to nothing
            old = EnginePart(False, False, None, None, None, None, None, ())
            for total in (self.gen, self.prompt, self.running, self.waiting):
                total.missing += 1  # what the empty part's unknowns stand for
        self.polled += new.polled - old.polled
        self.ok += new.ok - old.ok
        if new.gen != old.gen:  # (a NaN is never equal: taken away and added again, which is right too)
            self.gen.swap(old.gen, new.gen)
        if new.prompt != old.prompt:
            self.prompt.swap(old.prompt, new.prompt)
        if new.running != old.running:
            self.running.swap(old.running, new.running)
        if new.waiting != old.waiting:
            self.waiting.swap(old.waiting, new.waiting)
        self.engines[name] = new
        (self.down_engines.add if new.down else self.down_engines.discard)(name)
        if self.gateways and old.routes != new.routes:
            self.routes_changed = True
        if new.last_ok_at != old.last_ok_at:
            self._answered(("engine", name), new.last_ok_at)

    def _host(self, name: str, new: HostPart) -> None:
        old = self.hosts.get(name)
        for part, sign in ((old, -1), (new, 1)):
            if part is None:
                continue
            self.hosts_polled += sign * part.polled
            self.hosts_ok += sign * part.ok
            memory = self.memory[part.memory_kind]
            memory[0] += sign * part.used
            memory[1] += sign * part.total
            memory[2] += sign * part.memory_seen
            memory[3] += sign * part.memory_unknown
            if part.watts is not None:
                self.power.add(part.watts, sign)
            self.power_unknown += sign * part.power_unknown
        self.hosts[name] = new
        (self.down_hosts.add if new.down else self.down_hosts.discard)(name)
        if old is None or new.last_ok_at != old.last_ok_at:
            self._answered(("host", name), new.last_ok_at)

    def _answered(self, key: TargetKey, at: float | None) -> None:
        before = self.answered.get(key)
        if at == before:
            return
        if before is not None:
            same = self.stamps[before]
            same.discard(key)
            if not same:
                del self.stamps[before]
        if at is None:  # answered no more (a replay seeking back)
            del self.answered[key]
            return
        self.answered[key] = at
        now_same = self.stamps.get(at)
        if now_same is None:
            now_same = self.stamps[at] = set()
            heapq.heappush(self.oldest, at)
            if len(self.oldest) > 2 * len(self.stamps) + HEAP_SLACK:
                # A target that stopped answering keeps its old time at the top, so the times the others
                # left behind were never popped: ~30 floats a second stayed at the chaos soak's 38 targets
                # (tracemalloc: the polls' fetched_at, ~3.4 MB/h). Made again from the live times instead:
                # amortised O(1) a push.
                self.oldest = list(self.stamps)
                heapq.heapify(self.oldest)
        now_same.add(key)

    def engines_down(self) -> list[str]:
        """The engines polled and not ok, in the config's order."""
        return sorted(self.down_engines, key=self.order.__getitem__)

    def hosts_down(self) -> list[str]:
        """The hosts polled and not ok, in the config's order."""
        return sorted(self.down_hosts, key=self.host_order.__getitem__)

    def memory_text(self, kind: str) -> str:
        used, total, seen, unknown = self.memory[kind]
        return f"{gib(used, 0)}/{gib(total, 0)} GiB{hosts_na(unknown)}" if seen else NA

    def power_text(self) -> str:
        """The GPUs' power summed over the hosts that report all of theirs; the others counted n/a."""
        watts = self.power.value()
        return f"{watts:.0f} W{hosts_na(self.power_unknown)}" if watts is not None else NA

    def oldest_text(self, now: float) -> str:
        """How old the oldest good data on screen is, and whose, as the Age column counts it (from each
        target's last answer, not its last try: a pool that never answered read "oldest data 0 s"); the
        targets that have not answered yet are counted."""
        silent = len(self.state.engines) + len(self.state.hosts) - len(self.answered)
        heap = self.oldest
        while heap and heap[0] not in self.stamps:
            heapq.heappop(heap)  # a time every target since answered after
        if not heap:
            return "no data yet" + (f": none of {silent} targets has answered" if silent else "")
        at = heap[0]
        if now <= at:  # every answer is as old as now or newer: all 0 s old, and max() says the greatest name
            age, name = 0.0, max(key[1] for key in self.answered)
        else:
            age, name = now - at, max(key[1] for key in self.stamps[at])
        return f"oldest data {age:.0f} s ({name})" + (f", {silent} not answered yet" if silent else "")


_TALLIES: WeakKeyDictionary[PoolState, Tally] = WeakKeyDictionary()


def tally_of(state: PoolState) -> Tally:
    """The state's tally, brought up to date."""
    tally = _TALLIES.get(state)
    if tally is None:
        tally = _TALLIES[state] = Tally(state)
    return tally.update()
