"""The stalled rule (issue 37): an engine that answers with requests running or waiting while its generation
counter stands still for `stall_s` fires `stalled` (critical); a moving counter, an idle engine or a restart
clear it; a down engine or an unknown counter never raises it."""

from __future__ import annotations

from dataclasses import replace

from poolconsole.config.models import AlertSettings, EngineKind
from poolconsole.model.alerts import Alerts, severity
from poolconsole.model.snapshots import EngineState
from poolconsole.model.view import EngineView


def view(**kw: object) -> EngineView:
    base = EngineView(
        "e",
        EngineKind.VLLM,
        "h",
        "http://x",
        EngineState.OK,
        None,
        ["m"],
        1.0,
        0.0,
        0.5,
        0.0,
        0.0,
        100.0,
        0.0,
        0.1,
        None,
        None,
        0.0,
        1,
    )
    return replace(base, **{"requests_running": 3.0, "requests_waiting": 1.0, **kw})  # type: ignore[arg-type]


def rules(alerts: Alerts, v: EngineView, at: float) -> list[tuple[str, bool]]:
    return [(e.rule, e.fired) for e in alerts.engine(v, at) if e.rule == "stalled"]


def test_a_counter_that_stops_with_requests_running_fires_after_stall_s_and_clears_when_it_moves() -> None:
    alerts = Alerts(AlertSettings(stall_s=30))
    for t in range(0, 30, 2):
        assert rules(alerts, view(generation_tokens_total=500.0), t) == []
    fired = [e for e in alerts.engine(view(generation_tokens_total=500.0), 30) if e.rule == "stalled"]
    assert [(e.rule, e.fired) for e in fired] == [("stalled", True)]
    assert "3 running and 1 waiting" in fired[0].message and "30 s" in fired[0].message
    assert rules(alerts, view(generation_tokens_total=500.0), 40) == []  # once
    assert rules(alerts, view(generation_tokens_total=540.0), 42) == [("stalled", False)]
    assert severity("stalled") == "critical" and severity("queue") == "warning" and severity("log:oom") == "info"


def test_a_moving_counter_an_idle_engine_and_unknowns_never_stall() -> None:
    alerts = Alerts(AlertSettings(stall_s=10))
    for t in range(0, 60, 2):  # generating
        assert rules(alerts, view(generation_tokens_total=100.0 + t), t) == []
    idle = Alerts(AlertSettings(stall_s=10))
    for t in range(0, 60, 2):  # nothing running: a still counter is no wedge
        assert rules(idle, view(generation_tokens_total=7.0, requests_running=0.0, requests_waiting=0.0), t) == []
    unknown = Alerts(AlertSettings(stall_s=10))
    for t in range(0, 60, 2):  # no counter, or no request counts (Ollama): unknown, never stalled
        assert rules(unknown, view(generation_tokens_total=None), t) == []
        assert rules(unknown, view(name="o", generation_tokens_total=5.0, requests_running=None,
                                   requests_waiting=None), t) == []  # fmt: skip


def test_down_leaves_it_to_down_and_a_restart_counts_as_progress() -> None:
    alerts = Alerts(AlertSettings(stall_s=10))
    rules(alerts, view(generation_tokens_total=9.0), 0)
    assert rules(alerts, view(generation_tokens_total=9.0), 10) == [("stalled", True)]
    assert rules(alerts, view(state="down", generation_tokens_total=None), 12) == []  # still stalled, down says it
    assert rules(alerts, view(generation_tokens_total=0.0, requests_running=1.0), 20) == [("stalled", False)]


def test_a_progress_counter_that_moves_is_progress_and_one_that_stands_still_is_not() -> None:
    """llama.cpp without /slots: tokens_predicted_total grows when a request ends, so a two-minute answer reads
    as a still generation counter; its progress counter (n_decode_total, every step) moves meanwhile. That is
    no wedge to page about (or restart for); all three standing still is."""
    alerts = Alerts(AlertSettings(stall_s=30))
    for t in range(0, 120, 2):
        seen = view(kind=EngineKind.LLAMACPP, generation_tokens_total=500.0, progress_total=100.0 + t)
        assert rules(alerts, seen, t) == []
    alerts = Alerts(AlertSettings(stall_s=30))
    still = view(kind=EngineKind.LLAMACPP, generation_tokens_total=500.0, progress_total=900.0)
    for t in range(0, 30, 2):
        assert rules(alerts, still, t) == []
    fired = [e for e in alerts.engine(still, 30) if e.rule == "stalled"]
    assert [(e.rule, e.fired) for e in fired] == [("stalled", True)]
    assert "no token generated, prompt token processed or decoding step for 30 s" in fired[0].message
    assert rules(alerts, replace(still, progress_total=0.0), 32) == [("stalled", False)]  # a reset is progress


def test_a_declared_progress_counter_unknown_with_a_reason_stands_aside() -> None:
    """A llama.cpp build without n_decode_total and without /slots: its progress cannot be read, so a still
    generation counter says nothing (the poll gives the reason: test_llamacpp_progress)."""
    alerts = Alerts(AlertSettings(stall_s=30))
    blind = view(kind=EngineKind.LLAMACPP, generation_tokens_total=500.0, unknown={"progress_total": "not read"})
    for t in range(0, 120, 2):
        assert rules(alerts, blind, t) == []
    # no progress counter declared (vLLM), nothing unknown: its generation counter is its progress
    alerts = Alerts(AlertSettings(stall_s=30))
    for t in range(0, 30, 2):
        assert rules(alerts, view(generation_tokens_total=500.0), t) == []
    assert rules(alerts, view(generation_tokens_total=500.0), 30) == [("stalled", True)]
