"""benchmarks/steady_spec.py: the steady pages keep the real capture's layout, hold its gauges and grow its
counters by one fixed step a page, cumulative histograms staying cumulative (checked with prometheus_client's
parser, the reference reading of the format)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parents[2]


def _steady_spec() -> ModuleType:
    spec = importlib.util.spec_from_file_location("steady_spec", ROOT / "benchmarks" / "steady_spec.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _values(page: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(page)
        for sample in family.samples
    }


def test_steady_pages_hold_gauges_and_grow_counters(tmp_path: Path) -> None:
    steady = _steady_spec()
    spec_path = steady.write_spec(tmp_path, 3)
    spec = json.loads(spec_path.read_text())
    files = spec["routes"]["/metrics"]["files"]
    assert len(files) == 3 and all(Path(f).is_file() for f in spec["routes"]["/v1/models"]["files"])
    pages = [Path(f).read_text() for f in files]
    load = (steady.CAPTURE / "metrics.load.txt").read_text()
    layout = [line.rsplit(" ", 1)[0] for line in load.splitlines()]
    for page in pages:
        assert [line.rsplit(" ", 1)[0] for line in page.splitlines()] == layout
    first, second, third = (_values(page) for page in pages)
    assert first == _values(load)
    engine = (("engine", "0"), ("model_name", "tiny"))
    assert second[("vllm:num_requests_waiting", engine)] == third[("vllm:num_requests_waiting", engine)] == 8.0
    generated = [page[("vllm:generation_tokens_total", engine)] for page in (first, second, third)]
    assert generated == [334.0, 334.0 + 911.0, 334.0 + 2 * 911.0]
    grown = [key for key in second if second[key] != first[key]]
    assert any(name.endswith("_bucket") for name, _ in grown)
    kinds = {
        sample.name: family.type for family in text_string_to_metric_families(pages[1]) for sample in family.samples
    }
    assert {kinds[name] for name, _ in grown} <= {"counter", "histogram", "summary"}
    assert not [name for name, _ in grown if name.endswith("_created")]
    resident = ("process_resident_memory_bytes", ())  # a gauge that rose between the two captures: held
    assert first[resident] == second[resident] == third[resident]
    for key in grown:
        assert third[key] - second[key] == second[key] - first[key] > 0
    buckets = sorted(
        (float(dict(labels)["le"]), value)
        for (name, labels), value in third.items()
        if name == "vllm:e2e_request_latency_seconds_bucket"
    )
    assert [value for _, value in buckets] == sorted(value for _, value in buckets)
