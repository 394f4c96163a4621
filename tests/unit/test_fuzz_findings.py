"""What benchmarks/fuzz.py found (issue 35, deliverable 2), each failing input kept as it was found: a label
set that made the fast parser quadratic, a page memo that met an old layout again, digits past int()'s limit
in host tools' output, a severity no receiver knows, and a counter the fast path named otherwise than
prometheus_client does."""

from __future__ import annotations

import json

import pytest

from poolconsole.collect import prom
from poolconsole.collect.engines import specs
from poolconsole.collect.engines.mapping import parse_metrics
from poolconsole.collect.engines.page_memo import PageMemo
from poolconsole.collect.hosts import systems
from poolconsole.collect.prom import ParseError
from poolconsole.model import notify
from tests.conftest import REAL

VLLM_PAGE = (REAL / "vllm-0.32.0-cpu" / "metrics.load.txt").read_text()
LLAMACPP_PAGE = (REAL / "llamacpp-b1-0c1e570" / "metrics-after-requests.txt").read_text()


def test_an_unquoted_label_run_is_read_in_linear_time() -> None:
    """Found: `sglang:num_running_reqs{engine_type=QwenQwen...` (80 KB, no quote) took over 10 s: the label
    pattern was searched from every position. 400 000 characters here: hours that way, milliseconds now."""
    line = "sglang:num_running_reqs{engine_type=" + "Qwen" * 100_000 + "} 1\n"
    assert prom._labels("engine_type=" + "Qwen" * 100_000) is None
    page = "# TYPE sglang:num_running_reqs gauge\n" + line + "sglang:num_queue_reqs 2\n"
    try:
        metrics, _, _ = parse_metrics(page, specs.SGLANG)
    except ParseError:
        return
    assert metrics.get("requests_running") is None


def test_labels_still_read_as_before() -> None:
    assert prom._labels('a="1",b="x\\"y",c="\\\\n"') == (("a", "1"), ("b", 'x"y'), ("c", "\\n"))
    assert prom._labels('a="1",') == (("a", "1"),)
    assert prom._labels('a="1" b="2"') is None
    assert prom._labels('a="1",,b="2"') is None


def test_a_page_memo_meeting_an_old_layout_again_reads_it() -> None:
    """Found: pages A, B (one more series), A again raised AssertionError in the memo (the engine's row read
    "internal error"): B dropped the plan but kept A's heads, so A found its heads and no plan."""
    running = next(ln for ln in VLLM_PAGE.split("\n") if ln.startswith("vllm:num_requests_running{"))
    other = running.replace('model_name="', 'model_name="other-')
    page_b = VLLM_PAGE.replace(running, running + "\n" + other)
    assert page_b != VLLM_PAGE
    memo = PageMemo()
    for page in (VLLM_PAGE, VLLM_PAGE, page_b, VLLM_PAGE, VLLM_PAGE, page_b, page_b, VLLM_PAGE):
        fast, fast_missing, _ = parse_metrics(page, specs.VLLM, memo)
        careful, missing, _ = parse_metrics(page, specs.VLLM)
        assert (fast.values, fast.ranks, fast_missing) == (careful.values, careful.ranks, missing)


@pytest.mark.parametrize(
    "output",
    [
        "MemTotal:       1" + "0" * 5000 + " kB\n",
        "MemTotal:       131072000 kB\nMemAvailable:   6" + "5" * 20000 + " kB\n",
    ],
    ids=["memtotal", "memavailable"],
)
def test_meminfo_values_past_int_limit_are_no_value(output: str) -> None:
    """Found: 5000 digits raised ValueError (int() refuses past 4300)."""
    try:
        memory = systems.parse_meminfo(output)
    except ParseError as exc:
        assert "MemTotal" in str(exc)
        return
    assert memory.total_bytes == 131072000 * 1024 and memory.available_bytes is None


def test_vm_stat_digits_past_int_limit_are_no_value() -> None:
    header = "Mach Virtual Memory Statistics: (page size of 4096 bytes)\n"
    memory = systems.parse_macos("17179869184\n", header + "Pages free: " + "1" * 5000 + ".\nPages active: 10.\n")
    assert memory.total_bytes == 17179869184
    with pytest.raises(ParseError, match="page size"):
        systems.parse_macos("17179869184\n", "(page size of " + "4" * 5000 + " bytes)\n")


@pytest.mark.parametrize("card", ["card" + "1" * 5000, "card²"])
def test_a_rocm_smi_card_number_that_int_refuses_is_no_index(card: str) -> None:
    """Found: `card` + 5000 digits, and `card²` (str.isdigit() says yes, int() says no), raised ValueError."""
    (gpu,) = systems.parse_rocm_smi(json.dumps({card: {"VRAM Total Memory (B)": "1024"}}))
    assert gpu.index is None and gpu.memory_total_bytes == 1024


def test_an_unknown_severity_is_paged_not_a_key_error() -> None:
    """Found: an alert whose severity label no table knows raised KeyError building its ntfy message."""
    alert = notify.Alert("down", "e", {"alertname": "down", "severity": "bogus"}, "down: refused", 0.0)
    message = notify.ntfy_message("down", [alert])
    assert message.priority == 3 and message.tags.startswith("warning,down,")


def test_a_counter_typed_without_total_reads_as_prometheus_client_reads_it() -> None:
    """Found by the differential: prometheus_client names the samples of `# TYPE x counter` `x_total`; the fast
    path named them `x` (llama.cpp's own n_tokens_max), so one page read two ways by the two paths."""
    fast = prom._fast(LLAMACPP_PAGE)
    assert fast is not None
    strict = prom._strict(LLAMACPP_PAGE)
    assert sorted((s.name, s.labels, s.value) for s in fast) == sorted((s.name, s.labels, s.value) for s in strict)
    assert any(s.name == "llamacpp:n_tokens_max_total" for s in fast)
    # a wanted counter in that spelling is read, not "not on this page"
    page = "# HELP llamacpp:tokens_predicted x\n# TYPE llamacpp:tokens_predicted counter\nllamacpp:tokens_predicted 5\n"
    metrics, missing, _ = parse_metrics(page, specs.LLAMACPP)
    assert metrics.get("generation_tokens_total") == 5.0, missing.get("generation_tokens_total")
    # a sample of another name ends the family, as in prometheus_client: the later `x` is untyped, no _total
    ended = "# TYPE x counter\nx 1\ny 2\nx 3\n"
    assert [s.name for s in prom._fast(ended) or []] == [s.name for s in prom._strict(ended)] == ["x_total", "y", "x"]


def test_a_reading_with_a_long_run_of_blanks_is_read_in_linear_time() -> None:
    """The fuzzer's nvidia_smi find: a unit-stripping regex backtracked over a run of blanks (81 KB took 107 s;
    this 2 MB row would take days). Read now in one pass: the value is unknown, the row still read."""
    from poolconsole.collect.hosts import nvidia_smi

    blanks = " " * 2_000_000
    row = f"0, GPU-1, NVIDIA GB10, [N/A], [N/A], 3{blanks}x, 41 C, 9.5 W"
    [gpu] = nvidia_smi.parse_query_gpu(row, nvidia_smi.MINIMAL_FIELDS).gpus
    assert gpu.utilization_pct is None and gpu.temperature_c == 41.0 and gpu.power_w == 9.5
    assert nvidia_smi.number(f"250{blanks}MiB") == 250.0 and nvidia_smi.number("1410 MHz") == 1410.0


def test_an_integer_past_4300_digits_is_a_config_error_naming_the_file() -> None:
    """The fuzzer's config find: tomllib raises a plain ValueError (not TOMLDecodeError) for an integer of more
    digits than Python converts; check-config and every command had died on it."""
    import pytest

    from poolconsole.config import ConfigError, parse_config

    with pytest.raises(ConfigError) as raised:
        parse_config("[settings]\npoll_interval_s = " + "1" * 5001 + "\n", "hosts.toml")
    assert raised.value.source == "hosts.toml"
    assert "a value tomllib cannot read: Exceeds the limit (4300 digits)" in raised.value.render()
