"""The event log is an ordinary subscriber of the live pool: each update says what it meant (the restart
mark it put, the log read, the loop that stopped), and the log writes the timeline from that alone, never
from the pool state. No network: results are applied as the poll loops apply them."""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType

from poolconsole.model.events import COUNTERS_RESET, CRITICAL
from poolconsole.model.failure_modes import Diagnosis, Finding
from poolconsole.runtime.live import LivePool, Update
from poolconsole.runtime.store import StoredHistory
from tests.helpers import uipool


def restarted_pool() -> tuple[LivePool, str, float, list[Update]]:
    """A pool whose first engine answered, then answered again with its counters back near zero and a new
    process start: a restart at the second poll."""
    pool = LivePool(uipool.config())
    heard: list[Update] = []
    pool.subscribe(heard.append)
    first = uipool.engine_snapshots(pool.config)[0]
    assert first.metrics is not None
    values = dict(first.metrics.values)
    values.update(generation_tokens_total=3.0, prompt_tokens_total=5.0)
    values["process_start_time"] = float(values["process_start_time"]) + 100
    again = replace(
        first,
        fetched_at=first.fetched_at + 1,
        monotonic=first.monotonic + 1,
        restart_marker="a new process",
        metrics=replace(first.metrics, values=MappingProxyType(values)),
    )
    pool.apply_engine(first)
    pool.apply_engine(again)
    return pool, first.name, again.fetched_at, heard


async def test_a_counter_reset_is_told_with_its_mark_and_the_log_writes_it_from_the_update() -> None:
    pool, name, at, heard = restarted_pool()  # on the event loop: a restart starts a container check
    assert [u.restarts for u in heard if u.kind == "engine"] == [(), (at,)]
    assert pool.events.entries[-1].kind == "restart" and pool.events.entries[-1].at == at
    assert pool.events.entries[-1].cause == COUNTERS_RESET
    pool.state.engines[name].history.restarts.append(at + 5)  # a mark no update told: not the log's to find
    after = pool.state.engines[name].last_read  # the same process polled again: no reset
    assert after is not None
    pool.apply_engine(replace(after, fetched_at=at + 6, monotonic=after.monotonic + 6))
    assert [e.at for e in pool.events.entries if e.kind == "restart"] == [at]
    await pool.stop()  # the checks it started (no SSH here: they end at once)


def test_a_diagnosis_and_a_stopped_loop_are_read_from_the_update() -> None:
    pool = LivePool(uipool.config())
    finding = Finding("oom", "CUDA out of memory", "the model did not fit", "lower max_num_seqs", "line", 3)
    pool._tell(Update("e", "diagnosis", diagnosis=Diagnosis(50.0, "went down", "journal", (finding,)), at=50.0))
    pool._tell(Update("e", "problem", message="the poll loop of e stopped: boom", at=60.0))
    assert [(e.at, e.kind, e.severity) for e in pool.events.entries] == [
        (50.0, "down-log", CRITICAL),
        (60.0, "problem", CRITICAL),
    ]


async def test_restarts_read_back_for_the_charts_are_told_and_reach_the_timeline() -> None:
    pool, name, at, heard = restarted_pool()
    before = at - 3600
    stored = StoredHistory(
        engines={name: [(before, 1.0, 0.1, 0.0, 0.0, None, 1), (before + 1, 1.0, 0.1, 0.0, 0.0, None, 0)]}
    )
    pool.fill_history(stored)
    assert heard[-1] == Update(name, "history", restarts=(before,))
    assert sorted(e.at for e in pool.events.entries if e.kind == "restart") == [before, at]
    assert list(pool.state.engines[name].history.restarts) == [before, at]
    await pool.stop()
