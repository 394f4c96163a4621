"""The summary's totals kept from what changed (issue 39, item 4): a tick in which one of 1,000 engines changed
makes that engine's part of the totals again and nothing else, and the totals kept so are the ones made
afresh over the whole pool, through engines and hosts going down, coming back, and a replay's reset."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from functools import partial

import pytest
from hypothesis import given
from hypothesis import strategies as st

from poolconsole.model import tally
from poolconsole.model.alerts import Alerts
from poolconsole.model.hosts import HostState
from poolconsole.model.pool_state import EngineTrack, HostTrack, PoolState
from poolconsole.model.snapshots import EngineState
from poolconsole.model.summary import Summary, summarise
from tests.helpers import bigpool, uipool


def fresh(state: PoolState, alerts: Alerts) -> Summary:
    """The summary made over the whole pool by a tally of its own; the state's kept tally stays as it was."""
    kept = tally._TALLIES.pop(state, None)
    try:
        return summarise(state, alerts)
    finally:
        if kept is not None:
            tally._TALLIES[state] = kept


def counted(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Counts the parts made, by target: a counting wrapper around the functions that make them."""
    made: Counter[str] = Counter()
    engine_part, host_part = tally.engine_part, tally.host_part

    def engine(track: EngineTrack, routes_read: bool = True) -> tally.EnginePart:
        made[f"engine {track.config.name}"] += 1
        return engine_part(track, routes_read)

    def host(track: HostTrack) -> tally.HostPart:
        made[f"host {track.config.name}"] += 1
        return host_part(track)

    monkeypatch.setattr(tally, "engine_part", engine)
    monkeypatch.setattr(tally, "host_part", host)
    return made


def test_one_changed_engine_of_a_thousand_is_the_only_work(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg, pages = bigpool.config(1000, gpus_per_host=4), bigpool.Pages()
    state, alerts = PoolState(cfg, lambda: uipool.T0 + 10), Alerts(cfg.alerts)
    for step in (0, 1):
        hosts, engines = bigpool.polls(cfg, pages, step, gpus_per_host=4)
        for host in hosts:
            state.apply_host(host)
        for snap in engines:
            state.apply_engine(snap)
    before = summarise(state, alerts)
    assert before.lines[0].startswith("engines 990/1000 ok")
    made = counted(monkeypatch)

    assert summarise(state, alerts) == before and not made  # nothing changed: no part made, the same summary

    name = bigpool.engine_name(17)
    state.apply_engine(bigpool.engine_poll(cfg, pages, 17, 2))  # one engine's new poll
    summarise(state, alerts)
    assert made == Counter({f"engine {name}": 1})
    assert tally._TALLIES[state].touched == (("engine", name),)

    made.clear()
    down = replace(
        bigpool.engine_poll(cfg, pages, 17, 3), state=EngineState.DOWN, error="connection refused", metrics=None
    )
    state.apply_engine(down)  # the same engine goes down: its part again, and the problems read it
    went_down = summarise(state, alerts)
    assert made == Counter({f"engine {name}": 1})
    assert f"{name} (connection refused)" in went_down.lines[0] and "989/1000 ok" in went_down.lines[0]

    made.clear()
    assert fresh(state, alerts) == went_down  # kept from the changes = made afresh over the pool
    assert sum(made.values()) == 1250  # (which takes every engine's and every host's part)


def test_kept_totals_are_the_totals_made_afresh_through_changes() -> None:
    """The demo pool (a gateway, unified and dedicated hosts, an Ollama) through engines and hosts going down
    and coming back, a counter's tok/s changing and a replay's reset: after each change, the summary kept
    from the changes is the one made over the whole pool."""
    cfg = uipool.config()
    state, alerts = PoolState(cfg, lambda: uipool.T0 + 30), Alerts(cfg.alerts)
    engines, hosts = uipool.engine_snapshots(cfg), uipool.host_snapshots(cfg)
    steps: list[Callable[[], object]] = [
        *(partial(state.apply_engine, e) for e in engines),
        *(partial(state.apply_host, h) for h in hosts),
    ]
    for e in (replace(e, fetched_at=e.fetched_at + 10, monotonic=e.monotonic + 10) for e in engines):
        gone = replace(e, state=EngineState.DOWN, error="connection refused", metrics=None, models=())
        steps += [partial(state.apply_engine, gone), partial(state.apply_engine, e)]
    for h in hosts:
        lost = replace(h, state=HostState.UNREACHABLE, error="no answer within 5 s", gpus=())
        steps += [partial(state.apply_host, lost), partial(state.apply_host, h)]
    steps += [state.reset, *steps[: len(engines) + len(hosts)]]
    for step in steps:
        step()
        assert summarise(state, alerts) == fresh(state, alerts)
    assert summarise(state, alerts).verdict == "healthy: 8/8 engines up, 7/7 hosts up"


def test_totals_are_exact_sums() -> None:
    """Values taken away again leave the sum made afresh, to the last bit: no drift from adding and
    subtracting fractions; unknown counted apart; NaN and infinities as IEEE sums make them."""
    total = tally.Total()
    for value in (0.1, 0.2, 3.0, None, 2.5e13):
        total.add(value)
    total.add(0.2, -1)
    total.add(2.5e13, -1)
    assert total.value() == 0.1 + 3.0 and total.text(" tok/s") == "3 tok/s (1 n/a)"
    total.add(float("inf"))
    assert total.value() == float("inf")
    total.add(float("-inf"))
    assert total.text() == "nan (1 n/a)"
    empty = tally.Total()
    empty.add(None)
    assert empty.value() is None and empty.text() == "n/a"


FINITE = st.floats(allow_nan=False, allow_infinity=False, min_value=-1e300, max_value=1e300)


@given(st.lists(st.tuples(FINITE, st.booleans()), min_size=1, max_size=30))
def test_a_kept_total_is_the_correctly_rounded_sum(values: list[tuple[float, bool]]) -> None:
    """Any finite values (subnormal ones too), some taken away again: the total is the exact sum of what is
    left rounded once, as math.fsum rounds it."""
    total = tally.Total()
    for value, _ in values:
        total.add(value)
    for value, gone in values:
        if gone:
            total.add(value, -1)
    left = [value for value, gone in values if not gone]
    assert total.value() == (math.fsum(left) if left else None)
