"""The capacity ledger's aggregation (poolconsole.model.ledger) on synthetic history rows: counters across
a restart, a recorder restart and a gap, busy and idle time, energy split between engines, the decision
with its reason, and the prices of `[ledger]`."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

import pytest

from poolconsole.config import ConfigError, parse_config
from poolconsole.config.models import LedgerSettings
from poolconsole.model.ledger import MAX_GAP_S, Ledger, build
from poolconsole.model.ledger_costs import costs, decide

T0 = dt.datetime(2026, 11, 30, 10, 0, tzinfo=dt.UTC).timestamp()
DAY = "2026-11-30"


@dataclass(frozen=True)
class Row:
    at: float
    kind: str
    name: str
    values: dict[str, Any]


def engine(
    at: float,
    generated: float | None,
    increase: float | None,
    *,
    running: float | None = 1,
    name: str = "qwen",
    kind: str = "vllm",
    requests: float | None = None,
    resets: int = 0,
    host: str = "box",
) -> Row:
    """One stored engine poll: the raw counter, the poll's reset-safe increase (None: the first poll of a
    recorder session, which has none), requests running."""
    inc: dict[str, float] = {}
    if increase is not None:
        inc["generation_tokens_total"] = increase
        inc["prompt_tokens_total"] = increase * 2
        if requests is not None:
            inc["requests_finished_total"] = 1.0
    totals = {} if requests is None else {"requests_finished_total": requests}
    values: dict[str, Any] = {
        "name": name,
        "kind": kind,
        "host": host,
        "models": [f"{name}-model"],
        "state": "ok" if generated is not None else "down",
        "requests_running": running,
        "generation_tokens_total": generated,
        "prompt_tokens_total": None if generated is None else generated * 2,
        "increase": inc,
        "totals": totals,
        "counter_resets": resets,
        "unknown": {},
    }
    return Row(at, "engine", name, values)


def host(at: float, *powers: float | None, engine_gpus: dict[str, list[int]] | None = None, name: str = "box") -> Row:
    gpus = [{"index": i, "name": "RTX", "power_w": p} for i, p in enumerate(powers)]
    return Row(at, "host", name, {"name": name, "state": "ok", "gpus": gpus, "engine_gpus": engine_gpus or {}})


def one_day(rows: list[Row], name: str = "qwen") -> dict[str, Any]:
    ledger = Ledger()
    for row in sorted(rows, key=lambda r: r.at):
        ledger.add(row)
    (day,) = [d for d in ledger.days() if d.engine == name]
    return day.to_json()


def test_a_counter_reset_counts_the_new_value_never_a_negative_step() -> None:
    rows = [
        engine(T0, 1000, None),  # the first reading: what came before is not the pool's
        engine(T0 + 2, 1100, 100),
        engine(T0 + 4, 40, 40, resets=1),  # the engine restarted: the poll's increase is the new value
        engine(T0 + 6, 90, 50),
    ]
    day = one_day(rows)
    assert day["output_tokens"] == 190
    assert day["prompt_tokens"] == 380
    assert day["restarts"] == 1


def test_a_recorder_restart_and_a_restart_across_a_gap_are_bridged_by_the_raw_counter() -> None:
    rows = [
        engine(T0, 1000, None),
        engine(T0 + 2, 1100, 100),
        # the recorder stopped for an hour; its next session's first poll has no increase
        engine(T0 + 3602, 1600, None),  # the engine kept running: +500
        engine(T0 + 3604, 1650, 50),
        engine(T0 + 7200, 30, None),  # stopped again, and the engine restarted meanwhile: +30
        engine(T0 + 7202, 60, 30),
    ]
    day = one_day(rows)
    assert day["output_tokens"] == 100 + 500 + 50 + 30 + 30


def test_polls_missing_from_the_store_count_the_raw_growth_over_the_polls_increase() -> None:
    """A rollup minute that holds a recorder restart (its summed increase lacks the bridge), or polls a full
    disk dropped: the raw counter grew more than the row's increase says."""
    rows = [engine(T0, 1000, None), engine(T0 + 60, 1400, 100), engine(T0 + 120, 1500, 100)]
    assert one_day(rows)["output_tokens"] == 400 + 100


def test_down_polls_in_between_are_neither_counted_twice_nor_lost() -> None:
    rows = [
        engine(T0, 1000, None),
        engine(T0 + 2, None, None, running=None),  # down: no reading
        engine(T0 + 4, None, None, running=None),
        engine(T0 + 6, 1300, 300),  # the increase spans the down phase, from the last reading
    ]
    day = one_day(rows)
    assert day["output_tokens"] == 300
    assert day["busy_s"] == 2.0  # only the last step: down time is unknown, neither busy nor idle
    assert day["idle_s"] == 0.0


def test_busy_and_idle_time_and_a_gap_that_counts_as_neither() -> None:
    rows = [
        engine(T0, 0, None, running=0),
        engine(T0 + 10, 0, 0, running=2),  # busy 10 s
        engine(T0 + 20, 5, 5, running=0),  # idle 10 s
        engine(T0 + 20 + MAX_GAP_S + 1, 5, 0, running=0),  # after a gap: nothing
        engine(T0 + 30 + MAX_GAP_S + 1, 5, 0, running=0),  # idle 10 s
    ]
    day = one_day(rows)
    assert (day["busy_s"], day["idle_s"]) == (10.0, 20.0)


def test_energy_is_split_between_the_engines_on_a_gpu_and_idle_burn_is_the_idle_share() -> None:
    pinned = {"qwen": [0], "embed": [0], "big": [1]}
    rows = [
        engine(T0, 0, None, running=0),
        engine(T0, 0, None, running=0, name="embed"),
        engine(T0, 0, None, running=1, name="big"),
        host(T0, 300.0, 600.0, engine_gpus=pinned),
        engine(T0 + 240, 10, 10, running=0),
        engine(T0 + 240, 10, 10, running=1, name="embed"),
        engine(T0 + 240, 10, 10, running=1, name="big"),
        host(T0 + 240.5, 300.0, 600.0, engine_gpus=pinned),  # held back over the time since the last row
    ]
    rows = [r for r in rows if r.kind == "host"] + [r for r in rows if r.kind == "engine"]
    ledger = Ledger()
    for row in sorted(rows, key=lambda r: r.at):
        ledger.add(row)
    got = {d.engine: d for d in ledger.days()}
    hours = 240.5 / 3600
    assert got["qwen"].energy_kwh == pytest.approx(0.150 * hours)  # half of GPU 0's 300 W
    assert got["embed"].energy_kwh == pytest.approx(0.150 * hours)
    assert got["big"].energy_kwh == pytest.approx(0.600 * hours)
    assert got["qwen"].idle_energy_kwh == pytest.approx(0.150 * hours)  # nothing running on qwen
    assert got["embed"].idle_energy_kwh == 0.0 and got["big"].idle_energy_kwh == 0.0


def test_unknown_power_is_null_never_zero_and_an_unpinned_engine_takes_the_hosts_gpus() -> None:
    rows = [
        engine(T0, 0, None, name="mac", host="studio"),
        engine(T0, 0, None, name="dark", host="nopower"),
        host(T0, 100.0, name="studio"),
        host(T0, None, name="nopower"),
        engine(T0 + 60, 1, 1, name="mac", host="studio"),
        engine(T0 + 60, 1, 1, name="dark", host="nopower"),
        host(T0 + 60, 100.0, name="studio"),
        host(T0 + 60, None, name="nopower"),
    ]
    assert one_day(rows, "mac")["energy_kwh"] == pytest.approx(100 * 60 / 3.6e6, abs=1e-6)
    dark = one_day(rows, "dark")
    assert dark["energy_kwh"] is None and "no GPU power reading from host nopower" in dark["unknown"]["energy_kwh"]


def test_requests_come_from_the_request_counter_and_are_null_with_a_reason_without_one() -> None:
    counted = one_day([engine(T0, 0, None, requests=7), engine(T0 + 2, 5, 5, requests=8)])
    assert counted["requests"] == 1
    llama = one_day([engine(T0, 0, None, kind="llamacpp"), engine(T0 + 2, 5, 5, kind="llamacpp")])
    assert llama["requests"] is None and "llamacpp" in llama["unknown"]["requests"]


def test_entries_are_per_utc_day() -> None:
    midnight = dt.datetime(2026, 12, 1, tzinfo=dt.UTC).timestamp()
    rows = [engine(midnight - 2, 0, None), engine(midnight - 1, 10, 10), engine(midnight + 1, 25, 15)]
    doc = build(rows, LedgerSettings(), start=midnight - 86400, end=midnight + 86400, store="s", config=None)
    assert [(e["date"], e["output_tokens"]) for e in doc["entries"]] == [("2026-11-30", 10), ("2026-12-01", 15)]


def days_of(tokens: list[int]) -> list[Any]:
    """One engine's ledger over len(tokens) days, `tokens` output tokens each; a gateway beside it."""
    rows = []
    total = 0.0
    for i, count in enumerate(tokens):
        at = T0 + i * 86400
        rows.append(engine(at, total, None if i == 0 else 0))
        rows.append(engine(at + 60, total + count, count))
        rows.append(engine(at + 60, 10**9, 10**9, name="gw", kind="litellm"))  # never in the pool's total
        total += count
    ledger = Ledger()
    for row in rows:
        ledger.add(row)
    return ledger.days()


def test_the_decision_waits_for_two_weeks_then_reads_the_median_day() -> None:
    early = decide(days_of([300_000] * 3), LedgerSettings())
    assert early["pays_off"] is None and early["output_tokens_per_day"] == 300_000
    assert "3 days of data" in early["reason"] and "too early" in early["reason"]

    busy = decide(days_of([412_000] * 13 + [5_000]), LedgerSettings())
    assert busy["pays_off"] is True
    assert busy["reason"] == "412k output tokens/day over 14 days (threshold 200k): pooling pays off"

    quiet = decide(days_of([38_000] * 14), LedgerSettings())
    assert quiet["pays_off"] is False and quiet["output_tokens_per_day"] == 38_000
    assert quiet["reason"].endswith("treat the pool as an on-prem compliance backup")
    assert quiet["reason"].startswith("38k output tokens/day over 14 days")

    lower_line = decide(days_of([38_000] * 14), LedgerSettings(threshold_output_tokens_per_day=30_000))
    assert lower_line["pays_off"] is True


def test_prices_give_the_value_the_energy_cost_the_idle_burn_and_the_payback() -> None:
    settings = LedgerSettings(
        electricity_per_kwh=0.30,
        pue=1.5,
        api_price_per_mtok={"qwen-model": 2.0, "*": 1.0},
        hardware_cost=3000.0,
        hardware_lifetime_years=3.0,
    )
    rows = [
        engine(T0, 0, None, running=0),
        host(T0, 7200.0, engine_gpus={"qwen": [0]}),
        engine(T0 + 250, 1_000_000, 1_000_000, running=0),
        host(T0 + 250, 7200.0, engine_gpus={"qwen": [0]}),  # 250 s at 7.2 kW: 0.5 kWh
    ]
    ledger = Ledger()
    for row in rows:
        ledger.add(row)
    days = ledger.days()
    money = costs(days, settings, 0.0)
    assert days[0].value == pytest.approx(2.0)  # 1M output tokens at 2.0 per million
    assert money["value"] == pytest.approx(2.0)
    assert money["energy_cost"] == pytest.approx(0.5 * 1.5 * 0.30)  # 0.5 kWh of GPU, PUE 1.5
    assert money["idle_energy_kwh"] == pytest.approx(0.5) and money["idle_cost"] == pytest.approx(0.225)
    assert money["depreciation_per_day"] == pytest.approx(3000 / (3 * 365.25), abs=1e-4)
    assert money["payback_days"] == pytest.approx(3000 / (2.0 - 0.225), rel=1e-3)
    bare = costs(days, LedgerSettings(), 0.0)
    assert (
        bare["value"] is None
        and bare["energy_cost"] is None
        and "electricity_per_kwh" in bare["unknown"]["energy_cost"]
    )


def test_the_ledger_table_is_validated_like_every_other() -> None:
    good = parse_config('[ledger]\nelectricity_per_kwh = 0.3\napi_price_per_mtok = { "qwen" = 0.6 }\n')
    assert good.ledger.electricity_per_kwh == 0.3 and good.ledger.threshold_output_tokens_per_day == 200_000
    with pytest.raises(ConfigError) as caught:
        parse_config("[ledger]\nelectricity_per_kwhh = 0.3\npue = 0.5\n")
    rendered = caught.value.render()
    assert "electricity_per_kwhh" in rendered and "pue" in rendered  # every problem at once
