"""Prometheus text parsing on real captures: _total/_created quirks, prefixes, partial windows, garbage."""

from __future__ import annotations

import pytest

from poolconsole.collect.prom import ParseError, parse_exposition
from tests.conftest import REAL

VLLM = REAL / "vllm-0.32.0-cpu"
LLAMA = REAL / "llamacpp-b1-0c1e570"
SAMPLES = REAL / "issue-samples"


def test_vllm_counters_keep_total_and_created_is_dropped() -> None:
    exp = parse_exposition((VLLM / "metrics.load.txt").read_bytes())
    names = {s.name for s in exp.samples}
    assert "vllm:generation_tokens_total" in names
    assert not any(n.endswith("_created") for n in names)
    assert exp.bad_lines == 0


def test_llamacpp_counter_without_total_gets_total_appended() -> None:
    exp = parse_exposition((LLAMA / "metrics-after-requests.txt").read_bytes())
    by = {s.name: s.value for s in exp.samples}
    assert by["llamacpp:n_tokens_max_total"] == 57
    assert by["llamacpp:tokens_predicted_total"] == 81


def test_underscore_reexport_names_map_to_colon_form() -> None:
    exp = parse_exposition(b'sglang_num_running_reqs{dp_rank="0"} 3\nvllm_num_requests_waiting 2\n')
    assert {s.name for s in exp.samples} == {"sglang:num_running_reqs", "vllm:num_requests_waiting"}


@pytest.mark.parametrize(
    "name",
    [
        "vllm-metrics-v1-2025-03-production-stack-issue318.txt",
        "vllm-metrics-docs-design-example.txt",
        "sglang-metrics-v0.5.1-issue13485.txt",
        "sglang-metrics-2024-11-pr1853-oldnames.txt",
        "sglang-metrics-grpc-underscore-smg-pr813.txt",
        "llamacpp-metrics-2025-06-pr13196-comment.txt",
        "ikllamacpp-metrics-2025-08-pr695.txt",
        "dcgm-exporter-metrics-samples.txt",
    ],
)
def test_partial_windows_keep_good_lines_and_count_bad_ones(name: str) -> None:
    text = (SAMPLES / name).read_text()
    exp = parse_exposition(text)
    assert exp.samples, "a window with metric lines must yield samples"
    cut = sum(1 for ln in text.splitlines() if "[...]" in ln and not ln.startswith("#"))
    assert exp.bad_lines >= (1 if cut else 0)


def test_html_error_page_is_a_parse_error() -> None:
    with pytest.raises(ParseError, match="HTML"):
        parse_exposition(b"<!DOCTYPE html><html><body>502 Bad Gateway</body></html>")


def test_json_body_is_a_parse_error() -> None:
    with pytest.raises(ParseError, match="JSON"):
        parse_exposition(b'{"error": "metrics disabled"}')


def test_json_escaped_metrics_from_llamacpp_b7010_are_unwrapped() -> None:
    inner = (LLAMA / "metrics-before.txt").read_text()
    import json

    exp = parse_exposition(json.dumps(inner))
    assert any(s.name == "llamacpp:requests_processing" for s in exp.samples)


def test_garbage_is_a_parse_error() -> None:
    with pytest.raises(ParseError):
        parse_exposition(b"hello there\nthis is not\nprometheus text at all\n")


def test_truncated_last_line_keeps_the_rest() -> None:
    text = (VLLM / "metrics.load.txt").read_text()
    cut = text[: text.index("vllm:kv_cache_usage_perc") + 40]
    exp = parse_exposition(cut)
    assert any(s.name == "vllm:num_requests_running" for s in exp.samples)


def test_empty_body_has_no_samples() -> None:
    assert parse_exposition(b"").samples == []


def test_pretty_printed_paste_is_rejected_not_misread() -> None:
    # The LiteLLM PR author pretty-printed labels over several lines: not exposition text.
    with pytest.raises(ParseError):
        parse_exposition((SAMPLES / "litellm-metrics-2024-09-pr5789.txt").read_text())


@pytest.mark.parametrize(
    "capture", sorted(p.name for p in VLLM.glob("metrics*.txt")) + sorted(p.name for p in LLAMA.glob("metrics*.txt"))
)
def test_fast_path_reads_exactly_what_prometheus_client_reads(capture: str) -> None:
    from poolconsole.collect.engines import specs
    from poolconsole.collect.prom import _fast, _strict
    from poolconsole.collect.prom_select import select_lines

    path = (VLLM if (VLLM / capture).exists() else LLAMA) / capture
    for spec in (specs.VLLM, specs.LLAMACPP, specs.SGLANG):
        selected = select_lines(path.read_text(), spec.wanted, spec.prefix).text
        fast = _fast(selected)
        assert fast is not None
        assert sorted((s.name, s.labels, s.value) for s in fast) == sorted(
            (s.name, s.labels, s.value) for s in _strict(selected)
        )


def test_fast_path_hands_unusual_lines_to_the_library() -> None:
    from poolconsole.collect.prom import _fast

    assert _fast('x{a="1" b="2"} 1\n') is None  # no comma between labels: not for the fast path
    assert _fast('x{a="q\\"uote"} 1\n')[0].labels == (("a", 'q"uote'),)  # type: ignore[index]
