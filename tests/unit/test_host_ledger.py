"""Idle burn per host (poolconsole.model.host_ledger, the `hosts` key of `ledger --json`) on synthetic
history rows: busy, idle and unknown time from the host's engines, power at idle against under load, the
energy burned idle, the hint (OLLAMA_KEEP_ALIVE where Ollama runs, the sleep policy), and the existing
`ledger --json` fields unchanged."""

from __future__ import annotations

from typing import Any

import pytest

from poolconsole.config.models import LedgerSettings
from poolconsole.model.host_ledger import KEEP_ALIVE_HINT, SLEEP_HINT, text_lines
from poolconsole.model.ledger import MAX_GAP_S, build
from poolconsole.model.ledger_report import text
from tests.unit.test_ledger import DAY, T0, Row, engine, host

STEP = 10.0


def day_rows() -> list[Row]:
    """Host `box` (two GPUs) with a vLLM engine and an Ollama one: 60 s under load at 300 + 50 W, then
    120 s idle at 60 + 20 W, then 30 s with the vLLM engine down; then a gap longer than MAX_GAP_S, then
    20 s more idle (the gap counts nothing). Host `solo`: one vLLM engine, busy 100 s, idle 20 s."""
    rows: list[Row] = []
    t = T0
    phases = [(6, 1, 300.0, 50.0, True), (12, 0, 60.0, 20.0, True), (3, 0, 60.0, 20.0, False)]
    rows += [engine(t, 0, None, running=1, name="qwen"), engine(t, 0, None, running=0, name="emb", kind="ollama")]
    rows.append(host(t + 0.5, 300.0, 50.0))
    for count, running, p0, p1, up in phases:
        for _ in range(count):
            t += STEP
            rows.append(engine(t, 100 if up else None, 0, running=running, name="qwen"))
            rows.append(engine(t, 0, 0, running=0, name="emb", kind="ollama"))
            rows.append(host(t + 0.5, p0, p1))
    t += MAX_GAP_S + 60
    for _ in range(3):
        rows.append(engine(t, 100, 0, running=0, name="qwen"))
        rows.append(engine(t, 0, 0, running=0, name="emb", kind="ollama"))
        rows.append(host(t + 0.5, 60.0, 20.0))
        t += STEP
    s = T0
    for i in range(13):
        running = 1 if i <= 10 else 0
        rows.append(engine(s, 10 * i, 10 if i else None, running=running, name="solo-llm", host="solo"))
        rows.append(host(s + 0.5, 250.0 if running else 40.0, name="solo"))
        s += STEP
    return sorted(rows, key=lambda r: r.at)


def ledger(rows: list[Row]) -> dict[str, Any]:
    return build(rows, LedgerSettings(), start=T0 - 3600, end=T0 + 86400, store="test.db", config=None)


def by_host(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["host"]: e for e in doc["hosts"] if e["date"] == DAY}


def test_busy_idle_and_unknown_time_with_power_at_idle_and_under_load() -> None:
    box = by_host(ledger(day_rows()))["box"]
    assert box["engines"] == ["emb", "qwen"]
    assert box["busy_s"] == pytest.approx(60.0)
    assert box["idle_s"] == pytest.approx(120.0 + 20.0)  # the 20 s after the gap; the gap itself counts nothing
    assert box["unknown_s"] == pytest.approx(30.0)
    assert "qwen was down" in box["unknown"]["unknown_s"]
    assert box["load_power_w"] == pytest.approx(350.0)
    assert box["idle_power_w"] == pytest.approx(80.0)
    assert box["idle_energy_kwh"] == pytest.approx(80.0 * 140 / 3.6e6, abs=1e-6)
    assert box["energy_kwh"] == pytest.approx((350.0 * 60 + 80.0 * 170) / 3.6e6, abs=1e-6)
    assert box["hint"] is not None and KEEP_ALIVE_HINT in box["hint"] and SLEEP_HINT in box["hint"]
    assert box["hint"].startswith("idle 0.0 h at 80 W")


def test_the_hint_only_when_idle_as_long_as_busy_and_keep_alive_only_with_ollama() -> None:
    hosts = by_host(ledger(day_rows()))
    solo = hosts["solo"]
    assert solo["busy_s"] == pytest.approx(100.0) and solo["idle_s"] == pytest.approx(20.0)
    assert solo["hint"] is None  # it worked more than it idled
    assert solo["load_power_w"] == pytest.approx(250.0) and solo["idle_power_w"] == pytest.approx(40.0)
    rows = [r for r in day_rows() if r.name.startswith("solo")]
    idle = [Row(r.at, r.kind, r.name, {**r.values, "requests_running": 0}) if r.kind == "engine" else r for r in rows]
    (entry,) = ledger(idle)["hosts"]
    assert entry["busy_s"] == 0 and entry["load_power_w"] is None
    assert entry["unknown"]["load_power_w"] == "never under load"
    assert entry["hint"] is not None and SLEEP_HINT in entry["hint"] and KEEP_ALIVE_HINT not in entry["hint"]


def test_no_power_reading_is_unknown_never_zero_and_a_host_without_engines_is_unknown_time() -> None:
    rows = [engine(T0 + i * STEP, 10, 0, running=0) for i in range(4)]
    rows += [host(T0 + i * STEP + 0.5, None) for i in range(4)]
    rows += [host(T0 + i * STEP + 0.5, 90.0, name="bare") for i in range(4)]
    hosts = by_host(ledger(sorted(rows, key=lambda r: r.at)))
    box = hosts["box"]
    assert box["idle_s"] == pytest.approx(30.0)
    assert box["idle_power_w"] is None and box["idle_energy_kwh"] is None and box["energy_kwh"] is None
    assert box["unknown"]["idle_power_w"] == "no GPU power reading while idle"
    bare = hosts["bare"]
    assert bare["idle_s"] == 0 and bare["unknown_s"] == pytest.approx(30.0)
    assert "no engine row" in bare["unknown"]["unknown_s"]


def test_the_existing_ledger_fields_are_unchanged_and_the_text_shows_today() -> None:
    doc = ledger(day_rows())
    assert set(doc) == {
        "store",
        "config",
        "from",
        "to",
        "entries",
        "unattributed_energy",
        "costs",
        "decision",
        "gateway",
        "gateway_unknown",
        "gateway_vs_engines",
        "mismatches",
        "callers_now",
        "hosts",
    }
    lines = text_lines(doc["hosts"], DAY)
    assert lines[1] == f"idle burn per host today ({DAY}):"
    assert "  box: idle 0.0 h at 80 W, busy 0.0 h at 350 W, unknown 0.0 h" in lines
    assert any(line.startswith("    hint: idle") for line in lines)
    assert f"idle burn per host today ({DAY}):" in text(doc | {"to": DAY})
