"""The pool summary, pure: errors in a few words, totals that never read an unknown as 0, the verdict."""

from __future__ import annotations

from poolconsole.model.alerts import Alerts
from poolconsole.model.hosts import HostSnapshot, HostState
from poolconsole.model.pool_state import PoolState
from poolconsole.model.summary import brief, short, summarise
from tests.helpers import uipool


def test_errors_in_a_few_words() -> None:
    assert brief("connection refused (is the engine running and listening on this port?)") == "connection refused"
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
    assert summary.verdict.startswith("starting: 0/8 engines polled")
    assert "generation n/a" in text and "running n/a" in text and "VRAM dedicated n/a" in text
    assert "power n/a" in text and summary.generation_tokens_per_s is None
    assert " 0 tok/s" not in text and "0/0 GiB" not in text


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
    assert degraded.verdict == "1 problem: rig3090 degraded (rocm-smi)"
    assert degraded.why() == {"rig3090": "rocm-smi"}  # its engines answer: not "host down"
