"""One severity on the state enums ranks engine and host states for every worst-of and sort: a poll's
endpoints, a rollup's polls, the overview's State column, a folded group's tag."""

from __future__ import annotations

from poolconsole.collect.engines.scratch import Scratch
from poolconsole.model.hosts import HostState
from poolconsole.model.snapshots import EngineState
from poolconsole.model.states import severity_of
from poolconsole.runtime.store.rollup import rollup


def test_ok_then_degraded_then_not_answering_for_engines_and_hosts_alike() -> None:
    assert [s.severity for s in EngineState] == [0, 1, 2, 2]  # ok, degraded, down, auth_failed
    assert [s.severity for s in HostState] == [0, 1, 2, 2, 2, 2]
    words = ["ok", "degraded", "down", "auth_failed", "unreachable", "host_key_changed", "no such state", None]
    assert [severity_of(w) for w in words] == [0, 1, 2, 2, 2, 2, 2, 2]


def test_a_poll_is_its_worst_endpoint_and_down_wins_among_the_failures() -> None:
    def after(*states: EngineState) -> EngineState:
        poll = Scratch()
        for state in states:
            poll.worse(state, state.value)
        return poll.state

    assert after(EngineState.DEGRADED, EngineState.AUTH_FAILED, EngineState.DEGRADED) is EngineState.AUTH_FAILED
    assert after(EngineState.AUTH_FAILED, EngineState.DOWN) is EngineState.DOWN
    assert after(EngineState.DOWN, EngineState.AUTH_FAILED, EngineState.DEGRADED) is EngineState.DOWN


def test_a_rollup_keeps_the_worst_poll_and_the_latest_of_equally_bad_ones() -> None:
    def worst(*states: str) -> object:
        return rollup([({"state": s, "error": s}, 1) for s in states])["state"]

    assert worst("ok", "degraded", "ok") == "degraded"
    assert worst("degraded", "down", "ok") == "down"
    assert worst("down", "auth_failed", "degraded") == "auth_failed"  # not answering alike: the latest
    assert worst("unreachable", "ok") == "unreachable"
