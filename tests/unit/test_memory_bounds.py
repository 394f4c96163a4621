"""What the console keeps per poll, per alert and per restart stays bounded (issue 35 item 9): after N+k
appends each structure holds N, the oldest gone. benchmarks/memory_growth.py measures the whole console."""

from __future__ import annotations

import pytest

from poolconsole.config.models import AlertSettings
from poolconsole.model.alerts import Alerts
from poolconsole.model.events import MAX_EVENTS, Event, EventLog
from poolconsole.model.pool_state import HISTORY_POINTS, SHORT_POINTS, History
from poolconsole.model.series import Ring
from poolconsole.sim.logs import MAX_LOG_LINES, ContainerLog


def test_a_chart_ring_holds_its_capacity_and_the_newest_points() -> None:
    ring = Ring(HISTORY_POINTS)
    for i in range(HISTORY_POINTS + 50):
        ring.append(float(i))
    assert len(ring) == HISTORY_POINTS
    assert ring[0] == 50.0 and ring[-1] == float(HISTORY_POINTS + 49)


@pytest.mark.parametrize("capacity", [SHORT_POINTS, HISTORY_POINTS])
def test_every_series_of_an_engine_history_is_bounded(capacity: int) -> None:
    history = History(capacity)
    for i in range(capacity + 10):
        for ring in (history.times, history.tokens_per_s, history.kv, history.running, history.waiting, history.vram):
            ring.append(float(i))
        history.restarts.append(float(i))
    assert {len(r) for r in (history.times, history.tokens_per_s, history.kv, history.vram)} == {capacity}
    assert len(history.restarts) == history.restarts.maxlen == 100


def test_an_engine_history_is_short_unless_asked() -> None:
    assert History().capacity == SHORT_POINTS < HISTORY_POINTS


def test_the_event_log_keeps_its_newest_events() -> None:
    log = EventLog()
    for i in range(MAX_EVENTS + 7):
        log.add(Event(float(i), "e", "alert", f"event {i}"))
    assert len(log.entries) == MAX_EVENTS
    assert log.entries[0].at == 7.0


def test_the_alert_log_is_bounded_however_long_an_alert_flaps() -> None:
    alerts = Alerts(AlertSettings())
    assert alerts.log.maxlen is not None
    for i in range(alerts.log.maxlen + 11):
        alerts._set("e", "queue", i % 2 == 0, "queueing", float(i), "clear")
    assert len(alerts.log) == alerts.log.maxlen
    assert len(alerts.active) <= 1 and not alerts.pending


def test_a_demo_container_log_is_bounded() -> None:
    log = ContainerLog()
    log.write(*(f"line {i}" for i in range(MAX_LOG_LINES + 3)), at=0.0)
    assert len(log.lines) == MAX_LOG_LINES and log.written == MAX_LOG_LINES + 3
