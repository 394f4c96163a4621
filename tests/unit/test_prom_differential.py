"""prom.py's fast path, its selection and the page memo give the samples prometheus_client's parser gives, on
every page prometheus_client accepts (issue 35, deliverable 3): generated pages (names, labels with escapes,
values with NaN, +Inf, -Inf and exponents, timestamps, comments, HELP and TYPE lines, histograms) and mutated
real captures. Where they differ, prometheus_client is right. The same comparison is benchmarks/fuzz.py's
prom_diff target."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from poolconsole.collect.engines import specs
from poolconsole.collect.engines.page_memo import PageMemo
from tests.conftest import REAL

ROOT = Path(__file__).resolve().parents[2]


def _fuzz() -> ModuleType:
    spec = importlib.util.spec_from_file_location("poolconsole_fuzz_diff", ROOT / "benchmarks" / "fuzz.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


FUZZ = _fuzz()
SPECS = {"vllm": specs.VLLM, "sglang": specs.SGLANG, "llamacpp": specs.LLAMACPP}
NAMES = [*sorted(n for spec in SPECS.values() for n in spec.wanted if ":" in n), "other_metric", "up", "x_total"]
name = st.sampled_from(NAMES)
label_name = st.sampled_from(["model_name", "engine", "le", "a", "finished_reason", "tp_rank", "dp_rank"])
label_value = st.text(st.sampled_from(list('ab0 ,={}#"\\\n\t.é')), max_size=8)
value = st.one_of(
    st.sampled_from(["0", "1", "-1", "NaN", "+Inf", "-Inf", "1e308", "1.5e-3", "2E+2", "0.25", "-0", "17"]),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.integers(-(10**20), 10**20).map(str),
)


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


@st.composite
def sample_line(draw: st.DrawFn, metric: str) -> str:
    labels: dict[str, str] = draw(st.dictionaries(label_name, label_value, max_size=3))
    trailing_comma, empty_braces = draw(st.tuples(st.booleans(), st.booleans()))
    inner = ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items())
    if inner and trailing_comma:
        inner += ","
    head = metric + (f"{{{inner}}}" if labels or empty_braces else "")
    stamp = f" {draw(st.integers(0, 2**40))}" if draw(st.integers(0, 5)) == 0 else ""
    return f"{head} {draw(value)}{stamp}"


@st.composite
def family(draw: st.DrawFn, metric: str) -> list[str]:
    kind = draw(st.sampled_from(["counter", "gauge", "histogram", "untyped", "summary", None]))
    out = []
    if draw(st.booleans()):
        out.append(f"# HELP {metric} {_escape(draw(label_value))}")
    if kind is not None:
        out.append(
            f"# TYPE {metric.removesuffix('_total') if kind == 'counter' and draw(st.booleans()) else metric} {kind}"
        )
    if kind == "histogram":
        bounds = sorted(
            draw(st.lists(st.sampled_from(["0.1", "0.5", "1.0", "2.5", "-1", "NaN"]), max_size=3, unique=True))
        )
        base = draw(st.sampled_from(["vllm:time_to_first_token_seconds", "sglang:inter_token_latency_seconds"]))
        out = [f"# TYPE {base} histogram"]
        for bound in [*bounds, "+Inf"]:
            out.append(f'{base}_bucket{{le="{bound}",model_name="m"}} {draw(value)}')
        out += [f'{base}_sum{{model_name="m"}} {draw(value)}', f'{base}_count{{model_name="m"}} {draw(value)}']
        return out
    for _ in range(draw(st.integers(0, 3))):
        out.append(draw(sample_line(metric)))
    if draw(st.integers(0, 6)) == 0:
        out.append("# a comment " + draw(label_value).replace("\n", " "))
    return out


@st.composite
def page(draw: st.DrawFn) -> str:
    # Each family once, as on every real page (see the xfail below for a family opened twice).
    names: list[str] = draw(st.lists(name, min_size=1, max_size=6, unique=True))
    lines = [line for metric in names for line in draw(family(metric))]
    return "\n".join(lines) + "\n"


def check(text: str) -> None:
    kind = "vllm" if "vllm" in text else "sglang" if "sglang" in text else "llamacpp"
    memo = PageMemo()
    FUZZ.differences(FUZZ.NUMBER.sub(b"7", text.encode()).decode(), SPECS[kind], memo)  # same layout, other values
    found = FUZZ.differences(text, SPECS[kind], memo)
    assert not found, "\n".join(found)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(page())
def test_generated_pages_read_as_prometheus_client_reads_them(text: str) -> None:
    check(text)


CAPTURES = [
    p.read_text()
    for p in (
        REAL / "vllm-0.32.0-cpu" / "metrics.load.txt",
        REAL / "llamacpp-b1-0c1e570" / "metrics-after-requests.txt",
        *sorted((REAL / "issue-samples").glob("*metrics*.txt")),
    )
]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.sampled_from(CAPTURES), st.randoms(use_true_random=False))
def test_mutated_real_captures_read_as_prometheus_client_reads_them(capture: str, rng: object) -> None:
    mutator = FUZZ.Mutator([capture.encode()], rng)
    check(mutator().decode("utf-8", "replace"))


def test_every_real_capture_reads_as_prometheus_client_reads_it() -> None:
    for capture in CAPTURES:
        check(capture)


def test_a_family_typed_twice_around_another_family_header() -> None:
    """Found by the generated pages: prometheus_client ends a family at any other family's HELP/TYPE
    line and types it then (`sglang:cache_hit_rate` counter -> `..._total`); the selection drops the llama.cpp
    header between, so the later `# TYPE sglang:cache_hit_rate gauge` retyped the same family (no `_total`).
    No real page opens a family twice; the selection now keeps the header that ends the family."""
    check(
        "# TYPE sglang:cache_hit_rate counter\nsglang:cache_hit_rate 0\n# TYPE llamacpp:kv_cache_usage_ratio counter\n"
        "# TYPE sglang:cache_hit_rate gauge\n"
    )


def test_an_unwanted_family_whose_name_begins_a_wanted_one() -> None:
    """Fuzz finding: a TYPE line cut to `llamacpp:predicted_tokens_se` before the sample
    `llamacpp:predicted_tokens_seconds 0`; the selection dropped the block whole as the unwanted family's,
    where prometheus_client reads the sample as a family of its own."""
    check(
        "# HELP llamacpp:predicted_tokens_seconds Average generation throughput\n"
        "# TYPE llamacpp:predicted_tokens_se gauge\nllamacpp:predicted_tokens_seconds 0\n"
        "# HELP llamacpp:requests_processing Number of requests processing\n"
        "# TYPE llamacpp:requests_processing gauge\nllamacpp:requests_processing 1\n"
    )


def test_a_comment_with_a_quote_before_its_type_word() -> None:
    """Fuzz finding: `#ab"c TYPE llamacpp:n_tokens_max counter` is one unterminated quoted token for
    prometheus_client, so a comment, and the family stays untyped (`n_tokens_max`, no `_total`); the fast path
    split it on blanks, read a TYPE line, and named the sample `n_tokens_max_total`."""
    check(
        "# HELP llamacpp:n_tokens_max Largest observed sequence length\n"
        '#ab"c TYPE llamacpp:n_tokens_max counter\nllamacpp:n_tokens_max 23\n'
    )


def test_a_histogram_retyped_counter_later_on_the_page() -> None:
    """Found by the generated pages: prometheus_client types a family when it ends, and a counter's samples all
    gain `_total` then (`_bucket_total`, `_count_total`); the fast path renamed only those named as the family."""
    check(
        "# TYPE vllm:time_to_first_token_seconds histogram\n"
        'vllm:time_to_first_token_seconds_bucket{le="+Inf",model_name="m"} 0\n'
        'vllm:time_to_first_token_seconds_sum{model_name="m"} 0\n'
        'vllm:time_to_first_token_seconds_count{model_name="m"} 0\n'
        "# TYPE vllm:time_to_first_token_seconds counter\n# a comment \n"
    )


def test_a_sample_inside_a_wanted_family_named_otherwise() -> None:
    """Fuzz finding (seed 101, 8 KiB excerpts): a run repeated inside a sample's name
    (`sglang:prompt_tokens_totaglang:...:l{name=...}`) left a line that starts with the wanted family's stem in
    its block. The selection kept the block whole, and the mapping took that sample's `name` label as a served
    model; prometheus_client reads it as a sample of its own, of no wanted family (no model)."""
    check(
        "# HELP sglang:prompt_tokens_total Number of prefill tokens processed.\n"
        'sglang:prompt_tokens_totaglang:glang:l{name="/models/Llama1e-3B/"} 230794.0\n'
        "# TYPE sglang:prompt_tokens_total counter\n"
    )
    check(  # the same inside a wanted counter's block, after its TYPE line, beside a wanted sample
        "# TYPE sglang:prompt_tokens_total counter\n"
        'sglang:prompt_tokens_total{model_name="m"} 5\n'
        'sglang:prompt_tokens_totalx{model_name="other"} 1\n'
    )


def test_lines_end_at_a_newline_alone() -> None:
    """Fuzz findings (seed 135, 8 KiB excerpts, five of them): prometheus_client splits a page at `\\n` only,
    where str.splitlines() also ends a line at \\x0b, \\x0c, \\x1c-\\x1e, \\x85 and \\u2028. Such a byte in a
    label value cut the sample in two bad lines (lost, or the page refused as garbage), and in HELP text it
    began a line of its own (`\\x0b# TYPE x counter` typed a family prometheus_client leaves untyped)."""
    check(  # a label value with \x1e, read line by line (after another family's HELP line)
        "# TYPE vllm:request_success_total counter\n"
        "# HELP vllm:request_success_created Count of successfully processed requests.\n"
        'vllm:request_success_total{finished_reason="stop",model_name="ti\x1eny"} 2.0\n'
    )
    check(  # a line of garbage with \x1d beside a good sample: one bad line, not two (and not refused)
        "# TYPE sglang:token_usage gauge\nsglang:token_usage 0.5\n# TYPE sglang:gen_throughput gauge\n"
        'sglang:g,\ufffds\ufffd\x1dRN\ufffden_throughput{model_name="m"} 0.8\n'
    )
    check(  # \x0b and \x0c in a histogram's label value
        "# TYPE vllm:time_to_first_token_seconds histogram\n"
        'vllm:time_to_first_token_seconds_bucket{le="+Inf",model_name="L# HELP \x0bp\x0cl"} 3.0\n'
        'vllm:time_to_first_token_seconds_count{model_name="L# HELP \x0bp\x0cl"} 3.0\n'
        "# TYPE vllm:cache_config_info gauge\n"
        'vllm:time_to_first_token_seconds_bucket{le="+Inf",model_name="L# HELP \x0bp\x0cl"} 3.0\n'
    )
    check(  # a TYPE after \x0b in HELP text is help text: the family stays untyped (no `_total`)
        "# HELP llamacpp:n_tokens_max Largest\x0b# TYPE llamacpp:n_tokens_max counter\nllamacpp:n_tokens_max 0\n"
    )
    check(  # \x1e in HELP text, before a value past a float's range
        "# HELP llamacpp:predicted_tokens_seconds Average generation throughput in tokens/s\n"
        "llamacpp:requests_deferred 0\nllamacpp:predicted_tokens_seconds 6479.48\n"
        "# HELP llamacpp:requests_processing Number of requests proces\x1e4:2sing\n"
        "# TYPE llamacpp:requests_processing gauge\nllamacpp:requests_processing " + "9" * 400 + "\n"
    )


def test_a_total_sample_in_a_gauge_block() -> None:
    """Fuzz finding (seed 136, after f08f8df): `x_total` in gauge x's block is a sample prometheus_client reads
    (a family of its own); the check that every line of a wanted block is one of its samples dropped it."""
    check(
        "# HELP llamacpp:predicted_tokens_seconds Average generation throughput in tokens/s\n"
        "# TYPE llamacpp:predicted_tokens_seconds gauge\nllamacpp:predicted_tokens_seconds_total 8.168\n"
    )


def test_an_integer_past_a_float_in_the_careful_path() -> None:
    """Fuzz findings (seed 235, two of them): prometheus_client keeps `999...9` (400 digits) as an int, and
    float() of it raised OverflowError in prom.py's careful path (here reached through a value with no blank
    after the labels), so the sample was lost; prometheus_client reads it, as the fast path does, as +Inf."""
    check('vllm:request_success_total{finished_reason="length",model_name="tiny"}' + "9" * 400 + "\n")
    check(  # beside a sample the fast path would read
        'vllm:request_success_total{model_name="tiny"} 2\ns{e=""}9\n'
        'vllm:request_success_total{g=""}-' + "9" * 400 + "\n"
    )


def test_lines_whose_name_is_no_metric_name_do_not_refuse_the_page() -> None:
    """Fuzz findings (seed 235, two of them): prometheus_client does not check the name before a label set, so
    `sglang:t\\ufffdS\\ufffdoken_usage{...} 0.0` (mutated bytes, decoded) is a sample of its own to it; the
    selection counted such lines as lines that cannot be samples, found more of them than samples, and refused
    the page whose wanted sample prometheus_client reads."""
    check('\ufffd{k=""} 0\n\ufffd{e="",p=""} 0\nsglang:gen_throughput{model_name="m"} 0\n')
    check(
        "# TYPE sglang:token_usage gauge\n"
        'sglang:t\ufffdS\ufffdoken_usage{model_name="m"} 0.0\nsglang:t\ufffdoken_usage{model_name="m"} 0.0\n'
        'sglang:gen_throughput{model_name="m"} 0\n'
    )


def test_a_wanted_name_followed_by_more_before_the_labels() -> None:
    """Fuzz finding (seed 235): prometheus_client names a sample by everything before its `{`, so
    `vllm:request_success\\x1fd{model_name="y"} 1` is the sample `vllm:request_success\\x1fd`, of no wanted
    family; the selection read the name up to the blank \\x1f, kept the line as wanted, and the mapping took its
    label as a served model."""
    check('vllm:request_success\x1fd{model_name="y"} 1\n')
    check('vllm:num_requests_running a{model_name="y"} 1\n')
    check(  # inside a wanted family's block, which the selection keeps whole
        '# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{model_name="m"} 1\n'
        'vllm:num_requests_running a{model_name="y"} 1\n'
    )
