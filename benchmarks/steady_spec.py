"""A steady replay spec for the peers harness (`../shared/peers/`): the same layout on every poll, counters growing.

`python benchmarks/steady_spec.py OUT_DIR [--pages 400]` writes OUT_DIR/steady.json and its pages, for
`SPEC=OUT_DIR/steady.json ../shared/peers/measure.sh ...` (or any of the harness's programs in programs.sh).

The harness's own `cycle` spec replays idle -> load -> after: every third poll a counter reset and the queue
flapping 8 -> 0, which churns every reader's state. This one is its counterpart (issue 14's "steady spec"):
the real vLLM 0.32.0 `/metrics` capture under load (tests/fixtures/real/vllm-0.32.0-cpu/metrics.load.txt),
its gauges held (8 running, 8 waiting: the queue alert fires and stays firing), and every counter sample
(counters, and histograms' and summaries' `_bucket`, `_sum` and `_count`) grown on each page by what it
grew between the load and the after captures (911 generated and 328 prompt tokens a poll): page k holds
load + k * (after - load). `_created` timestamps and quantiles stay as captured. The replay server answers
each GET with the next page and repeats the last one; 400 pages cover the harness's 65 s at a 1 s poll with
every program polling several times over. The other routes (/v1/models, /version, /health, /ping, /load: those of the
harness's specs) serve the capture's own files.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

CAPTURE = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "real" / "vllm-0.32.0-cpu"
SAMPLE = re.compile(r"^(?P<series>[A-Za-z_:][A-Za-z0-9_:]*(?:\{[^}]*\})?) (?P<value>\S+)$")
TYPE = re.compile(r"^# TYPE (?P<family>\S+) (?P<kind>\S+)$")
GROWING_SUFFIXES = {
    "counter": ("", "_total"),
    "histogram": ("_bucket", "_sum", "_count"),
    "summary": ("_sum", "_count"),
}


def _samples(page: str) -> dict[str, float]:
    found: dict[str, float] = {}
    for line in page.splitlines():
        match = SAMPLE.match(line)
        if match:
            found[match["series"]] = float(match["value"])
    return found


def _growing(page: str) -> set[str]:
    """The metric names whose samples only grow: counters, and histograms' and summaries' buckets, sums, counts."""
    names: set[str] = set()
    for line in page.splitlines():
        match = TYPE.match(line)
        if match:
            names.update(match["family"] + suffix for suffix in GROWING_SUFFIXES.get(match["kind"], ()))
    return names


def steady_pages(load: str, after: str, pages: int) -> list[str]:
    """Page k: `load` with each growing sample at load + k * (after - load) (never less than load's)."""
    growing = _growing(load)
    at_load = _samples(load)
    step = {series: max(value - at_load.get(series, value), 0.0) for series, value in _samples(after).items()}
    out: list[str] = []
    for k in range(pages):
        lines = []
        for line in load.splitlines():
            match = SAMPLE.match(line)
            name = match["series"].split("{", 1)[0] if match else ""
            if match and name in growing and step.get(match["series"]):
                value = float(match["value"]) + k * step[match["series"]]
                line = f"{match['series']} {value!r}"
            lines.append(line)
        out.append("\n".join(lines) + "\n")
    return out


def write_spec(out_dir: Path, pages: int) -> Path:
    load = (CAPTURE / "metrics.load.txt").read_text()
    after = (CAPTURE / "metrics.after.txt").read_text()
    page_dir = out_dir / "steady"
    page_dir.mkdir(parents=True, exist_ok=True)
    files = []
    for k, page in enumerate(steady_pages(load, after, pages)):
        path = page_dir / f"metrics.{k:04d}.txt"
        path.write_text(page)
        files.append(str(path))
    as_json = "application/json"
    spec = {
        "routes": {
            "/metrics": {"files": files},
            "/v1/models": {"files": [str(CAPTURE / "v1_models.json")], "content_type": as_json},
            "/version": {"files": [str(CAPTURE / "version.json")], "content_type": as_json},
            "/health": {"files": [str(CAPTURE / "health.body.txt")]},
            "/ping": {"files": [str(CAPTURE / "ping.body.txt")]},
            "/load": {"files": [str(CAPTURE / "load.json")], "content_type": as_json},
        },
        "default": None,
    }
    spec_path = out_dir / "steady.json"
    spec_path.write_text(json.dumps(spec, indent=1))
    return spec_path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--pages", type=int, default=400)
    args = parser.parse_args()
    print(write_spec(args.out_dir, args.pages))


if __name__ == "__main__":
    main()
