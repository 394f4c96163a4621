"""The pool summary, pure: errors in a few words, totals that never read an unknown as 0, the verdict."""

from __future__ import annotations

import re
from dataclasses import replace

from poolconsole.config import PoolConfig, parse_config
from poolconsole.model.alerts import Alerts
from poolconsole.model.failure_modes import MODES, diagnose
from poolconsole.model.gateway import gateway_reports
from poolconsole.model.hosts import HostSnapshot, HostState
from poolconsole.model.pool_state import PoolState
from poolconsole.model.snapshots import EngineState
from poolconsole.model.summary import brief, short, summarise
from poolconsole.model.tally import HEAP_SLACK, tally_of
from poolconsole.model.units import num
from poolconsole.ui import cells
from tests.helpers import uipool

REFUSED = "connection refused (is the engine running and listening on this port?)"


def test_errors_in_a_few_words() -> None:
    assert brief("connection refused by 127.0.0.1:8000 (is the engine running and listening on that port?)") == (
        "connection refused"
    )
    assert short("connection refused by ws48:22 (is sshd running on that port?)") == "refused"
    assert brief("no answer within 5 s") == "timed out"
    assert brief("HTTP 503: Loading model") == "HTTP 503"
    assert brief("authentication refused by ws48:22 (key and agent ...)") == "auth refused"
    assert brief(None) == "no reason given"
    assert len(brief("x" * 200)) <= 32


def test_nothing_polled_reads_unknown_never_zero() -> None:
    config = uipool.config()
    summary = summarise(PoolState(config, uipool.clock), Alerts(config.alerts))
    text = " ".join(summary.lines)
    assert summary.verdict.startswith("starting: 0/8 engines and 0/7 hosts polled")
    assert "generation n/a" in text and "running n/a" in text and "VRAM dedicated n/a" in text
    assert "power n/a" in text and summary.generation_tokens_per_s is None
    assert " 0 tok/s" not in text and "0/0 GiB" not in text


def test_engines_up_while_the_hosts_have_not_answered_is_not_called_healthy() -> None:
    """The demo's first frame read "healthy: 8/8 engines up, 0/7 hosts up" while every host said polling."""
    config = uipool.config()
    state, alerts = PoolState(config, uipool.clock), Alerts(config.alerts)
    for engine in uipool.engine_snapshots(config):
        state.apply_engine(engine)
    summary = summarise(state, alerts)
    assert summary.verdict == "starting: 8/8 engines and 0/7 hosts polled, none down so far"
    for host in uipool.host_snapshots(config):
        state.apply_host(host)
    assert summarise(state, alerts).verdict == "healthy: 8/8 engines up, 7/7 hosts up"


def test_a_config_with_nothing_in_it_is_not_called_healthy() -> None:
    """An empty hosts.toml read "healthy: 0/0 engines up, 0/0 hosts up" (and `status` said nothing to poll)."""
    config = parse_config("")
    summary = summarise(PoolState(config, uipool.clock), Alerts(config.alerts))
    assert summary.verdict == "nothing to poll: the config has no [[engines]] and no [[hosts]]"
    assert not summary.healthy
    assert config.warnings() == ["nothing to poll: no [[engines]] and no [[hosts]]"]  # check-config prints it
    assert not uipool.config().warnings()


def test_the_healthy_pool_and_a_degraded_host() -> None:
    config = uipool.config()
    state, alerts = PoolState(config, uipool.clock), Alerts(config.alerts)
    for host in uipool.host_snapshots(config):
        state.apply_host(host)
    for engine in uipool.engine_snapshots(config):
        state.apply_engine(engine)
    healthy = summarise(state, alerts)
    assert healthy.verdict == "healthy: 8/8 engines up, 7/7 hosts up" and healthy.healthy
    rows = [
        round(t.view.generation_tokens_per_s)
        for t in state.engines.values()
        if t.view and t.view.generation_tokens_per_s is not None
    ]
    assert healthy.generation_tokens_per_s == sum(rows)
    state.apply_host(
        HostSnapshot("rig3090", "rig3090", HostState.DEGRADED, "rocm-smi: not found", fetched_at=uipool.T0 + 3)
    )
    degraded = summarise(state, alerts)
    assert degraded.verdict == "1 problem: rig3090 degraded (rocm-smi: not found)"  # the problem, not the tool
    assert degraded.why() == {"rig3090": "rocm-smi: not found"}  # its engines answer: not "host down"


def _healthy(config: PoolConfig | None = None) -> tuple[PoolState, Alerts]:
    config = config or uipool.config()
    state, alerts = PoolState(config, uipool.clock), Alerts(config.alerts)
    for host in uipool.host_snapshots(config):
        state.apply_host(host)
    for engine in uipool.engine_snapshots(config):
        state.apply_engine(engine)
    return state, alerts


def _down(state: PoolState, name: str, models: tuple[str, ...] = ()) -> None:
    """An engine refusing connections (a refused engine lists no models, as the collector has it)."""
    snap = [s for s in uipool.engine_snapshots(state.config) if s.name == name][-1]
    down = replace(snap, fetched_at=uipool.T0 + 3, state=EngineState.DOWN, error=REFUSED, metrics=None)
    state.apply_engine(replace(down, models=models))


def test_a_host_down_is_counted_in_vram_and_power_never_dropped() -> None:
    """As in the demo's hosts.toml, no gpu_memory_gib: the GPUs ws48 reported are what the totals miss."""
    text = re.sub(r"(?m)^gpu_memory_gib = .*$", "", (uipool.ROOT / "hosts.toml").read_text())
    state, alerts = _healthy(parse_config(text))
    up = summarise(state, alerts).lines[2]
    assert "n/a" not in up, up
    state.apply_host(
        HostSnapshot("ws48", "ws48", HostState.UNREACHABLE, "connection refused", fetched_at=uipool.T0 + 3)
    )
    line = summarise(state, alerts).lines[2]
    assert re.fullmatch(
        r"VRAM dedicated \d+/\d+ GiB \(1 host n/a\) · unified \d+/\d+ GiB · power \d+ W \(1 host n/a\)", line
    ), line


def test_a_route_left_with_no_engine_is_said_once_with_its_engine() -> None:
    state, alerts = _healthy()
    assert "gateway ok, healthy, 1 route with no engine" in summarise(state, alerts).lines[3]  # retired-model
    _down(state, "qwen3-next-80b")
    summary = summarise(state, alerts)
    assert summary.verdict == (
        "1 problem: qwen3-next-80b down (connection refused), so gateway route qwen3-next-80b has no engine"
    )
    assert "· gateway ok, healthy, 2 routes with no engine ·" in summary.lines[3], summary.lines[3]
    assert "gateway gateway" not in " ".join(summary.lines)
    state.apply_host(HostSnapshot("tp4", "tp4", HostState.UNREACHABLE, "connection refused", fetched_at=uipool.T0 + 3))
    assert summarise(state, alerts).verdict == (
        "1 problem: tp4 unreachable (connection refused), its engine qwen3-next-80b down,"
        " so gateway route qwen3-next-80b has no engine"
    )


def test_a_down_engine_and_its_log_finding_are_one_problem() -> None:
    state, alerts = _healthy()
    _down(state, "qwen3-next-80b", models=("qwen3-next-80b",))  # still routed: only the log's finding joins
    example = next(m.example for m in MODES if m.id == "cuda_out_of_memory")
    alerts.log_findings("qwen3-next-80b", diagnose([example]), uipool.T0 + 3, "qwen3-next-80b went down")
    summary = summarise(state, alerts)
    assert summary.verdict == "1 problem: qwen3-next-80b down (connection refused; its log: CUDA out of memory)"
    assert summary.why() == {"qwen3-next-80b": "CUDA OOM"}


def test_a_model_line_counts_the_unknown_once_after_run_wait() -> None:
    state, _ = _healthy()
    _down(state, "qwen3-next-80b")
    tracks = [state.engines["qwen3-next-80b"], state.engines["qwen3-30b-a3b"]]
    known = tracks[1].view
    assert known is not None and known.requests_running is not None and known.requests_waiting is not None
    line = cells.model_line("m", tracks, cells.Colors("g", "y", "r", "d", "b"), 200).plain
    assert f"run/wait {num(known.requests_running)}/{num(known.requests_waiting)} (1 n/a)" in line, line
    assert line.count("n/a") == 2, line  # tok/s's and run/wait's


def test_the_oldest_data_counts_from_each_targets_last_answer_not_its_last_try() -> None:
    """A pool where nothing ever answered read "oldest data 0 s (tp4)" while every row's Age said never."""
    config = uipool.config()
    state, alerts = PoolState(config, uipool.clock), Alerts(config.alerts)
    assert summarise(state, alerts).lines[3].endswith("· no data yet: none of 15 targets has answered")
    for host in config.hosts:
        state.apply_host(HostSnapshot(host.name, host.address, HostState.UNREACHABLE, "no route", fetched_at=uipool.T0))
    for engine in config.engines:
        _down(state, engine.name)
    line = summarise(state, alerts).lines[3]
    assert line.endswith("· no data yet: none of 15 targets has answered") and "0 s" not in line, line
    healthy, _ = _healthy(config)
    now = uipool.T0 + 40
    healthy.apply_host(HostSnapshot("ws48", "ws48", HostState.UNREACHABLE, "no route", fetched_at=now))
    line = summarise(healthy, alerts, now).lines[3]
    assert re.search(r"· oldest data (3[0-9]|40) s \(ws48\)$", line), line  # its last answer, not this try


def test_a_route_an_engine_listing_no_models_may_serve_is_not_drift() -> None:
    """llama.cpp read through Prometheus has no /v1/models: its engine answers and lists none. The routes
    no other engine lists are unknown, not 'served by no engine' (a healthy pool had read as drifting)."""
    config = uipool.config()
    state, alerts = PoolState(config, uipool.clock), Alerts(config.alerts)
    for host in uipool.host_snapshots(config):
        state.apply_host(host)
    snap = next(s for s in uipool.engine_snapshots(config) if "gemma-3-27b-it" in s.models)
    for engine in uipool.engine_snapshots(config):
        if engine.name == snap.name and engine.metrics is not None:  # as llama.cpp through Prometheus
            engine = replace(engine, models=(), metrics=replace(engine.metrics, model_names=()))
        state.apply_engine(engine)
    summary = summarise(state, alerts)
    assert "route" not in summary.verdict and "with no engine" not in summary.lines[3], summary.lines
    [route] = [r for report in gateway_reports(state) for r in report.routes if r.model == "gemma-3-27b-it"]
    assert route.engine is None and route.unlisted == (snap.name,)


def test_the_oldest_data_heap_stays_bounded_while_a_target_stays_silent() -> None:
    """A target that answered once and then stopped kept its time at the heap's top, so every later answer's
    time stayed in the heap below it: a float a poll for as long as the console ran (the chaos soak's
    console grew 9 MiB/h). The heap now holds at most twice the live times plus HEAP_SLACK."""
    config = uipool.config()
    state, alerts = PoolState(config, uipool.clock), Alerts(config.alerts)
    hosts = [h.name for h in config.hosts]
    silent, talking = hosts[0], hosts[1:]
    state.apply_host(HostSnapshot(silent, silent, HostState.OK, fetched_at=uipool.T0))
    for tick in range(1, 2001):
        for name in talking:
            state.apply_host(HostSnapshot(name, name, HostState.OK, fetched_at=uipool.T0 + tick))
        summarise(state, alerts, uipool.T0 + tick)  # as each redraw does: the tally takes in what changed
    tally = tally_of(state)
    assert len(tally.stamps) == 2, tally.stamps  # the silent host's answer and this tick's
    assert len(tally.oldest) <= 2 * len(tally.stamps) + HEAP_SLACK, len(tally.oldest)
    line = summarise(state, alerts, uipool.T0 + 2010).lines[3]
    assert re.search(rf"· oldest data 2010 s \({silent}\)", line), line
    state.apply_host(HostSnapshot(silent, silent, HostState.OK, fetched_at=uipool.T0 + 2005))
    line = summarise(state, alerts, uipool.T0 + 2010).lines[3]  # the silent one answered: the others are oldest
    assert "oldest data 10 s (" in line and f"({silent})" not in line, line
