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


def test_a_llamacpp_counter_that_moves_only_when_a_request_ends_never_stalls() -> None:
    """llama.cpp without /slots: tokens_predicted_total grows when a request ends, so a two-minute answer reads
    as a still counter with a request running. That is no wedge to page about (or restart for)."""
    alerts = Alerts(AlertSettings(stall_s=30))
    blind = {"generation_counted_at_end": True}
    for t in range(0, 120, 2):
        seen = view(kind=EngineKind.LLAMACPP, generation_tokens_total=500.0, details=blind)
        assert rules(alerts, seen, t) == []
    # the same engine with /slots (its in-progress tokens counted) and a still counter does stall
    alerts = Alerts(AlertSettings(stall_s=30))
    for t in range(0, 30, 2):
        assert rules(alerts, view(kind=EngineKind.LLAMACPP, generation_tokens_total=500.0), t) == []
    assert rules(alerts, view(kind=EngineKind.LLAMACPP, generation_tokens_total=500.0), 30) == [("stalled", True)]


async def test_a_llamacpp_poll_says_when_its_counter_moves_only_at_a_request_s_end() -> None:
    """The collector marks it: /slots answering (the requests in progress counted) leaves no mark; /slots
    refused (404, as with `--no-slots`) marks the view, so the rule above stands aside."""
    from pathlib import Path

    from poolconsole.collect.engines.poll import EnginePoller
    from poolconsole.config.models import Engine
    from poolconsole.model.view import engine_view
    from tests.unit.test_hostile_input import Pages

    real = Path(__file__).parents[1] / "fixtures" / "real" / "llamacpp-b1-0c1e570"
    routes: dict[str, bytes] = {
        "/metrics": (real / "metrics-after-requests.txt").read_bytes(),
        "/v1/models": (real / "v1-models.json").read_bytes(),
        "/props": (real / "props.json").read_bytes(),
        "/slots": (real / "slots-after-requests.json").read_bytes(),
    }
    llama = Engine(name="e", kind=EngineKind.LLAMACPP, url="http://e")
    with_slots = engine_view([await EnginePoller(llama, Pages(dict(routes))).poll()])
    assert with_slots.state is EngineState.OK and not with_slots.details.get("generation_counted_at_end")
    routes["/slots"] = b""  # 404
    without = engine_view([await EnginePoller(llama, Pages(dict(routes))).poll()])
    assert without.state is EngineState.OK and without.details.get("generation_counted_at_end") is True
