"""LiteLLM's Prometheus page read by the fast path of collect/prom.py (issue 36): parse_usage hands it the names
it reads, and what it returns is what prometheus_client's own parser gives on the real 1.108.7 captures, the
issue sample and the demo gateway's page. Leaving any one name out of the set changes the answer, so a name
parse_usage reads but the set misses fails here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from poolconsole.collect import prom
from poolconsole.collect.engines import litellm_usage
from poolconsole.collect.engines.litellm_usage import METRICS_PATH, WANTED, parse_usage
from poolconsole.sim.litellm_metrics import TEAM, GatewayUsage, hashed

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
CAPTURES = (
    FIXTURES / "litellm-prometheus" / "metrics-prometheus-two-keys.txt",
    FIXTURES / "litellm-prometheus" / "metrics-prometheus-master-key.txt",
)
PRETTY = FIXTURES / "real" / "issue-samples" / "litellm-metrics-2024-09-pr5789.txt"
"""Pretty-printed by its author, not exposition text: refused both ways."""
FAILED = "# TYPE litellm_proxy_failed_requests_metric_total counter\n"


def _demo_page() -> str:
    """The demo gateway's page as the console asks for it (`name[]` filtered), with a few callers counted."""
    usage = GatewayUsage(clock=lambda: 1_765_000_000.0)
    usage.count("chat", "qwen-7b", hashed(TEAM[0]), TEAM[0], 120, 40, 1.25)
    usage.count("chat", "qwen-7b", hashed(TEAM[1]), TEAM[1], 80, 30, 0.5)
    usage.count("code", "coder-1b", "litellm_proxy_master_key", "None", 10, 5, 0.125)
    usage.in_flight = 3
    page = usage.render(METRICS_PATH.split("?", 1)[1])
    # No capture holds a failed request: one as PR 5789 shows it (labels of 2024), in a block of its own.
    failed = (
        'litellm_proxy_failed_requests_metric_total{api_key_alias="None",end_user="None",hashed_api_key="'
        + hashed("x")
        + '",requested_model="chat",team="None",team_alias="None",user="default_user_id"} 2.0\n'
    )
    return page + FAILED + failed


def _pages() -> list[str]:
    return [path.read_text() for path in CAPTURES] + [_demo_page()]


def _slow(page: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    with monkeypatch.context() as patch:
        patch.setattr(litellm_usage, "FAST_NAMES", None)
        return parse_usage(page)


def test_the_pages_hold_every_name_parse_usage_reads() -> None:
    # Otherwise the test below could not notice a name missing from the set.
    seen = {name for page in _pages() for name in WANTED if f"\n{name}{{" in page or f"\n{name} " in page}
    assert seen == set(WANTED)


@pytest.mark.parametrize("index", range(len(CAPTURES) + 1))
def test_fast_path_returns_what_prometheus_client_does(index: int, monkeypatch: pytest.MonkeyPatch) -> None:
    page = _pages()[index]
    fast = parse_usage(page)
    assert fast == _slow(page, monkeypatch)
    assert fast["callers"] or fast["in_flight"] is not None  # something was read


def test_the_page_goes_through_the_fast_path(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(text: str) -> list[prom.Sample]:
        raise AssertionError("prometheus_client's parser was asked")

    monkeypatch.setattr(prom, "_strict", refuse)
    for page in _pages():
        parse_usage(page)


@pytest.mark.parametrize("missing", WANTED)
def test_a_name_missing_from_the_set_changes_the_answer(missing: str, monkeypatch: pytest.MonkeyPatch) -> None:
    pages = _pages()
    expected = [_slow(page, monkeypatch) for page in pages]
    monkeypatch.setattr(litellm_usage, "FAST_NAMES", frozenset(WANTED) - {missing})
    assert [parse_usage(page) for page in pages] != expected


@pytest.mark.parametrize(
    "broken",
    [
        PRETTY.read_text(),
        "litellm_in_flight_requests not-a-number\nlitellm_requests_metric_total{x=\n",
        'litellm_in_flight_requests 2\nlitellm_requests_metric_total{requested_model="a"} 1 2 3\n',
    ],
)
def test_a_broken_page_is_judged_as_before(broken: str, monkeypatch: pytest.MonkeyPatch) -> None:
    try:
        before: object = _slow(broken, monkeypatch)
    except prom.ParseError as e:
        before = type(e)
    try:
        after: object = parse_usage(broken)
    except prom.ParseError as e:
        after = type(e)
    assert after == before
