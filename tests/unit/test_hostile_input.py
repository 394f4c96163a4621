"""Hostile metric input from an outside audit (issue 35, items 3-6), each failing input kept as it was
found: negative, non-finite and overflowing values, runaway host JSON, cut pages, rows that named a path
instead of the problem. Unknown is None with a reason, never a made-up number, never an internal error."""

from __future__ import annotations

import math
import re
import time
from dataclasses import replace
from types import SimpleNamespace
from urllib.parse import urlsplit

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from poolconsole.collect import http
from poolconsole.collect.engines import specs
from poolconsole.collect.engines.mapping import parse_metrics
from poolconsole.collect.engines.page_memo import PageMemo
from poolconsole.collect.engines.poll import EnginePoller
from poolconsole.collect.hosts import nvidia_smi
from poolconsole.collect.hosts.systems import MAX_OUTPUT, MIB, parse_amd_smi, parse_macmon, parse_rocm_smi
from poolconsole.collect.http import PollClient, PollError, Response
from poolconsole.collect.prom import ParseError
from poolconsole.config.models import Engine, EngineKind
from poolconsole.model.alerts import Alerts
from poolconsole.model.pool_state import PoolState
from poolconsole.model.rates import counter_delta, latency, quantile
from poolconsole.model.snapshots import EngineMetrics, EngineSnapshot, EngineState, Histogram
from poolconsole.model.summary import brief, short, summarise
from poolconsole.model.view import engine_view
from poolconsole.sim.vllm_dp import dp_payload
from tests.conftest import FIXTURES, REAL
from tests.helpers import uipool

VLLM = REAL / "vllm-0.32.0-cpu"
PAGE = (VLLM / "metrics.load.txt").read_text()


def with_values(page: str, series: str, value: str) -> str:
    """The page with every sample of `series` (its lines up to the labels) given `value`."""
    lines = [
        line.rsplit(" ", 1)[0] + " " + value if line.startswith(series + "{") else line for line in page.split("\n")
    ]
    return "\n".join(lines)


def read(page: str) -> tuple[EngineMetrics, dict[str, str]]:
    """The careful read, checked against the fast path of an engine that has seen the clean page."""
    metrics, missing, _ = parse_metrics(page, specs.VLLM)
    memo = PageMemo()
    parse_metrics(PAGE if 'engine="1"' not in page else dp_payload(PAGE, 2), specs.VLLM, memo)
    fast, fast_missing, _ = parse_metrics(page, specs.VLLM, memo)
    assert (fast, fast_missing) == (metrics, missing)
    return metrics, missing


def snapshot(metrics: EngineMetrics, missing: dict[str, str], at: float) -> EngineSnapshot:
    from types import MappingProxyType

    return EngineSnapshot(
        "e",
        EngineKind.VLLM,
        "http://e",
        None,
        at,
        at,
        EngineState.OK,
        metrics=metrics,
        missing=MappingProxyType(missing),
    )


# -- item 3: negative values never reach the view ------------------------------------------------------


def test_a_counter_gone_to_minus_5_is_unknown_not_a_negative_rate() -> None:
    """The audit: a counter going to -5 became a rate of -4.99 tok/s."""
    before = read(PAGE)
    after = read(with_values(PAGE, "vllm:generation_tokens_total", "-5.0"))
    assert after[0].get("generation_tokens_total") is None
    assert "-5" in after[1]["generation_tokens_total"] and "never negative" in after[1]["generation_tokens_total"]
    view = engine_view([snapshot(*before, 0.0), snapshot(*after, 1.0)])
    assert view.generation_tokens_per_s is None and view.generation_tokens_total is None
    assert "never negative" in view.unknown["generation_tokens_total"]
    # whatever else feeds the rates (a recording made before this fix): a drop is a reset, never negative
    assert counter_delta(334.0, -5.0, False) == 0.0
    assert counter_delta(-5.0, 10.0, False) == 10.0


@pytest.mark.parametrize(
    ("series", "name"),
    [
        ("vllm:num_requests_running", "requests_running"),
        ("vllm:num_requests_waiting", "requests_waiting"),
        ("vllm:kv_cache_usage_perc", "kv_cache_usage"),
    ],
)
def test_a_negative_gauge_is_unknown_with_its_reason(series: str, name: str) -> None:
    """The audit: requests running -1 and KV usage -1 reached the view."""
    metrics, missing = read(with_values(PAGE, series, "-1"))
    assert metrics.get(name) is None
    assert missing[name] == "the engine reported -1: this metric is never negative"
    assert getattr(metrics.ranks[0], name) is None
    assert engine_view([snapshot(metrics, missing, 0.0)]).unknown[name] == missing[name]


def test_negative_histogram_bounds_make_the_latency_unknown() -> None:
    """The audit: negative bucket bounds gave a TTFT p50 of -4.6e18."""
    bucket = 'vllm:time_to_first_token_seconds_bucket{engine="0",le='
    page = PAGE.replace(bucket + '"0.001"', bucket + '"-9.2e18"')
    assert page != PAGE
    metrics, missing = read(page)
    assert "ttft" not in metrics.histograms
    assert missing["ttft"] == 'a bucket bound le="-9.2e+18" on the page: not a latency histogram'
    # and the quantile itself, whatever feeds it
    hostile = Histogram(((-9.2e18, 10.0), (0.5, 20.0), (math.inf, 20.0)), 5.0, 20.0)
    assert quantile(0.5, hostile) is None and quantile(0.95, hostile) is None
    stats = latency(hostile, "window")
    assert stats is not None and stats.p50 is None
    assert quantile(0.5, Histogram(((math.nan, 10.0), (math.inf, 20.0)), 5.0, 20.0)) is None


def test_a_negative_bucket_count_or_latency_sum_is_unknown() -> None:
    metrics, missing = read(with_values(PAGE, "vllm:time_to_first_token_seconds_sum", "-3.5"))
    assert "ttft" not in metrics.histograms and "-3.5" in missing["ttft"]
    assert latency(Histogram(((1.0, 2.0), (math.inf, 2.0)), -3.5, 2.0), "window").mean is None  # type: ignore[union-attr]


# -- item 4: overflow and non-finite numbers ---------------------------------------------------------------


def test_two_data_parallel_ranks_at_1e308_are_unknown_not_an_internal_error() -> None:
    """The audit: two DP ranks at 1e308 overflowed math.fsum and the row read "internal error"."""
    page = with_values(dp_payload(PAGE, 2), "vllm:num_requests_running", "1e308")
    metrics, missing = read(page)
    assert metrics.get("requests_running") is None
    assert missing["requests_running"] == "its 2 series add up past the largest number (values out of range)"
    assert [r.requests_running for r in metrics.ranks] == [1e308, 1e308]  # each rank alone is a number
    assert metrics.get("requests_waiting") == 16.0  # the rest of the page is read


@pytest.mark.parametrize("value", ["NaN", "+Inf", "-Inf"])
@pytest.mark.parametrize(
    ("series", "name"),
    [
        ("vllm:num_requests_running", "requests_running"),
        ("vllm:kv_cache_usage_perc", "kv_cache_usage"),
        ("vllm:generation_tokens_total", "generation_tokens_total"),
        ("vllm:time_to_first_token_seconds_count", "ttft"),
    ],
)
def test_non_finite_gauges_counters_and_histograms_are_unknown(series: str, name: str, value: str) -> None:
    metrics, missing = read(with_values(PAGE, series, value))
    assert metrics.get(name) is None and name not in metrics.histograms
    assert missing[name] == f"the engine reported {value}, not a finite value"


def test_one_rank_at_nan_leaves_the_total_unknown_not_a_smaller_number() -> None:
    rank_1 = 'vllm:num_requests_running{engine="1",model_name="tiny"} '
    page = dp_payload(PAGE, 2).replace(rank_1 + "8.0", rank_1 + "NaN")
    metrics, missing = read(page)
    assert metrics.get("requests_running") is None and "NaN" in missing["requests_running"]
    assert [r.requests_running for r in metrics.ranks] == [8.0, None]


def test_an_inf_le_bound_is_a_histogram_bound_not_a_bad_value() -> None:
    metrics, missing = read(PAGE)
    ttft = metrics.histograms["ttft"]
    assert math.isinf(ttft.buckets[-1][0]) and "ttft" not in missing
    assert quantile(0.5, ttft) is not None


# -- item 4: host tools' output: linear, bounded, never an internal error ---------------------------------

AMD_SMI = (FIXTURES / "amd-smi-metric-radeon890m.json").read_text()
MACMON = next(
    line
    for line in (REAL / "issue-samples" / "macmon-pipe-json-apple-silicon-beszel-issue1796.txt").read_text().split("\n")
    if line.startswith('{"all_power"')
)
HUGE = 3_000_000
"""Characters of hostile output: milliseconds when read in linear time; trying a decode at every `{` (each
failure costing up to the whole output) took 15.8 s on 245 KB, and would take most of an hour on this."""


@pytest.mark.parametrize(
    ("output", "why"),
    [
        ("{ " * (HUGE // 2), "no JSON in the output"),
        ("{\n" * (HUGE // 2), "no JSON in the output"),
        ("[0" * (HUGE // 2), "no JSON in the output"),
        ('{"\n' * (HUGE // 3), "no JSON in the output"),
        (("[" + "1," * 200) * (HUGE // 401), "JSON nested too deeply"),
        ("[" * HUGE, "JSON nested too deeply"),
    ],
    ids=["brace-space", "brace-newline", "bracket-digit", "brace-quote", "wide-and-deep", "deep"],
)
def test_megabytes_of_hostile_tool_output_fail_the_poll_with_a_reason(output: str, why: str) -> None:
    for parse, tool in ((parse_amd_smi, "amd-smi"), (parse_rocm_smi, "rocm-smi")):
        with pytest.raises(ParseError) as failed:
            parse(output)
        assert str(failed.value) == f"{tool}: {why}"


def test_the_document_is_still_found_after_noise_and_megabytes_of_warnings() -> None:
    warnings = "[WARNING] amd-smi could not read a sensor\n{ not json either\n" * (HUGE // 60)
    (gpu,) = parse_amd_smi(warnings + AMD_SMI)
    assert gpu.memory_total_bytes == (65536 + 12288) * MIB
    # rocm-smi's CSV before its JSON names the vendor "[AMD/ATI]": not a document
    (card,) = parse_rocm_smi((REAL / "issue-samples" / "rocm-smi-json-csv-rx7900xt-marimo-issue9237.txt").read_text())
    assert card.name == "Radeon RX 7900 XT"


def test_output_over_the_cap_fails_the_poll_with_the_reason() -> None:
    over = " " * (MAX_OUTPUT + 1) + AMD_SMI
    with pytest.raises(ParseError, match=r"^amd-smi: 4\.0 MiB of output, more than the 4 MiB read here$"):
        parse_amd_smi(over)
    with pytest.raises(ParseError, match=r"^macmon: 4\.0 MiB of output"):
        parse_macmon(over + MACMON)


def test_deep_macmon_json_fails_the_poll_with_a_reason() -> None:
    with pytest.raises(ParseError, match=r"^macmon: JSON nested too deeply$"):
        parse_macmon('{"a":' * 100_000)


def test_macmon_infinity_and_nan_are_unknown_not_an_overflow_or_a_value() -> None:
    """The audit: macmon's Infinity raised OverflowError, its NaN reached utilization_pct."""
    hostile = re.sub(r'"ram_usage":\d+', '"ram_usage":Infinity', MACMON)
    hostile = re.sub(r'"gpu_usage":\[(\d+),[^\]]*\]', r'"gpu_usage":[\1,NaN]', hostile)
    hostile = re.sub(r'"swap_total":\d+', '"swap_total":1' + "0" * 5000, hostile)  # past int() and float
    assert hostile.count("Infinity") == hostile.count("NaN") == 1
    memory, gpu = parse_macmon(hostile)
    assert memory.total_bytes == 17179869184  # what was a number still is
    assert memory.available_bytes is None and gpu.memory_used_bytes is None
    assert memory.swap_total_bytes is None
    assert gpu.utilization_pct is None
    _, gpu = parse_macmon(MACMON.replace('"gpu_usage":[198,0.004153179936110973]', '"gpu_usage":[198,1e307]'))
    assert gpu.utilization_pct is None  # 1e307 x 100 is past the largest float


def test_amd_smi_values_past_the_largest_float_are_unknown() -> None:
    hostile = AMD_SMI.replace('"total_vram": {"value": 65536', '"total_vram": {"value": 1e308', 1)
    hostile = hostile.replace('"edge": {"value": 28', '"edge": {"value": NaN', 1)
    assert hostile.count("1e308") == 1 and hostile.count("NaN") == 1
    (gpu,) = parse_amd_smi(hostile)
    assert gpu.memory_total_bytes is None and gpu.temperature_c is None
    assert gpu.memory_used_bytes is not None


@pytest.mark.parametrize("reading", ["nan", "inf", "-inf", "1e999", "NaN W"])
def test_nvidia_smi_readings_that_are_not_finite_are_unknown(reading: str) -> None:
    assert nvidia_smi.number(reading) is None
    assert nvidia_smi.mib(reading) is None
    assert nvidia_smi.mib("1e307") is None  # a finite reading whose bytes are past the largest float


# -- item 5: a cut page is a failed poll -------------------------------------------------------------------


class Pages(PollClient):
    """A poll client answering from memory (no network): path -> body, or the PollError a GET raises."""

    def __init__(self, routes: dict[str, bytes | PollError]) -> None:
        super().__init__()
        self.routes = routes

    async def get(self, url: str, headers: dict[str, str] | None, max_bytes: int) -> Response:
        answer = self.routes.get(urlsplit(url).path, b"")
        if isinstance(answer, PollError):
            raise answer
        now = time.monotonic()
        return Response(200 if answer else 404, {}, answer, now, now)


def vllm_pages(metrics: bytes | PollError) -> Pages:
    return Pages(
        {
            "/metrics": metrics,
            "/v1/models": (VLLM / "v1_models.json").read_bytes(),
            "/version": (VLLM / "version.json").read_bytes(),
        }
    )


async def test_a_page_cut_mid_line_is_a_failed_poll_even_when_its_last_line_parses() -> None:
    """The audit: a cut page whose last line parsed read ok on 26 % of polls, with phantom restarts and a
    phantom rate. Here its HTTP framing does not tell (the page was read to the connection's close)."""
    line = next(ln for ln in PAGE.split("\n") if ln.startswith("vllm:generation_tokens_total{"))
    cut = PAGE[: PAGE.index(line) + len(line) - 3]  # "... 334.0" cut to "... 33"
    assert parse_metrics(cut, specs.VLLM)[0].get("generation_tokens_total") == 33.0  # its last line parses
    client = vllm_pages(PAGE.encode())
    poller = EnginePoller(Engine(name="e", kind=EngineKind.VLLM, url="http://e"), client)
    first = await poller.poll()
    assert first.state is EngineState.OK, first.error
    client.routes["/metrics"] = cut.encode()
    second = await poller.poll()
    assert second.state is EngineState.DEGRADED and second.metrics is None
    assert second.error == "/metrics: page cut mid-line: its last line has no line break (a truncated response)"
    view = engine_view([first, second])
    assert view.counter_resets == 0 and view.generation_tokens_per_s is None  # no phantom restart, no rate


async def test_a_body_the_client_library_calls_cut_is_a_failed_poll() -> None:
    cut = PollError("truncated", "connection closed mid-response (received 9 of 100 bytes)")
    snap = await EnginePoller(Engine(name="e", kind=EngineKind.VLLM, url="http://e"), vllm_pages(cut)).poll()
    assert snap.state is EngineState.DEGRADED and snap.metrics is None
    assert snap.error == "/metrics: connection closed mid-response (received 9 of 100 bytes)"


async def test_a_body_shorter_than_its_content_length_is_cut() -> None:
    body = PAGE.encode()[:500]

    async def read() -> bytes:
        return body

    response = SimpleNamespace(content_length=len(PAGE), headers={}, status=200, read=read, close=lambda: None)
    with pytest.raises(PollError) as cut:
        await http._read(response, 1 << 20)  # type: ignore[arg-type]
    assert cut.value.kind == "truncated"
    assert str(cut.value) == f"connection closed mid-response (received 500 of {len(PAGE)} bytes)"


# -- item 6: a row names the problem, not the path ----------------------------------------------------------


async def test_a_row_names_the_problem_not_the_path() -> None:
    """The audit: the summary said "h-garbage (/metrics)" where the reason was "body contains NUL bytes"."""
    polled = await EnginePoller(
        Engine(name="h-garbage", kind=EngineKind.VLLM, url="http://e"), vllm_pages(b"vllm:x 1\x00\x01\x02\n")
    ).poll()
    assert polled.error == "/metrics: body contains NUL bytes: not Prometheus text"
    config = uipool.config()
    state, alerts = PoolState(config, uipool.clock), Alerts(config.alerts)
    for host in uipool.host_snapshots(config):
        state.apply_host(host)
    snaps = uipool.engine_snapshots(config)
    for snap in snaps:
        state.apply_engine(snap)
    name = snaps[0].name
    state.apply_engine(
        replace(snaps[0], fetched_at=uipool.T0 + 3, state=polled.state, error=polled.error, metrics=None)
    )
    summary = summarise(state, alerts)
    assert summary.why()[name] == "body contains NUL bytes"
    assert f"{name} degraded (body contains NUL bytes)" in summary.verdict
    assert f"{name} (body contains NUL bytes)" in summary.lines[0]
    # the path follows when it still fits; a tool said twice is said once
    assert brief("/metrics: page cut mid-line: its last line has no line break") == "page cut mid-line on /metrics"
    assert brief("amd-smi: amd-smi: no JSON in the output") == "amd-smi: no JSON in the output"
    assert short("/v1/models: not valid JSON (Expecting value: line 1 column 1)") == "not valid JSON on /v1/models"


# -- all of them at once: no hostile value reaches the model -------------------------------------------------

HOSTILE = ["-5", "-1", "-0", "1e308", "-1e308", "NaN", "+Inf", "-Inf", "5e-324", "1e-320"]
DP_PAGE = dp_payload(PAGE, 2)
SAMPLE_LINES = [i for i, line in enumerate(DP_PAGE.split("\n")) if line.startswith("vllm:")]


def assert_sane(metrics: EngineMetrics) -> None:
    for name, value in metrics.values.items():
        assert math.isfinite(value) and (value >= 0 or name == "process_start_time"), (name, value)
    for name, hist in metrics.histograms.items():
        assert all(bound >= 0 for bound, _ in hist.buckets), name
        assert all(math.isfinite(c) and c >= 0 for _, c in hist.buckets), name
        assert math.isfinite(hist.sum) and hist.sum >= 0 and math.isfinite(hist.count) and hist.count >= 0, name
        assert all(q is None or q >= 0 for q in (quantile(0.5, hist), quantile(0.95, hist)))
    for rank in metrics.ranks:
        for known in (rank.requests_running, rank.requests_waiting, rank.kv_cache_usage):
            assert known is None or (math.isfinite(known) and known >= 0)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(SAMPLE_LINES), st.sampled_from(HOSTILE), st.booleans()),
        min_size=1,
        max_size=12,
    )
)
def test_no_hostile_value_or_bound_reaches_the_model(changes: list[tuple[int, str, bool]]) -> None:
    lines = DP_PAGE.split("\n")
    for at, value, in_le in changes:
        line = lines[at]
        if in_le and 'le="' in line:
            lines[at] = re.sub(r'le="[^"]*"', f'le="{value}"', line)
        else:
            lines[at] = line.rsplit(" ", 1)[0] + " " + value
    page = "\n".join(lines)
    memo = PageMemo()
    parse_metrics(DP_PAGE, specs.VLLM, memo)
    for metrics, _, _ in (parse_metrics(page, specs.VLLM), parse_metrics(page, specs.VLLM, memo)):
        assert_sane(metrics)


async def test_the_last_resort_handler_keeps_a_failure_as_data(monkeypatch: pytest.MonkeyPatch) -> None:
    """What had contained all of the above, untested: an exception no parser foresaw is a degraded poll
    with its words, never an exception out of the poller."""
    from poolconsole.collect.engines.kinds import metrics_engine

    def unforeseen(*_: object, **__: object) -> None:
        raise OverflowError("int too large to convert to float")

    monkeypatch.setattr(metrics_engine, "parse_metrics", unforeseen)
    snap = await EnginePoller(Engine(name="e", kind=EngineKind.VLLM, url="http://e"), vllm_pages(PAGE.encode())).poll()
    assert snap.state is EngineState.DEGRADED and snap.metrics is None
    assert snap.error == "internal error while reading this engine: OverflowError: int too large to convert to float"
    assert snap.missing["requests_running"] == "engine degraded"
