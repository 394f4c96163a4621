"""Alert rules: thresholds with hysteresis, restart loops, tok/s collapse, unknown values never alert."""

from __future__ import annotations

from dataclasses import replace
from typing import cast

from poolconsole.config.models import AlertSettings, EngineKind
from poolconsole.model.alerts import COLLAPSE_POLLS, Alerts
from poolconsole.model.hosts import GpuReading, HostSnapshot, HostState
from poolconsole.model.snapshots import EngineState
from poolconsole.model.view import EngineView


def view(**kw: object) -> EngineView:
    ok = cast(EngineState, "ok")  # a str where the model holds an EngineState
    base = EngineView(
        "e", EngineKind.VLLM, "h", "http://x", ok, None, ["m"], 1.0, 0.0, 0.5, 0.0, None, 100.0, 0.0, 0.1, None, None,
        0.0, 1,
    )  # fmt: skip
    # the generation counter unknown: a counter standing still with a request running is `stalled` (test_stalled)
    return replace(base, **kw)  # type: ignore[arg-type]


def host_at(used: float) -> HostSnapshot:
    gpu = GpuReading(0, "RTX 4090", None, 24 * 2**30, int(used * 24 * 2**30), 90.0, 60.0, 300.0, 450.0)
    return HostSnapshot("h", "127.0.0.1", HostState.OK, gpus=(gpu,))


def test_kv_alert_has_hysteresis() -> None:
    alerts = Alerts(AlertSettings(kv_usage=0.9, hysteresis=0.05, kv_usage_for_s=0))
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
    alerts = Alerts(AlertSettings(tps_collapse=0.3, tps_collapse_for_s=0))
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


def test_tps_collapse_waits_out_its_for_and_does_not_flap_at_the_line() -> None:
    """The normal demo's tps_collapse: fired at 15 tok/s (best 52), cleared 7 s later at 16 (the line 15.6),
    fired again. Now it fires only once the collapse held `tps_collapse_for_s`, and clears `hysteresis` of the
    best above the line."""
    alerts = Alerts(AlertSettings(tps_collapse=0.3, hysteresis=0.05, tps_collapse_for_s=15))
    t = 0.0
    for _ in range(COLLAPSE_POLLS):
        t += 1
        alerts.engine(view(generation_tokens_per_s=52.0), t)
    events: list[tuple[float, bool]] = []
    for _ in range(3 * COLLAPSE_POLLS):  # the mean settles at 10 tok/s: under 0.3 x 52
        t += 1
        events += [
            (t, e.fired) for e in alerts.engine(view(generation_tokens_per_s=10.0), t) if e.rule == "tps_collapse"
        ]
    assert [fired for _, fired in events] == [True]
    under_since = events[0][0] - 15  # fired once the mean had been under the line 15 s
    assert under_since > COLLAPSE_POLLS
    for _ in range(2 * COLLAPSE_POLLS):  # over 0.3 x the (slowly decaying) best, under 0.35 x: stays fired
        t += 1
        tps = 0.325 * alerts.peak_tps["e"]
        events += [
            (t, e.fired) for e in alerts.engine(view(generation_tokens_per_s=tps), t) if e.rule == "tps_collapse"
        ]
    assert [fired for _, fired in events] == [True], "it cleared at the line: no hysteresis"
    for _ in range(COLLAPSE_POLLS):
        t += 1
        events += [
            (t, e.fired) for e in alerts.engine(view(generation_tokens_per_s=40.0), t) if e.rule == "tps_collapse"
        ]
    assert [fired for _, fired in events] == [True, False]


def test_an_alert_fires_only_once_its_condition_held_for_the_rules_for_duration() -> None:
    """Prometheus' `for`: pending until the condition held that long. A fall below the clear level starts
    the wait again; a dip just under the line does not (an overloaded KV cache hovering at 88-95 % fires)."""
    alerts = Alerts(AlertSettings(kv_usage=0.9, hysteresis=0.05, kv_usage_for_s=30))
    fired: list[tuple[float, bool]] = []
    for t, kv in [(0, 0.92), (10, 0.93), (20, 0.80), (25, 0.92), (40, 0.88), (54, 0.91)]:
        fired += [(t, e.fired) for e in alerts.engine(view(kv_cache_usage=kv), t)]
    assert fired == []  # held 29 s at most: the fall to 80 % at 20 s restarted the wait; 88 % at 40 s did not
    assert ("e", "kv_full") in alerts.pending
    fired += [(55, e.fired) for e in alerts.engine(view(kv_cache_usage=0.87), 55)]
    assert fired == [(55, True)]  # 30 s since 25 s, over the clear level all along
    assert alerts.engine(view(kv_cache_usage=0.87), 56) == []  # hysteresis still holds it
    assert [e.fired for e in alerts.engine(view(kv_cache_usage=0.80), 57)] == [False]
    assert not alerts.pending
    assert alerts.engine(view(kv_cache_usage=0.88), 58) == []  # under the line: not pending again
    assert not alerts.pending


def test_a_kv_cache_hovering_at_the_line_under_overload_fires_once_and_holds() -> None:
    """What a new operator saw on an overloaded engine: KV 91, 89, 93, 88 % ... for minutes and no alert,
    each dip under 90 % restarting the 30 s wait."""
    alerts = Alerts(AlertSettings(kv_usage=0.9, hysteresis=0.05, kv_usage_for_s=30))
    events = []
    for t in range(120):
        events += alerts.engine(view(kv_cache_usage=0.91 if t % 2 else 0.88), float(t))
    assert [(e.rule, e.fired, e.at) for e in events] == [("kv_full", True, 31.0)]


def test_a_gpu_hovering_at_the_vram_line_fires_once_its_for_held() -> None:
    alerts = Alerts(AlertSettings(vram=0.95, hysteresis=0.05, vram_for_s=30))
    events = []
    for t in range(60):
        events += alerts.host(host_at(0.96 if t % 2 else 0.93), float(t))
    assert [(e.rule, e.fired, e.at) for e in events] == [("vram_gpu0", True, 31.0)]


def test_the_for_durations_come_from_the_alerts_table() -> None:
    alerts = Alerts(AlertSettings(waiting=8, waiting_for_s=5, down_for_s=3))
    assert alerts.engine(view(requests_waiting=9.0), 0) == []
    assert [e.rule for e in alerts.engine(view(requests_waiting=9.0), 5)] == ["queue"]
    down = view(state="down", error="connection refused", requests_waiting=None)
    assert alerts.engine(down, 6) == []  # down 0 s of 3 (the queue alert stays: waiting is unknown now)
    assert [e.rule for e in alerts.engine(down, 9)] == ["down"]


def test_messages_are_plain_words_fired_and_cleared() -> None:
    alerts = Alerts(AlertSettings())
    fired = alerts.engine(view(state="down", error="connection refused"), 1)
    assert fired[0].message == "down: connection refused"
    cleared = alerts.engine(view(), 2)
    assert [(e.rule, e.message) for e in cleared] == [("down", "answering again")]
    alerts = Alerts(AlertSettings(waiting=8, waiting_for_s=0))
    alerts.engine(view(requests_waiting=20.0), 1)
    back = alerts.engine(view(requests_waiting=1.0), 2)
    assert [e.message for e in back] == ["queue back to 1 waiting"]
    assert not any("cleared:" in e.message or "ok:" in e.message for e in alerts.log)


def test_log_findings_fire_once_with_the_advice_and_clear_when_the_log_no_longer_shows_them() -> None:
    from poolconsole.config.models import AlertSettings
    from poolconsole.model.alerts import Alerts
    from poolconsole.model.failure_modes import diagnose

    alerts = Alerts(AlertSettings())
    [oom] = diagnose(["torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0"])
    [event] = alerts.log_findings("vllm-a", [oom], 10.0, "vllm-a restarted")
    assert event.fired and event.rule == "log:cuda_out_of_memory"
    assert "vllm-a restarted; its log shows CUDA out of memory" in event.message
    assert "Change: Lower --gpu-memory-utilization" in event.message
    assert alerts.log_findings("vllm-a", [oom], 11.0, "vllm-a restarted") == []
    assert alerts.log_findings("other", [], 11.0, "other went down") == []
    [cleared] = alerts.log_findings("vllm-a", [], 12.0, "vllm-a restarted")
    assert not cleared.fired and ("vllm-a", "log:cuda_out_of_memory") not in alerts.active


def test_an_alert_fired_under_its_line_says_it_crossed_it_and_held() -> None:
    """The clear level holds a pending alert, so it can fire while the value is under the line: the message
    says so ("queue fired: 6 requests waiting" read as an alert under its threshold of 8)."""
    alerts = Alerts(AlertSettings(waiting=8, waiting_for_s=15))
    fired = []
    for t, waiting in [(0, 9.0), (5, 6.0), (10, 5.0), (15, 6.0)]:
        fired += alerts.engine(view(requests_waiting=waiting), float(t))
    assert [e.message for e in fired] == ["6 requests waiting (8 or more 15 s ago, 5 or more since)"]
    over = Alerts(AlertSettings(waiting=8, waiting_for_s=15))
    fired = [e for t in (0, 15) for e in over.engine(view(requests_waiting=12.0), float(t))]
    assert [e.message for e in fired] == ["12 requests waiting"]  # over the line when it fires: the value alone
    vram = Alerts(AlertSettings(vram=0.95, hysteresis=0.05, vram_for_s=30))
    fired = [e for t, used in [(0, 0.96), (30, 0.93)] for e in vram.host(host_at(used), float(t))]
    assert [e.message for e in fired] == ["GPU 0 memory 93% used (95% or more 30 s ago, 90% or more since)"]


def test_restarts_the_consoles_own_actions_cause_are_not_a_restart_loop() -> None:
    """A rollover rolled back, then another profile: three restarts in minutes, all confirmed and audited,
    raised a critical restart loop. Those during an action (and its grace after) are not counted; a crash
    afterwards still is."""
    settings = AlertSettings(restart_loop_count=3, restart_loop_minutes=10)
    alerts = Alerts(settings)
    fired = []
    for start, end in ((0.0, 60.0), (100.0, 160.0)):
        alerts.action_started("e", start)
        fired += alerts.restarted("e", start + 20)  # the rollover's restart
        fired += alerts.restarted("e", start + 50)  # its rollback's
        alerts.action_ended("e", end)
    assert fired == [] and not alerts.restarts["e"]
    fired += alerts.restarted("e", 400.0)  # past the grace: the engine's own
    fired += alerts.restarted("e", 420.0)
    fired += alerts.restarted("e", 440.0)
    assert [(e.rule, e.fired) for e in fired] == [("restart_loop", True)]
    plain = Alerts(settings)  # the same restarts with no action: a loop at the third
    events = [e for t in (20.0, 50.0, 120.0) for e in plain.restarted("e", t)]
    assert [(e.rule, e.at) for e in events] == [("restart_loop", 120.0)]


def test_a_log_finding_clears_once_the_engine_has_served_ten_minutes_since() -> None:
    """It stayed active while the engine served for hours: the verdict called a healthy pool '1 problem'."""
    from poolconsole.model.alerts import LOG_FINDING_SERVED_S
    from poolconsole.model.failure_modes import diagnose
    from poolconsole.model.snapshots import EngineState

    alerts = Alerts(AlertSettings())
    [oom] = diagnose(["torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0"])
    alerts.log_findings("e", [oom], 100.0, "e went down")
    alerts.engine(view(state=EngineState.DOWN), 100.0)
    alerts.engine(view(state=EngineState.OK), 160.0)  # back: the ten minutes count from here
    assert not [
        e
        for e in alerts.engine(view(state=EngineState.OK), 160.0 + LOG_FINDING_SERVED_S - 1)
        if e.rule.startswith("log:")
    ]
    assert ("e", "log:cuda_out_of_memory") in alerts.active
    alerts.engine(view(state=EngineState.DOWN), 800.0)  # down again: the count starts over
    alerts.engine(view(state=EngineState.OK), 810.0)
    assert ("e", "log:cuda_out_of_memory") in alerts.active
    [cleared] = [
        e for e in alerts.engine(view(state=EngineState.OK), 810.0 + LOG_FINDING_SERVED_S) if e.rule.startswith("log:")
    ]
    assert not cleared.fired and cleared.message == "CUDA out of memory: serving for 10 min since its log showed it"
    assert ("e", "log:cuda_out_of_memory") not in alerts.active
