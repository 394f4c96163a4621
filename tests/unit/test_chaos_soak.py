"""benchmarks/chaos_soak.py, its pure parts: the merged hosts.toml loads (both pools' names prefixed, their
references with them), the hostile pages are hostile in the way they claim (checked with prometheus_client's
parser, the reference reading of the format), and the figures (least-squares slope, gaps, the loss to the
kill, the words a row must say) are computed as BENCHMARKS.md quotes them."""

from __future__ import annotations

import importlib.util
import sys
import tomllib
from pathlib import Path
from types import ModuleType
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from poolconsole.config import parse_config

ROOT = Path(__file__).resolve().parents[2]


def _soak() -> ModuleType:
    spec = importlib.util.spec_from_file_location("chaos_soak", ROOT / "benchmarks" / "chaos_soak.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


POOL = """
[settings]
poll_interval_s = 1.0
http_timeout_s = 3.0

[[hosts]]
name = "tp4"
address = "127.0.0.1"
port = 2222
user = "demo"
description = "4x RTX 3090 (simulated)"

[[engines]]
name = "big"
kind = "vllm"
url = "http://127.0.0.1:8000"
host = "tp4"
gpus = [0, 1]
degrade_to = "small"

[engines.smoke]
tools = true

[engines.control]
backend = "docker"
name = "big"

[[engines.profiles]]
name = "awq"
format = "demo"
weights_gib = 44.0
env = { POOL_SPEED = "1.0", POOL_SPEC = "off" }

[[engines]]
name = "small"
kind = "llamacpp"
url = "http://127.0.0.1:8001"
host = "tp4"
"""


def _values(page: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(page)
        for s in family.samples
    }


def test_merged_config_loads_with_both_pools_and_the_hostile_engines() -> None:
    soak = _soak()
    doc = tomllib.loads(POOL)
    merged = soak.merge_configs([("r-", doc), ("n-", doc)], {"h-502": 9001, "h-nul": 9002}, "http://127.0.0.1:9/hook")
    text = soak.to_toml(merged)
    assert tomllib.loads(text) == merged  # the writer gives back what it was given
    config = parse_config(text)
    assert [h.name for h in config.hosts] == ["r-tp4", "n-tp4"]
    assert [e.name for e in config.engines] == ["r-big", "r-small", "n-big", "n-small", "h-502", "h-nul"]
    big = config.engines[2]
    assert (big.host, big.degrade_to, big.control and big.control.name) == ("n-tp4", "n-small", "big")
    assert big.profiles[0].env["POOL_SPEC"] == "off"
    assert config.engines[4].url == "http://127.0.0.1:9001" and config.engines[4].kind == "vllm"
    assert config.notify[0].url == "http://127.0.0.1:9/hook"
    odd = {"a b": {"c.d": [1, 2.5, True, 'x\u0000"y'], "e": {"f": -0.0}}, "t": [{"u": 1}, {"u": 2, "v": {}}]}
    assert tomllib.loads(soak.to_toml(odd)) == odd


def test_hostile_pages() -> None:
    soak = _soak()
    page = (soak.CAPTURE / "metrics.after.txt").read_bytes()
    first, second = (_values(soak.counters_back(page.decode(), n)) for n in (0, 1))
    tokens = ("vllm:generation_tokens_total", (("engine", "0"), ("model_name", "tiny")))
    assert 0 < second[tokens] < first[tokens]  # the counters went back ...
    assert first == _values(page.decode())  # ... from the capture's own values
    gauge = ("vllm:kv_cache_usage_perc", (("engine", "0"), ("model_name", "tiny")))
    assert first[gauge] == second[gauge]
    buckets = [v for (name, labels), v in second.items() if name == "vllm:request_prompt_tokens_bucket"]
    assert buckets == sorted(buckets)  # still cumulative

    for n in range(5):
        cut = soak.cut_mid_line(page, n)
        assert page.startswith(cut) and not cut.endswith(b"\n")
        float(cut.rsplit(b"\n", 1)[1].rsplit(b" ", 1)[1])  # the cut last line still parses as a number
    short = soak.whole_lines_prefix(page)
    assert page.startswith(short) and short.endswith(b"\n") and len(short) < len(page)
    assert all(b"\x00" in soak.nul_garbage(n, page) for n in range(4))


def test_figures() -> None:
    soak = _soak()
    assert soak.slope_per_hour([(0, 100.0), (1800, 100.5), (3600, 101.0)]) == 1.0
    assert soak.slope_per_hour([(0, 1.0), (60, 2.0)]) is None  # under 3 points: no slope
    gaps: dict[str, Any] = soak.gap_stats([10.0, 11.0, 12.0, 13.6, 14.6])
    assert (gaps["updates"], gaps["median_s"], gaps["max_s"]) == (5, 1.0, 1.6)
    lost = soak.kill_loss([1.0, 2.0, 3.0, 4.0, 9.0, 10.0], killed_at=4.8)
    assert lost == {
        "polls_before": 4,
        "last_before_kill_s": 0.8,
        "longest_gap_before_kill_s": 1.0,
        "median_gap_s": 1.0,
        "first_after_kill_s": 4.2,
    }


def test_problem_words() -> None:
    soak = _soak()
    said = {
        "h-502": "/metrics: HTTP 502: an HTML page",
        "h-nul": "/metrics: body contains NUL bytes: not Prometheus text",
        "h-login": "/metrics: got an HTML/XML page where Prometheus text was expected (a proxy or error page?)",
        "h-blackhole": "no answer within 3 s",
        "h-cut": "/metrics: page cut mid-line: its last line has no line break (a truncated response)",
        "h-short": "/metrics: connection closed mid-response (Not enough data to satisfy content length header)",
        "h-flap": "connection refused by 127.0.0.1:41727 (is the engine running and listening on that port?)",
        "h-reset": "restart loop",
    }
    assert set(said) == set(soak.HOSTILE)
    for name, text in said.items():
        assert soak.names_problem(name, [text]), name
        assert not soak.names_problem(name, [f"{name} (/metrics)"]), name  # the path is not the problem
