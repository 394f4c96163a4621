"""Fuzz every parser poolconsole reads the outside world with (issue 35, deliverable 2), run by hand:

    .venv/bin/python benchmarks/fuzz.py --count 1000000            # every target, a million inputs each
    .venv/bin/python benchmarks/fuzz.py --seconds 20 --target prom  # one target for 20 s

Inputs are mutated real captures (tests/fixtures/real/ and the project's own fixtures) and random bytes: bit
flips, splices of two captures, truncations, duplications, windows of a few lines, numbers replaced by -1,
1e308, NaN, Inf, huge ints and the like, hostile tokens, runs repeated thousands of times. A crash is an
exception other than the parser's documented error (ParseError, ConfigError), an input slower than
--hang-seconds, or a broken invariant of the target (a negative or non-finite value in the model, a terminal
escape in a cleaned log line, a webhook body that is not JSON with Alertmanager's keys, a fast-path parse
that disagrees with prometheus_client's). Per target it prints the inputs run, the crashes and the slowest
input (its time and size). Exit status 1 when any target crashed.

Seeds have a maximum length, as libFuzzer's `-max_len` (`--max-len`, 8 KiB by default) for the targets that
read a format a cut can keep whole (fuzz_excerpts.py): Prometheus pages (prom, prom_diff, vllm, sglang,
llamacpp, litellm_metrics) are cut between whole metric families, logs between lines, hosts.toml between
tables. Mutations may grow an excerpt to `--max-grow` (16 KiB). Whole seeds stay: each is tried once as it is
before any mutation, and one input in a thousand (`--whole-seeds 0.001`) mutates a whole seed, which may grow
to 256 KiB (so a parse quadratic in its input still shows). `--max-len 0` mutates whole seeds only, as
before (a 260 KB page costs milliseconds: the page targets ran at 66-1,300 inputs/s that way). The small
targets (JSON, CSV, meminfo, notify) keep whole seeds: their seeds are small, and no cut keeps JSON whole.

No engine, host or network is touched; the mutation engine is this file's own (atheris needs clang to build).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import random
import re
import signal
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.fuzz_excerpts import Excerpts  # noqa: E402
from poolconsole.collect import engine_logs, prom  # noqa: E402
from poolconsole.collect.engines import jsonparse, litellm_usage, specs  # noqa: E402
from poolconsole.collect.engines.mapping import MetricSpec, metrics_from_samples, parse_metrics  # noqa: E402
from poolconsole.collect.engines.page_memo import PageMemo  # noqa: E402
from poolconsole.collect.hosts import nvidia_smi, systems  # noqa: E402
from poolconsole.collect.prom import ParseError  # noqa: E402
from poolconsole.config.load import ConfigError, parse_config  # noqa: E402
from poolconsole.model import failure_modes, notify  # noqa: E402
from poolconsole.model.snapshots import EngineMetrics  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures"
REAL = FIXTURES / "real"
ISSUES = REAL / "issue-samples"
MAX_INPUT = 256 * 1024
"""The largest mutated input of a target fuzzed from whole seeds: a real /metrics page is ~60 KB; repeats may
grow one up to this."""
MAX_LEN = 8 * 1024
"""The longest excerpt of a seed for a target that declares its unit (`--max-len`; 0 mutates whole seeds)."""
MAX_GROWN = 16 * 1024
"""How far mutations may grow an excerpt (`--max-grow`). The page parsers read a line that does not parse
through prometheus_client, at ~40 us a line: a 64 KiB cap spent 60 % of the time on the 6 % of inputs past
16 KiB. Quadratic parsing still shows on a run repeated to 16 KiB, and on the whole seeds below."""
WHOLE_SEEDS = 0.001
"""The share of inputs mutated from a whole seed rather than an excerpt (`--whole-seeds`); these may grow up
to the target's max_input. At 1 % the whole pages (to 260 KB) took a third of the page targets' time; at
0.1 % a million inputs still mutate a thousand whole pages, for ~4 % of the time."""


class Violation(AssertionError):
    """A target's invariant broken (counted as a crash)."""


class Hang(BaseException):
    """An input ran past --hang-seconds. A BaseException: a parser's `except Exception` does not swallow it."""


# -- seeds ---------------------------------------------------------------------------------------------------


def _read(*paths: Path) -> list[bytes]:
    return [p.read_bytes() for p in paths if p.is_file()]


def _glob(folder: Path, pattern: str) -> list[Path]:
    return sorted(folder.glob(pattern))


def _body(path: Path) -> bytes:
    """An issue sample without its `# SOURCE` header (the lines before the first that does not start with #
    are its provenance; Prometheus pages keep theirs: HELP/TYPE lines are comments too)."""
    lines = path.read_bytes().split(b"\n")
    at = next((i for i, line in enumerate(lines) if line and not line.startswith(b"#")), len(lines))
    return b"\n".join(lines[at:])


def _json_lines(path: Path) -> list[bytes]:
    """The JSON documents of an issue sample (a line that starts one, up to the next blank line)."""
    out: list[bytes] = []
    text = _body(path)
    for block in re.split(rb"\n\s*\n", text):
        start = re.search(rb"^[\[{]", block, re.MULTILINE)
        if start:
            out.append(block[start.start() :])
    return out or [text]


def prometheus_pages() -> list[bytes]:
    pages = _read(
        *_glob(REAL / "vllm-0.32.0-cpu", "metrics*.txt"),
        *_glob(REAL / "llamacpp-b1-0c1e570", "metrics*.txt"),
        REAL / "llamacpp-b1-0c1e570" / "apikey-metrics-no-key.txt",
        *_glob(FIXTURES / "litellm-prometheus", "metrics*.txt"),
        *_glob(FIXTURES / "exporters", "*.metrics"),
    )
    pages += [_body(p) for p in _glob(ISSUES, "*metrics*.txt")]
    return pages


def engine_pages(kind: str) -> list[bytes]:
    own = {
        "vllm": _glob(REAL / "vllm-0.32.0-cpu", "metrics*.txt"),
        "sglang": [],
        "llamacpp": _glob(REAL / "llamacpp-b1-0c1e570", "metrics*.txt"),
    }[kind]
    issue = [_body(p) for p in _glob(ISSUES, f"{kind}*metrics*.txt")]
    if kind == "llamacpp":
        issue += [_body(p) for p in _glob(ISSUES, "ikllamacpp*metrics*.txt")]
    return _read(*own) + issue


def host_outputs(prefix: str) -> list[bytes]:
    return [_body(p) for p in _glob(ISSUES, prefix + "*")]


def seeds_nvidia() -> list[bytes]:
    gpu = REAL / "gpu" / "nvidia-h200"
    return _read(*_glob(gpu, "query-*.csv")) + host_outputs("nvidia-smi")


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
    return _read(ROOT / "hosts.toml", *_glob(ROOT / "docs", "*.toml"))


def seeds_logs() -> list[bytes]:
    logs = _read(*_glob(FIXTURES / "log-lines", "*.log"), *_glob(FIXTURES / "log-lines", "*.txt"))
    examples = "\n".join(mode.example for mode in failure_modes.MODES).encode()
    return [*logs, examples, b"Authorization: Bearer sk-abc123\n--api-key sk-1 token: abc\x1b[2J\n"]


ALERT_SEEDS = [
    b"down\nqwen3-next\nnot answering: connection refused\nanswering again\ntp4-3090\ntp4-3090\n",
    b"stalled\nllama\nstalled: 3 requests running, no token for 31 s\n\nbox\nbox\nteam=ml\n",
    b"kv_full\nsglang-a\nKV cache 99% full\nKV 40%\n\nother\n",
    b"vram_gpu0\ntp4-3090\nGPU 0 VRAM 97%\n\n\ntp4-3090\nseverity=critical\n",
]


# -- mutation engine ------------------------------------------------------------------------------------------

NUMBERS = [
    b"-1", b"0", b"-0", b"1", b"-5", b"1e308", b"-1e308", b"1.7976931348623157e308", b"5e-324", b"1e-320",
    b"NaN", b"nan", b"+Inf", b"-Inf", b"inf", b"Infinity", b"-Infinity", b"1e999", b"9" * 400, b"1" + b"0" * 5000,
    b"18446744073709551616", b"-9223372036854775809", b"4294967296", b"1_000", b"0x10", b"1e", b".", b"-",
    b"+1", b"00012", b"1.5e+3", b"2.5", b"true", b"null",
]  # fmt: skip
TOKENS = [
    b"", b'"', b"\\", b'\\"', b"\\n", b"{", b"}", b"[", b"]", b"#", b"# TYPE ", b"# HELP ", b"\n", b"\r\n", b"\r",
    b"\x00", b"\xff", b"\xc3", b"\t", b",", b"=", b" ", b":", b"_total", b"_bucket", b'le="', b"\xe2\x80\xa8",
    b"\x1b[2J", b"\x1b]0;x\x07", b"[N/A]", b"N/A", b"Not Supported", b"{}", b"[]", b'{"', b'":', b"\xf0\x9f\x98\x80",
    b"[[engines]]", b"[[hosts]]", b' = "', b"Bearer ", b"token=", b"--api-key ",
]  # fmt: skip
_NUMBER = re.compile(rb"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|NaN|[-+]?Inf")


class Mutator:
    """Random mutations of a seed corpus, stacked one to four deep."""

    def __init__(
        self,
        seeds: list[bytes],
        rng: random.Random,
        excerpts: Excerpts | None = None,
        whole: float = 0.0,
        grow_to: int = MAX_INPUT,
    ) -> None:
        self.seeds = [s for s in seeds if s] or [b"x"]
        self.rng = rng
        self.excerpts = excerpts
        self.whole = whole
        """With excerpts: the share of inputs that start from a whole seed."""
        self.grow_to = grow_to
        """With excerpts: the longest an excerpt may grow (an input from a whole seed: MAX_INPUT)."""

    def _start(self) -> tuple[bytes, int]:
        """An input before mutation and how far it may grow: an excerpt of a seed where the target has them,
        else a seed (a large one mostly as a window of a few lines)."""
        rng = self.rng
        if self.excerpts is not None:
            if rng.random() < self.whole:
                return rng.choice(self.seeds), MAX_INPUT
            return self.excerpts(rng), self.grow_to
        data = rng.choice(self.seeds)
        if len(data) > 4096 and rng.random() < 0.7:
            data = self._window(data)
        return data, MAX_INPUT

    def _window(self, data: bytes) -> bytes:
        """A few consecutive lines of a large input (fast to parse: most inputs are small)."""
        lines = data.split(b"\n")
        start = self.rng.randrange(len(lines))
        return b"\n".join(lines[start : start + self.rng.randint(1, 40)]) + b"\n"

    def mutate_once(self, data: bytes) -> bytes:
        rng = self.rng
        n = len(data)
        op = rng.randrange(13)
        pos = rng.randint(0, n)
        if op == 0 and n:  # flip a bit
            i = rng.randrange(n)
            return data[:i] + bytes([data[i] ^ (1 << rng.randrange(8))]) + data[i + 1 :]
        if op == 1 and n:  # a random byte
            i = rng.randrange(n)
            return data[:i] + bytes([rng.randrange(256)]) + data[i + 1 :]
        if op == 2:  # insert random bytes
            return data[:pos] + rng.randbytes(rng.randint(1, 8)) + data[pos:]
        if op == 3 and n:  # delete a range
            end = min(n, pos + rng.randint(1, 64))
            return data[:pos] + data[end:]
        if op == 4:  # truncate
            return data[:pos]
        if op == 5 and n:  # duplicate a range
            start = rng.randrange(n)
            chunk = data[start : start + rng.randint(1, 256)]
            return data[:pos] + chunk + data[pos:]
        if op == 6:  # splice with another seed
            other = self.excerpts(rng) if self.excerpts is not None else rng.choice(self.seeds)
            return data[:pos] + other[rng.randint(0, len(other)) :]
        if op == 7:  # replace a number
            found = _NUMBER.search(data, pos) or _NUMBER.search(data)
            if found:
                return data[: found.start()] + rng.choice(NUMBERS) + data[found.end() :]
            return data[:pos] + rng.choice(NUMBERS) + data[pos:]
        if op == 8:  # a hostile token
            return data[:pos] + rng.choice(TOKENS) + data[pos:]
        if op == 9 and n:  # a run repeated many times (quadratic behaviour shows up here)
            start = rng.randrange(n)
            chunk = data[start : start + rng.randint(1, 8)] or b"-"
            return data[:pos] + chunk * rng.choice((64, 512, 4096, 20000)) + data[pos:]
        if op == 10 and n:  # swap two lines
            lines = data.split(b"\n")
            i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
            return b"\n".join(lines)
        if op == 11 and n:  # delete a line
            lines = data.split(b"\n")
            del lines[rng.randrange(len(lines))]
            return b"\n".join(lines)
        if op == 12 and n:  # duplicate a line (a repeated series, a second rank)
            lines = data.split(b"\n")
            i = rng.randrange(len(lines))
            lines.insert(rng.randrange(len(lines) + 1), lines[i])
            return b"\n".join(lines)
        return data + rng.choice(TOKENS)

    def __call__(self) -> bytes:
        rng = self.rng
        roll = rng.random()
        if roll < 0.04:
            return rng.randbytes(rng.randint(0, 512))
        if roll < 0.06:
            return bytes(rng.choice(b'{}[]",:#=\n \\0123456789.eE-+naif') for _ in range(rng.randint(0, 256)))
        data, limit = self._start()
        for _ in range(rng.randint(1, 4)):
            data = self.mutate_once(data)
            if len(data) > limit:
                data = data[:limit]
        return data


# -- invariants -------------------------------------------------------------------------------------------------


def _check(ok: bool, what: str) -> None:
    if not ok:
        raise Violation(what)


def sane_metrics(metrics: EngineMetrics) -> None:
    """What reaches the model from a page: finite, never negative (issue 35 item 3)."""
    for name, value in metrics.values.items():
        _check(math.isfinite(value) and (value >= 0 or name == "process_start_time"), f"{name} = {value!r}")
    for name, hist in metrics.histograms.items():
        _check(all(bound >= 0 for bound, _ in hist.buckets), f"{name}: a negative bound")
        _check(all(math.isfinite(c) and c >= 0 for _, c in hist.buckets), f"{name}: a bad bucket count")
        _check(math.isfinite(hist.sum) and hist.sum >= 0, f"{name}: sum {hist.sum!r}")
        _check(math.isfinite(hist.count) and hist.count >= 0, f"{name}: count {hist.count!r}")
    for rank in metrics.ranks:
        for known in (rank.requests_running, rank.requests_waiting, rank.kv_cache_usage):
            _check(known is None or (math.isfinite(known) and known >= 0), f"rank {rank.rank}: {known!r}")


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


# -- targets --------------------------------------------------------------------------------------------------


@dataclass
class Target:
    name: str
    what: str
    seeds: Callable[[], list[bytes]]
    run: Callable[[bytes], object]
    documented: tuple[type[BaseException], ...] = (ParseError,)
    reset: Callable[[], None] = field(default=lambda: None)
    """Called every few hundred inputs (a target with state, such as a page memo, starts over)."""
    max_input: int = MAX_INPUT
    unit: str | None = None
    """How its seeds may be cut to excerpts (fuzz_excerpts.SPLITTERS: prometheus, lines, toml); None: whole
    seeds only (the small targets, and JSON, which no cut keeps whole)."""


class MemoTarget:
    """An engine's mapping, read carefully and through a page memo that learnt a clean page first (the memo's
    state then follows the fuzzed pages, as an engine's memo follows its pages)."""

    def __init__(self, spec: MetricSpec, kind: str) -> None:
        self.spec = spec
        self.clean = engine_pages(kind)
        self.memo = PageMemo()
        self.rng = random.Random(0)

    def reset(self) -> None:
        self.memo = PageMemo()
        page = self.rng.choice(self.clean)
        for _ in range(2):
            try:
                parse_metrics(page, self.spec, self.memo)
            except ParseError:
                return

    def __call__(self, data: bytes) -> object:
        out = []
        for memo in (None, self.memo):
            try:
                metrics, _, _ = parse_metrics(data, self.spec, memo)
            except ParseError:
                continue
            sane_metrics(metrics)
            out.append(metrics)
        return out


def run_prom(data: bytes) -> object:
    exposition = prom.parse_exposition(data)
    for sample in exposition.samples:
        _check(isinstance(sample.value, float), "a sample value that is no float")
    return exposition


def run_slots(data: bytes) -> object:
    slots = jsonparse.parse_slots(data)
    _check(0 <= slots.busy_slots <= slots.total_slots, f"busy {slots.busy_slots} of {slots.total_slots}")
    _check(slots.ctx_used >= 0 and slots.ctx_total >= 0, "negative context")
    _check(slots.decoded is None or slots.decoded >= 0, "negative decoded tokens")
    return slots


def run_litellm_health(data: bytes) -> object:
    out: list[object] = []
    for parse in (
        jsonparse.parse_litellm_health,
        jsonparse.parse_litellm_liveliness,
        jsonparse.parse_litellm_readiness,
        jsonparse.parse_models,
    ):
        with contextlib.suppress(ParseError):
            out.append(parse(data))
    return out


def run_litellm_metrics(data: bytes) -> object:
    usage = litellm_usage.parse_usage(data)
    json.dumps(usage, allow_nan=True)
    for row in usage["limits"]:
        for key in ("used", "limit"):
            _check(row[key] is None or math.isfinite(row[key]), f"limit {key} {row[key]!r}")
    return usage


def run_nvidia(data: bytes) -> object:
    text = _text(data)
    out: list[object] = []
    for fields in (nvidia_smi.FULL_FIELDS, nvidia_smi.MINIMAL_FIELDS):
        result = nvidia_smi.parse_query_gpu(text, fields)
        for gpu in result.gpus:
            for key in ("memory_total_bytes", "memory_used_bytes", "utilization_pct", "temperature_c", "power_w"):
                value = getattr(gpu, key)
                _check(value is None or math.isfinite(value), f"{key} = {value!r}")
        out.append(result)
    out.append(nvidia_smi.parse_compute_apps(text))
    nvidia_smi.rejected_field(text)
    return out


def _gpus_finite(gpus: tuple[Any, ...]) -> None:
    for gpu in gpus:
        for key in ("memory_total_bytes", "memory_used_bytes", "utilization_pct", "temperature_c", "power_w"):
            value = getattr(gpu, key)
            _check(value is None or math.isfinite(value), f"{key} = {value!r}")


def run_rocm(data: bytes) -> object:
    gpus = systems.parse_rocm_smi(_text(data))
    _gpus_finite(gpus)
    return gpus


def run_amd(data: bytes) -> object:
    gpus = systems.parse_amd_smi(_text(data))
    _gpus_finite(gpus)
    return gpus


def run_macmon(data: bytes) -> object:
    memory, gpu = systems.parse_macmon(_text(data))
    _gpus_finite((gpu,))
    return memory


def run_macos(data: bytes) -> object:
    sysctl, _, vm_stat = _text(data).partition("\n--\n")
    return systems.parse_macos(sysctl, vm_stat)


def seeds_macos() -> list[bytes]:
    vm_stat = _body(ISSUES / "macos-vm_stat-sysctl-memsize-samples.txt")
    return [b"17179869184\n--\n" + vm_stat, b"hw.memsize: 8589934592\n--\n" + vm_stat]


def run_meminfo(data: bytes) -> object:
    memory = systems.parse_meminfo(_text(data))
    _check(memory.total_bytes is not None and memory.total_bytes >= 0, "negative MemTotal")
    return memory


def run_config(data: bytes) -> object:
    try:
        return parse_config(_text(data), "<fuzz>")
    except ConfigError as exc:
        _check(exc.source == "<fuzz>" and bool(exc.problems), "a ConfigError without its problems")
        _check(all(p.path for p in exc.problems), "a problem that names no key")
        _check("\x1b" not in exc.render(), "an escape in a rendered ConfigError")
        raise


def run_logs(data: bytes) -> object:
    text = _text(data)
    lines, _, _ = engine_logs.parse_read(text, 1 << 20)
    for line in lines:
        _check("\x1b" not in line and "\x00" not in line, f"a control character in a cleaned line: {line[:60]!r}")
    findings = failure_modes.diagnose(lines)
    for finding in findings:
        json.dumps(finding.to_json())
    failure_modes.diagnose(text.split("\n"))  # the raw lines too (a followed log's chunk)
    return findings


WEBHOOK_KEYS = {
    "version", "status", "receiver", "groupKey", "truncatedAlerts", "groupLabels", "commonLabels",
    "commonAnnotations", "externalURL", "alerts",
}  # fmt: skip
WEBHOOK_ALERT_KEYS = {"status", "labels", "annotations", "startsAt", "endsAt", "generatorURL", "fingerprint"}
API_ALERT_KEYS = {"labels", "annotations", "startsAt", "endsAt"}


def _alerts(data: bytes) -> tuple[str, list[notify.Alert]]:
    """Alerts built from fuzzed text: rule, target, message, cleared words, the engine's host, a host name,
    then `key=value` labels. Times come from the input's bytes, within what a clock can say."""
    parts = _text(data).split("\n")
    parts += [""] * (6 - len(parts))
    rule, target, message, cleared, engine_host, host = parts[:6]
    engines = {target: engine_host or None} if len(data) % 2 else {}
    seed = int.from_bytes(data[:8].ljust(8, b"\0"), "little")
    alerts: list[notify.Alert] = []
    for i in range(1 + seed % 3):
        labels = notify.labels_for(rule, target + ("" if i == 0 else f"-{i}"), engines, [host])
        for extra in parts[6:]:
            key, sep, value = extra.partition("=")
            if sep:
                labels[key] = value
        start = (seed >> (8 * i)) % 4_102_444_800  # up to 2100
        ends = None if (seed >> i) % 2 else start + (seed % 86_400)
        alert = notify.Alert(rule, labels.get("target", target), labels, message, float(start), ends)
        alert.cleared = cleared or None
        alerts.append(alert)
    return rule, alerts


def run_notify(data: bytes) -> object:
    rule, alerts = _alerts(data)
    body = notify.webhook_body(rule, alerts, "http://poolconsole.example:9300")
    wire = json.loads(json.dumps(body, allow_nan=False))
    _check(set(wire) == WEBHOOK_KEYS, f"webhook keys {sorted(wire)}")
    _check(wire == body, "the webhook body does not survive JSON")
    _check(wire["status"] in ("firing", "resolved") and wire["version"] == "4", "webhook status/version")
    for item in wire["alerts"]:
        _check(set(item) == WEBHOOK_ALERT_KEYS, f"webhook alert keys {sorted(item)}")
        _check(all(isinstance(v, str) for v in item["labels"].values()), "a label value that is no string")
        _check("alertname" in item["labels"] and "summary" in item["annotations"], "alertname / summary")
        _check(re.fullmatch(r"[0-9a-f]{16}", item["fingerprint"]) is not None, "fingerprint")
    for alert in alerts:
        api = json.loads(json.dumps(notify.alertmanager_alert(alert, alert.starts_at + 1, 60.0), allow_nan=False))
        _check(set(api) == API_ALERT_KEYS, f"alertmanager alert keys {sorted(api)}")
        _check(api["startsAt"].endswith("Z") and api["endsAt"].endswith("Z"), "RFC 3339 times")
    message = notify.ntfy_message(rule, alerts)
    _check(1 <= message.priority <= 5 and isinstance(message.title, str), "ntfy priority / title")
    message.title.encode("utf-8")
    return wire


# -- the differential: the fast paths against prometheus_client ---------------------------------------------------

Key = tuple[str, tuple[tuple[str, str], ...], tuple[bool, float]]
"""A sample as compared: NaN equals NaN (and sorts after every number)."""


def reference_samples(text: str) -> list[prom.Sample] | None:
    """prometheus_client's samples of a page, normalised as prom.py normalises (`_created` dropped, `vllm_x`
    read as `vllm:x`, labels sorted); None when prometheus_client refuses the page."""
    from prometheus_client.parser import text_string_to_metric_families

    try:
        families = list(text_string_to_metric_families(text))
    except Exception:  # it raises ValueError, IndexError, KeyError, TypeError...
        return None
    out: list[prom.Sample] = []
    for family in families:
        for s in family.samples:
            if s.name.endswith("_created"):
                continue
            out.append(prom.Sample(prom._normalise_name(s.name), tuple(sorted(s.labels.items())), _float(s.value)))
    return out


def _float(value: float) -> float:
    """prometheus_client keeps an integer past a float's range as an int: it reads as the infinity that
    float() of its text gives (prom.py's reading), not an OverflowError in the comparison."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def sample_keys(samples: list[prom.Sample]) -> list[Key]:
    return sorted((s.name, s.labels, (True, 0.0) if math.isnan(s.value) else (False, s.value)) for s in samples)


def metric_keys(metrics: EngineMetrics, missing: dict[str, str]) -> dict[str, Any]:
    """What a page's read gives the model, for comparison (the series count aside: the careful read counts
    sample lines, the reference its samples)."""
    return {
        "values": dict(metrics.values),
        "histograms": {k: (h.buckets, h.sum, h.count) for k, h in metrics.histograms.items()},
        "ranks": metrics.ranks,
        "models": metrics.model_names,
        "missing": dict(sorted(missing.items())),
    }


def differences(text: str, spec: MetricSpec = specs.VLLM, memo: PageMemo | None = None) -> list[str]:
    """Where prometheus_client accepts the page: how prom.py's fast path, its selection and a page memo that
    learnt `text`'s layout differ from it (empty when they agree, or when prometheus_client refuses)."""
    try:
        prom.decode(text)
    except ParseError:
        return []  # refused before any parsing, on purpose (NUL bytes, HTML, JSON): no page to compare
    reference = reference_samples(text)
    if reference is None:
        return []
    found: list[str] = []
    expected = sample_keys(reference)
    fast = prom._fast(text)
    if fast is not None and sample_keys(fast) != expected:
        found.append(f"fast path: {_diff(sample_keys(fast), expected)}")
    wanted = prom.exposed(spec.wanted)
    expected_wanted = [k for k in expected if _selected(k[0], spec)]
    try:
        selected = prom.parse_exposition(text, spec.wanted, spec.prefix)
    except ParseError as exc:
        if expected_wanted:  # refusing a page of garbage names (`\x08vllm:x{...}`, read by none) loses nothing
            found.append(f"selection refused a page whose wanted samples prometheus_client reads: {exc}")
        return found
    got = [k for k in sample_keys(selected.samples) if _selected(k[0], spec)]  # selection is a pre-filter: it
    # may keep a line of a wanted family's block that is no wanted sample (`vllm:x_to;tal{...}`), read by none
    if got != expected_wanted:
        found.append(f"selection ({sorted(wanted)[:3]}...): {_diff(got, expected_wanted)}")
    want_metrics = metric_keys(*metrics_from_samples([s for s in reference if _selected(s.name, spec)], spec))
    careful, missing, _ = parse_metrics(text, spec)
    if metric_keys(careful, missing) != want_metrics:
        found.append("careful read: " + _diff_dict(metric_keys(careful, missing), want_metrics))
    if memo is not None:
        try:
            fast_metrics, fast_missing, _ = parse_metrics(text, spec, memo)
        except ParseError as exc:
            found.append(f"page memo refused a page prometheus_client reads: {exc}")
        else:
            if metric_keys(fast_metrics, fast_missing) != want_metrics:
                found.append("page memo: " + _diff_dict(metric_keys(fast_metrics, fast_missing), want_metrics))
    return found


def _selected(name: str, spec: MetricSpec) -> bool:
    """A sample the selection keeps: its line's name is wanted (a counter's sample gains `_total` after)."""
    return name in spec.wanted or name.removesuffix("_total") in spec.wanted


def _diff(got: list[Key], want: list[Key]) -> str:
    extra = [k for k in got if k not in want][:2]
    lost = [k for k in want if k not in got][:2]
    return f"{len(got)} samples vs prometheus_client's {len(want)}; ours only: {extra}; theirs only: {lost}"


def _diff_dict(got: dict[str, Any], want: dict[str, Any]) -> str:
    return "; ".join(f"{k}: {got[k]!r:.200} != {want[k]!r:.200}" for k in want if got.get(k) != want[k])


class DiffTarget:
    """The differential: a mutated page against prometheus_client, also through a memo that learnt the page's
    layout from the page itself with other values (the memo's fast read of a layout it knows)."""

    def __init__(self) -> None:
        self.rng = random.Random(1)

    def __call__(self, data: bytes) -> object:
        text = _text(data)
        if "\x00" in text or not text.strip() or text.lstrip()[:1] in ("<", "{", "[", '"'):
            return None  # decode() refuses these before any parser: not a page either reads
        memo = PageMemo()
        spec = specs.VLLM if "vllm" in text else specs.SGLANG if "sglang" in text else specs.LLAMACPP
        with contextlib.suppress(ParseError):
            parse_metrics(_NUMBER.sub(b"7", data).decode("utf-8", "replace"), spec, memo)  # same layout
        found = differences(text, spec, memo)
        if found:
            raise Violation(" | ".join(found))
        return None


# -- the table of targets ---------------------------------------------------------------------------------------


def _memo_target(name: str, spec: MetricSpec, kind: str) -> Target:
    runner = MemoTarget(spec, kind)
    return Target(
        name,
        f"collect/engines/mapping.py with the {kind} spec, careful and through a page memo",
        lambda: engine_pages(kind),
        runner,
        reset=runner.reset,
        unit="prometheus",
    )


def targets() -> dict[str, Target]:
    found = [
        Target(
            "prom", "collect/prom.py parse_exposition (every sample)", prometheus_pages, run_prom, unit="prometheus"
        ),
        _memo_target("vllm", specs.VLLM, "vllm"),
        _memo_target("sglang", specs.SGLANG, "sglang"),
        _memo_target("llamacpp", specs.LLAMACPP, "llamacpp"),
        Target(
            "slots",
            "llama.cpp /slots (jsonparse.parse_slots)",
            lambda: _read(*_glob(REAL / "llamacpp-b1-0c1e570", "slots*.json")),
            run_slots,
        ),
        Target(
            "ollama_ps",
            "Ollama /api/ps (jsonparse.parse_ollama_ps)",
            lambda: _json_lines(ISSUES / "ollama-api-ps-2025-08-nirmato-issue13.txt"),
            jsonparse.parse_ollama_ps,
        ),
        Target(
            "litellm_health",
            "LiteLLM /health, /health/liveliness, /health/readiness, /v1/models",
            lambda: (
                _read(*_glob(REAL / "litellm-1.108.7", "health*.json"), REAL / "litellm-1.108.7" / "v1-models.json")
                + _json_lines(ISSUES / "litellm-health-2024-07-issue4728.txt")
            ),
            run_litellm_health,
        ),
        Target(
            "litellm_metrics",
            "LiteLLM /metrics (litellm_usage.parse_usage)",
            lambda: [
                *_read(*_glob(FIXTURES / "litellm-prometheus", "metrics*.txt")),
                _body(ISSUES / "litellm-metrics-2024-09-pr5789.txt"),
            ],
            run_litellm_metrics,
            unit="prometheus",
        ),
        Target("nvidia_smi", "nvidia-smi --query-gpu / --query-compute-apps CSV", seeds_nvidia, run_nvidia, ()),
        Target("rocm_smi", "rocm-smi --json (systems.parse_rocm_smi)", lambda: host_outputs("rocm-smi"), run_rocm),
        Target(
            "amd_smi",
            "amd-smi metric --json (systems.parse_amd_smi)",
            lambda: _read(FIXTURES / "amd-smi-metric-radeon890m.json") + host_outputs("amd-"),
            run_amd,
        ),
        Target("macmon", "macmon pipe JSON (systems.parse_macmon)", lambda: host_outputs("macmon"), run_macmon),
        Target("macos", "sysctl hw.memsize + vm_stat (systems.parse_macos)", seeds_macos, run_macos),
        Target("meminfo", "/proc/meminfo (systems.parse_meminfo)", seeds_meminfo, run_meminfo),
        # 16 KiB: Python's tomllib is quadratic in a dotted key's length (a 160 KB key of `a.a.a...` takes
        # seconds): a finding left to the config loader (BENCHMARKS.md), kept out of the count here.
        Target(
            "config",
            "hosts.toml (config/load.py parse_config)",
            seeds_config,
            run_config,
            (ConfigError,),
            max_input=16384,
            unit="toml",
        ),
        Target(
            "logs",
            "engine log reads: engine_logs.parse_read (clean, redact) + failure_modes.diagnose",
            seeds_logs,
            run_logs,
            (),
            unit="lines",
        ),
        Target(
            "notify",
            "the watcher's webhook / Alertmanager / ntfy payloads (model/notify.py)",
            lambda: ALERT_SEEDS,
            run_notify,
            (),
        ),
        Target(
            "prom_diff",
            "prom.py fast path, selection and page memo against prometheus_client",
            prometheus_pages,
            DiffTarget(),
            (),
            unit="prometheus",
        ),
    ]
    return {t.name: t for t in found}


# -- the driver -----------------------------------------------------------------------------------------------------


@dataclass
class Result:
    target: str
    inputs: int = 0
    crashes: int = 0
    seconds: float = 0.0
    slowest_s: float = 0.0
    slowest_size: int = 0
    examples: list[str] = field(default_factory=list)
    crash_inputs: list[bytes] = field(default_factory=list)


def _alarm(signum: int, frame: FrameType | None) -> None:
    raise Hang()


@dataclass(frozen=True)
class Cuts:
    """How a target's seeds are cut and how far mutations may grow them (libFuzzer's `-max_len`)."""

    max_len: int = MAX_LEN
    """The longest excerpt of a seed; 0: whole seeds, as before excerpts (and for a target without a unit)."""
    max_grow: int = MAX_GROWN
    """The longest mutated excerpt (never more than the target's max_input)."""
    whole: float = WHOLE_SEEDS
    """The share of inputs mutated from a whole seed."""


def inputs(target: Target, seed: int, cuts: Cuts = Cuts()) -> Iterator[bytes]:
    seeds = target.seeds()
    if target.unit is None or cuts.max_len <= 0:
        mutator = Mutator(seeds, random.Random(seed))
        cap = target.max_input
        fixed: list[bytes] = []
    else:
        excerpts = Excerpts(seeds, target.unit, cuts.max_len)
        grow_to = max(cuts.max_grow, cuts.max_len)
        mutator = Mutator(seeds, random.Random(seed), excerpts, cuts.whole, grow_to)
        cap = target.max_input  # an input from a whole seed may grow up to it; an excerpt up to grow_to
        fixed = excerpts.fixed()
    yield from seeds  # every seed once, as it is
    yield from fixed  # and every seed in excerpts, once
    while True:
        yield mutator()[:cap]


def run_target(
    target: Target,
    count: int | None = None,
    seconds: float | None = None,
    seed: int = 0,
    hang_s: float = 10.0,
    keep: int = 5,
    cuts: Cuts = Cuts(),
) -> Result:
    """Fuzz one target until `count` inputs or `seconds` have passed (whichever comes first)."""
    result = Result(target.name)
    use_alarm = hang_s > 0 and hasattr(signal, "setitimer")
    if use_alarm:
        previous = signal.signal(signal.SIGALRM, _alarm)
    started = time.perf_counter()
    target.reset()
    try:
        for data in inputs(target, seed, cuts):
            if count is not None and result.inputs >= count:
                break
            if seconds is not None and time.perf_counter() - started >= seconds:
                break
            if result.inputs % 500 == 499:
                target.reset()
            result.inputs += 1
            t0 = time.perf_counter()
            failure: str | None = None
            if use_alarm:
                signal.setitimer(signal.ITIMER_REAL, hang_s)
            try:
                target.run(data)
            except Hang:
                failure = f"Hang: more than {hang_s} s"
            except target.documented:
                pass
            except Exception as exc:  # what the fuzzer is here to find
                where = traceback.extract_tb(exc.__traceback__)[-1]
                failure = f"{type(exc).__name__}: {exc} (at {Path(where.filename).name}:{where.lineno})"
            finally:
                if use_alarm:
                    signal.setitimer(signal.ITIMER_REAL, 0)
            took = time.perf_counter() - t0
            if took > result.slowest_s:
                result.slowest_s, result.slowest_size = took, len(data)
            if failure is not None:
                result.crashes += 1
                if len(result.examples) < keep:
                    result.examples.append(f"{failure[:300]} <- {data[:200]!r} ({len(data)} bytes)")
                    result.crash_inputs.append(data)
    finally:
        if use_alarm:
            signal.signal(signal.SIGALRM, previous)
    result.seconds = time.perf_counter() - started
    return result


def main(argv: list[str] | None = None) -> int:
    every = targets()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--target", action="append", choices=sorted(every), help="one target (repeatable); default all")
    parser.add_argument("--count", type=int, help="inputs per target")
    parser.add_argument("--seconds", type=float, help="seconds per target")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--hang-seconds", type=float, default=10.0, help="an input slower than this is a crash")
    parser.add_argument(
        "--max-len", type=int, default=MAX_LEN, help="longest seed excerpt in bytes (0: whole seeds, no excerpts)"
    )
    parser.add_argument("--max-grow", type=int, default=MAX_GROWN, help="longest mutated excerpt in bytes")
    parser.add_argument("--whole-seeds", type=float, default=WHOLE_SEEDS, help="share of inputs from whole seeds")
    parser.add_argument("--crash-dir", type=Path, help="write each crashing input there")
    parser.add_argument("--json", type=Path, help="write the results there as JSON")
    parser.add_argument("--list", action="store_true", help="list the targets")
    args = parser.parse_args(argv)
    if args.list:
        for t in every.values():
            print(f"{t.name:16} {t.what}")
        return 0
    if args.count is None and args.seconds is None:
        args.seconds = 10.0
    chosen = [every[n] for n in (args.target or every)]
    print(f"{'target':16} {'inputs':>10} {'crashes':>8} {'slowest':>10} {'its size':>10} {'inputs/s':>9}", flush=True)
    results: list[Result] = []
    for target in chosen:
        cuts = Cuts(args.max_len, args.max_grow, args.whole_seeds)
        result = run_target(target, args.count, args.seconds, args.seed, args.hang_seconds, cuts=cuts)
        results.append(result)
        rate = result.inputs / result.seconds if result.seconds else 0.0
        print(
            f"{result.target:16} {result.inputs:>10,} {result.crashes:>8,} {result.slowest_s * 1000:>8.1f}ms "
            f"{result.slowest_size:>10,} {rate:>9,.0f}",
            flush=True,
        )
        for example in result.examples:
            print(f"    crash: {example}", flush=True)
        if args.crash_dir is not None:
            args.crash_dir.mkdir(parents=True, exist_ok=True)
            for i, data in enumerate(result.crash_inputs):
                (args.crash_dir / f"{result.target}-{args.seed}-{i}.bin").write_bytes(data)
    if args.json is not None:
        rows = [
            {k: v for k, v in vars(r).items() if k != "crash_inputs"}
            | {"seed": args.seed, "count": args.count, "max_len": args.max_len}
            for r in results
        ]
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 1 if any(r.crashes for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["Target", "main", "run_target", "targets"]
