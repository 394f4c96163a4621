"""The seed corpus of benchmarks/fuzz.py: which real captures (tests/fixtures/real/ and the project's own
fixtures) each target's mutations start from."""

from __future__ import annotations

import re
from pathlib import Path

from poolconsole.model import failure_modes

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
REAL = FIXTURES / "real"
ISSUES = REAL / "issue-samples"


def read_files(*paths: Path) -> list[bytes]:
    return [p.read_bytes() for p in paths if p.is_file()]


def sorted_glob(folder: Path, pattern: str) -> list[Path]:
    return sorted(folder.glob(pattern))


def capture_body(path: Path) -> bytes:
    """An issue sample without its `# SOURCE` header (the lines before the first that does not start with #
    are its provenance; Prometheus pages keep theirs: HELP/TYPE lines are comments too)."""
    lines = path.read_bytes().split(b"\n")
    at = next((i for i, line in enumerate(lines) if line and not line.startswith(b"#")), len(lines))
    return b"\n".join(lines[at:])


def json_documents(path: Path) -> list[bytes]:
    """The JSON documents of an issue sample (a line that starts one, up to the next blank line)."""
    out: list[bytes] = []
    text = capture_body(path)
    for block in re.split(rb"\n\s*\n", text):
        start = re.search(rb"^[\[{]", block, re.MULTILINE)
        if start:
            out.append(block[start.start() :])
    return out or [text]


def prometheus_pages() -> list[bytes]:
    pages = read_files(
        *sorted_glob(REAL / "vllm-0.32.0-cpu", "metrics*.txt"),
        *sorted_glob(REAL / "llamacpp-b1-0c1e570", "metrics*.txt"),
        REAL / "llamacpp-b1-0c1e570" / "apikey-metrics-no-key.txt",
        *sorted_glob(FIXTURES / "litellm-prometheus", "metrics*.txt"),
        *sorted_glob(FIXTURES / "exporters", "*.metrics"),
    )
    pages += [capture_body(p) for p in sorted_glob(ISSUES, "*metrics*.txt")]
    return pages


def engine_pages(kind: str) -> list[bytes]:
    own = {
        "vllm": sorted_glob(REAL / "vllm-0.32.0-cpu", "metrics*.txt"),
        "sglang": [],
        "llamacpp": sorted_glob(REAL / "llamacpp-b1-0c1e570", "metrics*.txt"),
    }[kind]
    issue = [capture_body(p) for p in sorted_glob(ISSUES, f"{kind}*metrics*.txt")]
    if kind == "llamacpp":
        issue += [capture_body(p) for p in sorted_glob(ISSUES, "ikllamacpp*metrics*.txt")]
    return read_files(*own) + issue


def host_outputs(prefix: str) -> list[bytes]:
    return [capture_body(p) for p in sorted_glob(ISSUES, prefix + "*")]


def seeds_nvidia() -> list[bytes]:
    gpu = REAL / "gpu" / "nvidia-h200"
    return read_files(*sorted_glob(gpu, "query-*.csv")) + host_outputs("nvidia-smi")


def seeds_meminfo() -> list[bytes]:
    meminfo = b"".join(
        line + b"\n"
        for line in (FIXTURES / "exporters" / "node_exporter-1.5.0-meminfo.metrics").read_bytes().split(b"\n")
        if line.startswith(b"node_memory_")
    )
    made = (
        b"MemTotal:       131072000 kB\nMemFree:         1024000 kB\nMemAvailable:   65536000 kB\n"
        b"Buffers:          204800 kB\nCached:         8192000 kB\nSwapCached:            0 kB\n"
        b"SwapTotal:       8388604 kB\nSwapFree:        8388604 kB\nHugePages_Total:       0\n"
    )
    old = b"MemTotal:  2048 kB\nMemFree:  1024 kB\nBuffers:  10 kB\nCached:  20 kB\n"
    return [made, old, meminfo]


def seeds_config() -> list[bytes]:
    return read_files(ROOT / "hosts.toml", *sorted_glob(ROOT / "docs", "*.toml"))


def seeds_logs() -> list[bytes]:
    logs = read_files(*sorted_glob(FIXTURES / "log-lines", "*.log"), *sorted_glob(FIXTURES / "log-lines", "*.txt"))
    examples = "\n".join(mode.example for mode in failure_modes.MODES).encode()
    return [*logs, examples, b"Authorization: Bearer sk-abc123\n--api-key sk-1 token: abc\x1b[2J\n"]


ALERT_SEEDS = [
    b"down\nqwen3-next\nnot answering: connection refused\nanswering again\ntp4-3090\ntp4-3090\n",
    b"stalled\nllama\nstalled: 3 requests running, no token for 31 s\n\nbox\nbox\nteam=ml\n",
    b"kv_full\nsglang-a\nKV cache 99% full\nKV 40%\n\nother\n",
    b"vram_gpu0\ntp4-3090\nGPU 0 VRAM 97%\n\n\ntp4-3090\nseverity=critical\n",
]


def seeds_macos() -> list[bytes]:
    vm_stat = capture_body(ISSUES / "macos-vm_stat-sysctl-memsize-samples.txt")
    return [b"17179869184\n--\n" + vm_stat, b"hw.memsize: 8589934592\n--\n" + vm_stat]
