"""The charts' history from range queries, on a captured /api/v1/query_range answer of Debian's Prometheus 2.42
(tests/fixtures/prometheus-range/record.py: the replayed real vLLM, SGLang and llama.cpp pages with counters
growing at 250 tok/s, scraped every second; llama.cpp restarted, then SGLang killed): one point per scrape,
tok/s the counter's growth per step, KV and the queues the pages' values, the reset a restart mark and never
a negative rate, the stale target a gap; broken answers refused; the store's points win over their span."""

from __future__ import annotations

import itertools
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from poolconsole.collect.prometheus.queries import SCRAPE_OF
from poolconsole.collect.prometheus.range import RangeSeries, parse_matrix, range_groups, scrapes
from poolconsole.config.models import Engine, EngineKind, PoolConfig, PrometheusSource
from poolconsole.model.pool_state import SHORT_POINTS
from poolconsole.runtime.prometheus_history import Point, merged, points
from tests.conftest import FIXTURES, REAL

CAPTURE = FIXTURES / "prometheus-range"
META: dict[str, Any] = json.loads((CAPTURE / "query_range.meta.json").read_text())
RATE = float(META["rate_tok_per_s"])
KINDS = {"vllm": EngineKind.VLLM, "sglang": EngineKind.SGLANG, "llamacpp": EngineKind.LLAMACPP}
ENGINES = [Engine(name=n, kind=KINDS[n], url=u, read="prometheus") for n, u in META["engines"].items()]
CONFIG = PoolConfig(prometheus=PrometheusSource(url="http://127.0.0.1:9"), engines=ENGINES)


def page_value(path: Path, head: str) -> float:
    """The value of the sample line starting with `head` on a /metrics page."""
    [line] = [line for line in path.read_text().splitlines() if line.startswith(head)]
    return float(line.rsplit(" ", 1)[1])


def engine(name: str) -> Engine:
    return next(e for e in ENGINES if e.name == name)


def series_of(name: str, series: tuple[RangeSeries, ...] | None = None) -> list[RangeSeries]:
    chosen = parse_matrix((CAPTURE / "query_range.json").read_bytes()) if series is None else series
    return [s for s in chosen if s.labels.get("instance") == engine(name).instance]


def charted(name: str, series: tuple[RangeSeries, ...] | None = None) -> list[Point]:
    return points(CONFIG, name, scrapes(engine(name), series_of(name, series)))


def test_the_capture_is_one_query_of_the_three_engines() -> None:
    assert len(range_groups(ENGINES)) == 1
    series = parse_matrix((CAPTURE / "query_range.json").read_bytes())
    names = {s.labels.get("__name__") for s in series}
    assert {"up", "vllm:generation_tokens_total", "vllm:kv_cache_usage_perc", "sglang:num_queue_reqs"} <= names
    assert None in names  # the scrape times, tagged
    for s in series:
        steps = [at for at, _ in s.points]
        assert steps == sorted(steps) and len(steps) >= 10


def test_tok_s_is_the_counter_growth_per_step_and_kv_the_pages_value() -> None:
    kv = page_value(REAL / "vllm-0.32.0-cpu" / "metrics.load.txt", "vllm:kv_cache_usage_perc{")
    got = charted("vllm")
    assert len(got) >= 10
    times = [p[0] for p in got]
    assert times == sorted(times) and len(set(times)) == len(times)  # one point per scrape
    scraped_at = {v for s in series_of("vllm") if s.labels.get(SCRAPE_OF) == "up" for _, v in s.points}
    assert set(times) == scraped_at  # stamped with the scrape's time (timestamp(up)), not the step's
    assert all(1.5 > b - a > 0.5 for a, b in itertools.pairwise(times))  # 1 s scrapes
    for at, tps, kv_usage, running, waiting, vram, resets in got[1:]:
        assert tps is not None and abs(tps - RATE) <= 0.01 * RATE, (at, tps)
        assert (kv_usage, running, waiting, vram, resets) == (kv, 8.0, 8.0, None, 0)
    # the first scrape has no scrape before it: no counter rate (vLLM has no throughput gauge)
    assert got[0][1] is None and got[0][2] == kv


def test_a_counter_reset_is_a_restart_mark_never_a_negative_rate() -> None:
    got = charted("llamacpp")
    marked = [p for p in got if p[6]]
    assert len(marked) == 1, got
    [reset] = marked
    restarted_at = float(META["llamacpp_restarted_at"])
    assert reset[0] > restarted_at and all(p[0] < restarted_at for p in got if p[0] < reset[0])
    assert reset[1] is not None and 0 <= reset[1] <= RATE * 1.01  # the new value is the increase since it
    for p in got[1:]:
        assert p[1] is not None and p[1] >= 0
        if not p[6]:
            assert abs(p[1] - RATE) <= 0.01 * RATE, p
    assert all(p[2] is None for p in got)  # llama.cpp's KV estimate needs /slots: n/a, never 0


def test_a_stale_target_is_a_gap_not_zero() -> None:
    got = charted("sglang")
    live = [p for p in got if p[1] is not None]
    stale = got[len(live) :]
    assert live and stale, got
    assert all(p[1:6] == (None,) * 5 for p in stale)  # up == 0: unknown, drawn as a gap
    down = scrapes(engine("sglang"), series_of("sglang"))[len(live) :]
    assert all(d.state == "down" and "up == 0" in (d.error or "") for d in down), down
    assert all(p[4] == 3.0 for p in live)  # the queue gauge the replayed page serves
    assert all(abs((p[1] or 0) - RATE) <= 0.01 * RATE for p in live[1:])


def test_two_steps_reading_one_scrape_are_one_point() -> None:
    """A step shorter than the scrape interval reads each scrape twice: as a live poll between two scrapes,
    nothing new (no 0 tok/s, no doubled gap)."""
    doubled = tuple(
        RangeSeries(s.labels, tuple(sorted([*s.points, *((at + 0.5, v) for at, v in s.points)])))
        for s in parse_matrix((CAPTURE / "query_range.json").read_bytes())
    )
    for name in ("vllm", "sglang", "llamacpp"):
        assert charted(name, doubled) == charted(name), name


@pytest.mark.parametrize(
    "body",
    [
        b'{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1,"2"]',
        b'{"status":"success","data":{"resultType":"vector","result":[]}}',
        b'{"status":"error","errorType":"bad_data","error":"exceeded maximum resolution of 11,000 points"}',
        b"<html>not the query API</html>",
        b'{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[["x"]]}]}}',
    ],
)
def test_a_broken_answer_is_refused(body: bytes) -> None:
    with pytest.raises((ValueError, KeyError, TypeError, IndexError)):
        parse_matrix(body)


def point(at: float, tps: float | None = 1.0) -> Point:
    return (at, tps, 0.5, 1.0, 0.0, None, 0)


def test_the_stores_points_win_over_their_span_prometheus_fills_before_and_after() -> None:
    stored = [point(t, 7.0) for t in (10.0, 11.0, 14.0)]  # a gap inside the store's span stays a gap
    ranged = [point(float(t)) for t in range(5, 20)]
    got = merged(stored, ranged, 1.0)
    assert [p[0] for p in got] == [5, 6, 7, 8, 9, 10, 11, 14, 15, 16, 17, 18, 19]
    assert [p[1] for p in got if 10 <= p[0] <= 14] == [7.0, 7.0, 7.0]
    assert merged([], ranged, 1.0) == ranged
    assert merged(stored, [], 1.0) == stored


def test_a_range_longer_than_the_short_rings_is_charted_whole() -> None:
    """The range's own PoolState keeps full rings (issue 39): two hours of scrapes are all charted, not the
    newest SHORT_POINTS that an engine's rings keep in the console."""
    [last, *_] = scrapes(engine("vllm"), series_of("vllm"))[::-1]
    count = SHORT_POINTS + 120
    many = [replace(last, fetched_at=last.fetched_at + i, monotonic=last.monotonic + i) for i in range(count)]
    got = points(CONFIG, "vllm", many)
    assert len(got) == count and got[0][0] == last.fetched_at
