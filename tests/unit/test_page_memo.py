"""The per-engine fast path (PageMemo): a page laid out like the last one must read exactly as the
careful parser reads it, and anything the fast path skips must still be reported by a review."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from poolconsole.collect.engines import specs
from poolconsole.collect.engines.mapping import MetricSpec, parse_metrics
from poolconsole.collect.engines.page_memo import REVIEW_EVERY, PageMemo
from poolconsole.sim.vllm_dp import dp_payload
from tests.conftest import REAL

VLLM = REAL / "vllm-0.32.0-cpu"
CAPTURES = [
    (VLLM / "metrics.load.txt", specs.VLLM),
    (VLLM / "metrics.after.txt", specs.VLLM),
    (VLLM / "metrics.kvcachemetrics.after.txt", specs.VLLM),
    (REAL / "llamacpp-b1-0c1e570" / "metrics-after-requests.txt", specs.LLAMACPP),
    (REAL / "issue-samples" / "sglang-metrics-v0.5.1-issue13485.txt", specs.SGLANG),
    (REAL / "issue-samples" / "sglang-metrics-grpc-underscore-smg-pr813.txt", specs.SGLANG),
]


def scaled(text: str, factor: float) -> str:
    """The same page a poll later: every sample value multiplied (layout unchanged)."""
    return re.sub(r"^([^#\n][^\n]* )(\d+(?:\.\d+)?)$", lambda m: f"{m[1]}{float(m[2]) * factor!r}", text, flags=re.M)


def learned() -> tuple[PageMemo, str]:
    """A memo that has read the vLLM capture once (the careful read), and that page."""
    memo = PageMemo()
    page = (VLLM / "metrics.load.txt").read_text()
    parse_metrics(page, specs.VLLM, memo)
    return memo, page


def with_value(page: str, series: str, value: str) -> str:
    """The page with the first sample of `series` given another value."""
    line = next(ln for ln in page.splitlines() if ln.startswith(series))
    return page.replace(line, line.rsplit(" ", 1)[0] + " " + value)


@pytest.mark.parametrize(("path", "spec"), CAPTURES, ids=lambda v: v.name if isinstance(v, Path) else v.kind)
def test_fast_path_reads_what_the_careful_path_reads(path: Path, spec: MetricSpec) -> None:
    memo = PageMemo()
    text = path.read_text()
    for factor in (1.0, 1.0, 3.0, 7.5):
        page = scaled(text, factor)
        careful = parse_metrics(page, spec)
        fast = parse_metrics(page, spec, memo)
        assert fast[0] == careful[0] and fast[1] == careful[1]
    assert memo.age == 3  # the last three polls took the fast path


def test_data_parallel_page_and_a_new_rank() -> None:
    memo = PageMemo()
    base = (VLLM / "metrics.load.txt").read_text()
    parse_metrics(dp_payload(base, 4), specs.VLLM, memo)
    four = parse_metrics(dp_payload(base, 4), specs.VLLM, memo)[0]
    assert memo.age == 1 and len(four.ranks) == 4
    eight = parse_metrics(dp_payload(base, 8), specs.VLLM, memo)[0]  # same layout, more series: new plan
    assert eight == parse_metrics(dp_payload(base, 8), specs.VLLM)[0] and len(eight.ranks) == 8


def test_garbage_outside_the_read_families_is_reported_by_the_next_review() -> None:
    memo, page = learned()
    # a stray log line inside a family the collector does not read (python_gc_*): same layout
    broken = page.replace(
        "python_gc_objects_collected_total{", "%%% stray output %%%\npython_gc_objects_collected_total{", 1
    )
    assert broken != page
    reports = [parse_metrics(broken, specs.VLLM, memo)[2].bad_lines for _ in range(REVIEW_EVERY + 1)]
    assert parse_metrics(broken, specs.VLLM)[2].bad_lines == 1  # what the careful parser says
    assert reports.index(1) == REVIEW_EVERY  # fast reads until the review, REVIEW_EVERY polls later
    assert reports[-1] == 1  # and from then on, while the page stays broken, every poll


def test_a_broken_line_in_a_read_family_is_never_read_fast() -> None:
    memo, page = learned()
    broken = with_value(page, "vllm:num_requests_running", "not-a-number")
    metrics, _, exposition = parse_metrics(broken, specs.VLLM, memo)
    assert exposition.bad_lines == 1 and metrics.get("requests_running") is None


def test_nan_values_take_the_careful_path() -> None:
    memo, page = learned()
    with_nan = with_value(page, "vllm:kv_cache_usage_perc", "NaN")
    assert parse_metrics(with_nan, specs.VLLM, memo)[0] == parse_metrics(with_nan, specs.VLLM)[0]
    assert parse_metrics(with_nan, specs.VLLM, memo)[0].get("kv_cache_usage") is None


def test_a_read_family_without_its_type_line_keeps_the_page_on_the_careful_path() -> None:
    page = (VLLM / "metrics.load.txt").read_text()
    # kv_cache_usage_perc's HELP/TYPE lines dropped: its samples now sit inside engine_sleep_state's block,
    # a family the collector does not read
    untyped = "\n".join(
        ln
        for ln in page.splitlines()
        if not ln.startswith(("# HELP vllm:kv_cache_usage_perc ", "# TYPE vllm:kv_cache_usage_perc "))
    )
    assert untyped != page
    memo = PageMemo()
    reads = [parse_metrics(untyped, specs.VLLM, memo)[0] for _ in range(3)]
    assert all(m == parse_metrics(untyped, specs.VLLM)[0] for m in reads)
    assert all(m.get("kv_cache_usage") is not None for m in reads)
    assert memo.age == 0  # never read fast
