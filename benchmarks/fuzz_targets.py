"""The targets of benchmarks/fuzz.py: each parser poolconsole reads the outside world with, its seeds, and the
invariants a result must keep (a broken one counts as a crash)."""

from __future__ import annotations

import contextlib
import json
import math
import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from benchmarks.fuzz_diff import differences
from benchmarks.fuzz_mutate import MAX_INPUT, NUMBER
from benchmarks.fuzz_seeds import (
    ALERT_SEEDS,
    FIXTURES,
    ISSUES,
    REAL,
    capture_body,
    engine_pages,
    host_outputs,
    json_documents,
    prometheus_pages,
    read_files,
    seeds_config,
    seeds_logs,
    seeds_macos,
    seeds_meminfo,
    seeds_nvidia,
    sorted_glob,
)
from poolconsole.collect import engine_logs, prom
from poolconsole.collect.engines import jsonparse, litellm_usage, specs
from poolconsole.collect.engines.mapping import MetricSpec, parse_metrics
from poolconsole.collect.engines.page_memo import PageMemo
from poolconsole.collect.hosts import nvidia_smi, systems
from poolconsole.collect.prom import ParseError
from poolconsole.config.load import ConfigError, parse_config
from poolconsole.model import failure_modes, notify
from poolconsole.model.snapshots import EngineMetrics


class Violation(AssertionError):
    """A target's invariant broken (counted as a crash)."""


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
            parse_metrics(NUMBER.sub(b"7", data).decode("utf-8", "replace"), spec, memo)  # same layout
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
            lambda: read_files(*sorted_glob(REAL / "llamacpp-b1-0c1e570", "slots*.json")),
            run_slots,
        ),
        Target(
            "ollama_ps",
            "Ollama /api/ps (jsonparse.parse_ollama_ps)",
            lambda: json_documents(ISSUES / "ollama-api-ps-2025-08-nirmato-issue13.txt"),
            jsonparse.parse_ollama_ps,
        ),
        Target(
            "litellm_health",
            "LiteLLM /health, /health/liveliness, /health/readiness, /v1/models",
            lambda: (
                read_files(
                    *sorted_glob(REAL / "litellm-1.108.7", "health*.json"), REAL / "litellm-1.108.7" / "v1-models.json"
                )
                + json_documents(ISSUES / "litellm-health-2024-07-issue4728.txt")
            ),
            run_litellm_health,
        ),
        Target(
            "litellm_metrics",
            "LiteLLM /metrics (litellm_usage.parse_usage)",
            lambda: [
                *read_files(*sorted_glob(FIXTURES / "litellm-prometheus", "metrics*.txt")),
                capture_body(ISSUES / "litellm-metrics-2024-09-pr5789.txt"),
            ],
            run_litellm_metrics,
            unit="prometheus",
        ),
        Target("nvidia_smi", "nvidia-smi --query-gpu / --query-compute-apps CSV", seeds_nvidia, run_nvidia, ()),
        Target("rocm_smi", "rocm-smi --json (systems.parse_rocm_smi)", lambda: host_outputs("rocm-smi"), run_rocm),
        Target(
            "amd_smi",
            "amd-smi metric --json (systems.parse_amd_smi)",
            lambda: read_files(FIXTURES / "amd-smi-metric-radeon890m.json") + host_outputs("amd-"),
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
