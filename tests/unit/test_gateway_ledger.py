"""The gateway's own accounting (issue 15, items 1 and 3): LiteLLM's Prometheus page parsed per route and
caller key (real 1.108.7 captures), and the gateway ledger on synthetic stored rows: the first reading, a
series born later, a gateway restart, the window's edge, gateway beside engine totals with the mismatch
flagged both ways, and requests per minute, concurrency, rate limits and saturation "now"."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from poolconsole.collect.engines.litellm_usage import caller_name, key_id, parse_usage
from poolconsole.collect.prom import ParseError
from poolconsole.config.models import LedgerSettings
from poolconsole.model.gateway_ledger import compare
from poolconsole.model.ledger import build
from poolconsole.model.ledger_report import text

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "litellm-prometheus"
T0 = dt.datetime(2026, 11, 30, 10, 0, tzinfo=dt.UTC).timestamp()
DAY = "2026-11-30"


@dataclass(frozen=True)
class Row:
    at: float
    kind: str
    name: str
    values: dict[str, Any]


def caller(
    route: str, who: str, requests: float, output: float, *, prompt: float = 0, seconds: float = 0
) -> dict[str, Any]:
    return {"route": route, "caller": who, "key": "abc123def456", "models": ["tiny"], "requests": requests,
            "failed_requests": 0, "prompt_tokens": prompt, "output_tokens": output, "latency_s": seconds}  # fmt: skip


def gw(at: float, *callers: dict[str, Any], limits: list[dict[str, Any]] | None = None, usage: bool = True) -> Row:
    details: dict[str, Any] = {"gateway_usage": {"callers": list(callers), "limits": limits or [], "in_flight": 1}}
    if not usage:
        details = {"gateway_usage_unknown": "no /metrics: add the prometheus callback"}
    return Row(
        at, "engine", "gw", {"name": "gw", "kind": "litellm", "state": "ok", "models": ["tiny"], "details": details}
    )


def eng(at: float, output: float, *, waiting: float = 0) -> Row:
    return Row(at, "engine", "llama", {"name": "llama", "kind": "llamacpp", "state": "ok", "models": ["tiny"],
               "generation_tokens_total": output, "prompt_tokens_total": 0, "requests_running": 0,
               "requests_waiting": waiting, "increase": {}})  # fmt: skip


def doc(rows: list[Row], end: float = T0 + 3600) -> dict[str, Any]:
    return build(rows, LedgerSettings(), start=T0 - 600, end=end, store="s", config=None)


# -- the parser, on real pages ------------------------------------------------------------------------------
def test_two_caller_keys_per_route() -> None:
    usage = parse_usage((FIX / "metrics-prometheus-two-keys.txt").read_bytes())
    rows = {(c["route"], c["caller"]): c for c in usage["callers"]}
    assert set(rows) == {("tiny", "alpha"), ("tiny", "beta"), ("tiny-b", "alpha"), ("tiny-b", "beta")}
    alpha = rows[("tiny", "alpha")]  # 2 calls (27 + 27 prompt, 8 + 9 output) and a stream (21 prompt, 5 output)
    assert (alpha["requests"], alpha["prompt_tokens"], alpha["output_tokens"]) == (3, 75, 22)
    assert alpha["models"] == ["tiny"] and alpha["failed_requests"] == 0 and alpha["latency_s"] > 0
    assert alpha["key"] == hashlib.sha256(b"sk-caller-alpha-1111").hexdigest()[:12]
    assert (rows[("tiny-b", "beta")]["requests"], rows[("tiny-b", "beta")]["output_tokens"]) == (2, 17)
    limits = {(x["caller"], x["type"]): x for x in usage["limits"]}
    assert limits[("alpha", "requests")] == {
        "caller": "alpha",
        "key": alpha["key"],
        "type": "requests",
        "used": 5,
        "limit": 600,
    }
    assert usage["in_flight"] == 1
    assert "sk-caller" not in json.dumps(usage)


def test_master_key_and_unhashed_labels() -> None:
    usage = parse_usage((FIX / "metrics-prometheus-master-key.txt").read_bytes())
    assert {c["caller"] for c in usage["callers"]} == {"master key"}
    assert caller_name("sk-raw-key-0000", None).startswith("key ") and "sk-raw" not in caller_name(
        "sk-raw-key-0000", None
    )
    assert key_id("sk-raw-key-0000") == hashlib.sha256(b"sk-raw-key-0000").hexdigest()[:12]
    assert caller_name(None, "None") == "no key"


def test_a_page_without_litellm_metrics() -> None:
    with pytest.raises(ParseError, match="prometheus"):
        parse_usage(b"# HELP python_info x\npython_info 1\n")


# -- counting ------------------------------------------------------------------------------------------
def test_first_reading_counts_nothing_then_growth_per_route_and_caller() -> None:
    d = doc([gw(T0, caller("tiny", "alpha", 10, 500)),
             gw(T0 + 5, caller("tiny", "alpha", 12, 560), caller("tiny", "beta", 1, 20)),  # beta: born since
             gw(T0 + 10, caller("tiny", "alpha", 2, 30), caller("tiny", "beta", 3, 50))])  # alpha: restart  # fmt: skip
    got = {(g["route"], g["caller"]): (g["requests"], g["output_tokens"]) for g in d["gateway"]}
    assert got == {("tiny", "alpha"): (2 + 2, 60 + 30), ("tiny", "beta"): (3, 50)}


def test_rows_before_the_window_are_only_predecessors() -> None:
    d = doc([gw(T0 - 700, caller("tiny", "alpha", 5, 100)), gw(T0 - 610, caller("tiny", "alpha", 7, 140)),
             gw(T0 + 10, caller("tiny", "alpha", 8, 150))])  # fmt: skip
    assert [(g["requests"], g["output_tokens"]) for g in d["gateway"]] == [(1, 10)]


def test_no_counters_is_a_reason_never_zero() -> None:
    d = doc([gw(T0, usage=False), gw(T0 + 5, usage=False)])
    assert d["gateway"] == []
    assert d["gateway_unknown"] == [
        {"date": DAY, "gateway": "gw", "reason": "no /metrics: add the prometheus callback"}
    ]


# -- beside the engines -------------------------------------------------------------------------------------
def test_bypass_is_flagged_with_the_numbers() -> None:
    d = doc([eng(T0, 0), gw(T0, caller("tiny", "alpha", 0, 0)),
             eng(T0 + 5, 120_000), gw(T0 + 5, caller("tiny", "alpha", 40, 80_000))])  # fmt: skip
    [m] = d["mismatches"]
    assert (m["engine"], m["engine_output_tokens"], m["gateway_output_tokens"], m["bypassed_output_tokens"]) == (
        "llama", 120_000, 80_000, 40_000)  # fmt: skip
    assert m["reason"] == "llama: engine 120k output tokens, gateway 80k: 40k bypassed the gateway"
    assert "MISMATCH llama: engine 120k output tokens, gateway 80k: 40k bypassed the gateway" in text(d)


def test_agreement_within_tolerance_and_the_other_direction() -> None:
    engines = [
        {
            "date": DAY,
            "engine": "llama",
            "models": ["tiny"],
            "output_tokens": 1000,
            "prompt_tokens": 10,
            "requests": None,
        }
    ]
    row = {"date": DAY, "gateway": "gw", "route": "tiny", "models": [], "requests": 3, "prompt_tokens": 9}
    [ok] = compare([{**row, "output_tokens": 990}], engines)
    assert not ok["mismatch"] and ok["bypassed_output_tokens"] == 10 and "agree" in ok["reason"]
    [more] = compare([{**row, "output_tokens": 2000}], engines)
    assert more["mismatch"] and more["bypassed_output_tokens"] is None and "engine only 1.0k" in more["reason"]
    [lost] = compare([{**row, "route": "other", "output_tokens": 5}], engines)
    assert lost["engine"] is None and "no engine" in lost["reason"]


# -- callers now --------------------------------------------------------------------------------------------
def test_rates_subtract_the_minute_before() -> None:
    limit = [{"caller": "alpha", "key": "k", "type": "requests", "used": 590, "limit": 600}]
    rows = [gw(T0 + t, caller("tiny", "alpha", 100 + n, 0, seconds=50 + 2 * n),
               caller("tiny", "beta", 10, 0, seconds=5), limits=limit)
            for t, n in ((0, 0), (30, 15), (60, 30))]  # fmt: skip
    now = doc([*rows, eng(T0 + 60, 0, waiting=4)], end=T0 + 61)["callers_now"]
    alpha, beta = now["callers"]
    assert (alpha["caller"], alpha["rpm"], alpha["concurrency"], alpha["share"]) == ("alpha", 30.0, 1.0, 1.0)
    assert (beta["rpm"], beta["concurrency"]) == (0.0, 0.0)
    assert now["saturating"] == "alpha" and now["engines_waiting"] == 4
    assert (
        "queue 4: it is saturating the pool" in now["reason"]
        and "alpha at 590 of its 600 requests/min" in now["reason"]
    )


def test_stale_or_single_rows_say_so() -> None:
    assert "no gateway row" in doc([gw(T0, caller("tiny", "a", 1, 1))], end=T0 + 900)["callers_now"]["reason"]
    assert "rates need two" in doc([gw(T0, caller("tiny", "a", 1, 1))], end=T0 + 1)["callers_now"]["reason"]


def test_requests_in_flight_at_the_edges_are_not_a_mismatch() -> None:
    """The gateway counts a request when it finishes, the engine its tokens as they come: with 3 requests
    running at the last poll (~1k tokens each as the finished ones), 2.5k tokens ahead on the engine is no
    bypass (the demo's consistent pool had shown 6 'gateway mismatch' lines after two minutes)."""
    engines = [
        {"date": DAY, "engine": "llama", "models": ["tiny"], "output_tokens": 12_500, "prompt_tokens": 10,
         "requests": None, "running_at_start": 0, "running_at_end": 3}
    ]  # fmt: skip
    row = {"date": DAY, "gateway": "gw", "route": "tiny", "models": [], "requests": 10, "prompt_tokens": 9}
    [edge] = compare([{**row, "output_tokens": 10_000}], engines)
    assert not edge["mismatch"] and "in flight" in edge["reason"], edge
    [bypass] = compare([{**row, "output_tokens": 8_000}], engines)  # 4.5k ahead: more than 3 requests explain
    assert bypass["mismatch"] and bypass["bypassed_output_tokens"] == 4_500
    [early] = compare([{**row, "output_tokens": 14_000}], [{**engines[0], "running_at_start": 2}])
    assert not early["mismatch"], early  # 1.5k more at the gateway: 2 requests were running when the day began
