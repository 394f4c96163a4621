"""The same sample applied again (an engine read from Prometheus between two scrapes, issue 39): the pool
keeps its view, the alerts are not asked again, the restart it carried is marked once, and it is not
recorded again (the store keeps each scrape once); the next scrape is applied as ever."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from poolconsole.runtime.live import LivePool
from tests.helpers import uipool
from tests.unit.test_event_log_subscriber import restarted_pool


class Rows:
    def __init__(self) -> None:
        self.engines: list[float] = []

    def engine(self, view: Any, totals: Any, at: float) -> None:
        self.engines.append(at)

    def host(self, snapshot: Any, at: float) -> None:
        pass


async def test_a_repeated_sample_is_neither_recorded_nor_evaluated_again(monkeypatch: pytest.MonkeyPatch) -> None:
    pool, name, at, heard = restarted_pool()
    rows = Rows()
    pool.recorder = rows
    asked: list[float] = []
    evaluate = pool.alerts.engine

    def counting(view: Any, now: float, restarted: bool | None = None) -> Any:
        asked.append(now)
        return evaluate(view, now, restarted)

    monkeypatch.setattr(pool.alerts, "engine", counting)
    again = pool.state.engines[name].last_read
    assert again is not None and pool.state.engines[name].counted_reset
    view = pool.state.engines[name].view
    assert pool.apply_engine(replace(again, fetched_at=at + 1e-6)) is view  # the same scrape, polled again
    assert asked == [] and rows.engines == []
    assert [u.restarts for u in heard if u.kind == "engine"] == [(), (at,), ()]  # marked once
    later = replace(again, fetched_at=at + 5, monotonic=again.monotonic + 5)
    assert pool.apply_engine(later) is not view
    assert asked == [at + 5] and rows.engines == [at + 5]
    await pool.stop()


class HostRows(Rows):
    def __init__(self) -> None:
        super().__init__()
        self.hosts: list[float] = []

    def host(self, snapshot: Any, at: float) -> None:
        self.hosts.append(at)


async def test_a_hosts_repeated_reading_is_neither_recorded_nor_evaluated_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A host read from Prometheus between two scrapes keeps the scrapes' time (PrometheusHostPoller._again):
    the runtime tells such a repeat by it, as an engine's by its stamp."""
    pool = LivePool(uipool.config())
    rows = HostRows()
    pool.recorder = rows
    asked: list[float] = []
    evaluate = pool.alerts.host

    def counting(snapshot: Any, now: float) -> Any:
        asked.append(now)
        return evaluate(snapshot, now)

    monkeypatch.setattr(pool.alerts, "host", counting)
    first = uipool.host_snapshots(pool.config)[0]
    pool.apply_host(first)
    pool.apply_host(replace(first, rtt_ms=12.5))  # the same scrapes, read again
    assert asked == rows.hosts == [first.fetched_at]
    held = pool.state.hosts[first.name].snapshot
    assert held is not None and held.rtt_ms == 12.5  # the new round trip is shown
    pool.apply_host(replace(first, fetched_at=first.fetched_at + 5))
    assert asked == rows.hosts == [first.fetched_at, first.fetched_at + 5]
    await pool.stop()
