"""Alert rules: thresholds with hysteresis, restart loops, tok/s collapse, unknown values never alert."""

from __future__ import annotations

from dataclasses import replace

from poolconsole.config.models import AlertSettings
from poolconsole.model.alerts import COLLAPSE_POLLS, Alerts
from poolconsole.model.view import EngineView


def view(**kw: object) -> EngineView:
    base = EngineView(
        "e", "vllm", "h", "http://x", "ok", None, ["m"], 1.0, 0.0, 0.5, 0.0, 0.0, 100.0, 0.0, 0.1, None, None, 0.0, 1
    )
    return replace(base, **kw)  # type: ignore[arg-type]


def test_kv_alert_has_hysteresis() -> None:
    alerts = Alerts(AlertSettings(kv_usage=0.9, hysteresis=0.05))
    assert [e.rule for e in alerts.engine(view(kv_cache_usage=0.92), 1)] == ["kv_full"]
    assert alerts.engine(view(kv_cache_usage=0.87), 2) == []  # still above the clear level: no flapping
    cleared = alerts.engine(view(kv_cache_usage=0.80), 3)
    assert [(e.rule, e.fired) for e in cleared] == [("kv_full", False)]


def test_unknown_values_never_alert() -> None:
    alerts = Alerts(AlertSettings())
    assert alerts.engine(view(kv_cache_usage=None, requests_waiting=None, generation_tokens_per_s=None), 1) == []


def test_down_and_back() -> None:
    alerts = Alerts(AlertSettings())
    fired = alerts.engine(view(state="down", error="connection refused"), 1)
    assert fired[0].rule == "down" and "refused" in fired[0].message
    assert [(e.rule, e.fired) for e in alerts.engine(view(), 2)] == [("down", False)]


def test_restart_loop() -> None:
    alerts = Alerts(AlertSettings(restart_loop_count=3, restart_loop_minutes=10))
    events = []
    for t in (0, 120, 240):
        events += alerts.engine(view(counter_resets=1), t)
    assert [e.rule for e in events if e.fired] == ["restart_loop"]
    assert any(e.rule == "restart_loop" and not e.fired for e in alerts.engine(view(), 240 + 601))


def test_tps_collapse_needs_a_sustained_drop() -> None:
    alerts = Alerts(AlertSettings(tps_collapse=0.3))
    t = 0.0
    for _ in range(COLLAPSE_POLLS):
        t += 1
        assert alerts.engine(view(generation_tokens_per_s=300.0), t) == []
    assert alerts.engine(view(generation_tokens_per_s=0.0), t + 1) == []  # one slow window is not a collapse
    fired = []
    for _ in range(COLLAPSE_POLLS):
        t += 1
        fired += alerts.engine(view(generation_tokens_per_s=20.0), t)
    assert [e.rule for e in fired] == ["tps_collapse"]
