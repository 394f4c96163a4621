"""Golden files per engine and host-tool version (issue 35): every real capture in tests/fixtures/real/,
normalized the way `poolconsole status --json` shows an engine or a host, kept as JSON under
tests/fixtures/golden/ and compared whole (as node_exporter diffs its whole output). A changed mapping,
alias or parser shows up as a readable diff of every value it moves.

No network: a /metrics page goes through the engine's MetricSpec (collect.engines.mapping) and
model.view.engine_view; a host tool's output through collect.hosts (nvidia_smi, systems) into a
HostSnapshot and its `to_json`. What depends on time (a poll's timestamps and latency, rates needing two
pages) is left out; counters and gauges stay as read, unknowns null with the reasons the model carries.

Regenerate on purpose: POOLCONSOLE_UPDATE_GOLDEN=1 pytest tests/unit/test_golden.py, or
scripts/update-golden.py.
"""

from __future__ import annotations

import difflib
import fnmatch
import json
import os
import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

from poolconsole.collect.engines import jsonparse, specs
from poolconsole.collect.engines.kinds.llamacpp import cache_queries
from poolconsole.collect.engines.mapping import MetricSpec, parse_metrics
from poolconsole.collect.engines.scratch import ALL_METRICS
from poolconsole.collect.hosts import nvidia_smi as nv
from poolconsole.collect.hosts import systems
from poolconsole.collect.hosts.poll import HostPoller
from poolconsole.config.models import EngineKind
from poolconsole.model.hosts import GpuProcess, GpuReading, HostSnapshot, HostState, SystemMemory
from poolconsole.model.snapshots import EngineMetrics, EngineSnapshot, EngineState
from poolconsole.model.view import engine_view

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
REAL = FIXTURES / "real"
GOLDEN = FIXTURES / "golden"
SAMPLES = REAL / "issue-samples"
HINT = (
    "regenerate on purpose: POOLCONSOLE_UPDATE_GOLDEN=1 pytest tests/unit/test_golden.py, or scripts/update-golden.py"
)

ENGINE_TIME_FIELDS = ("polled_at", "last_ok_at", "latency_ms", "window_s")
"""Wall-clock stamps and the GET's latency: different on every poll, not the capture's."""
HOST_TIME_FIELDS = ("polled_at", "rtt_ms")

Builder = Callable[[Path], dict[str, Any]]

# -- engines ---------------------------------------------------------------------------------------

SPECS = {"vllm": specs.VLLM, "sglang": specs.SGLANG, "llamacpp": specs.LLAMACPP}


def _engine_doc(snap: EngineSnapshot) -> dict[str, Any]:
    doc = engine_view([snap]).to_json()
    for name in ENGINE_TIME_FIELDS:
        doc.pop(name)
    return doc


def _metrics_page(
    page: str, kind: str, name: str, version: str | None = None, models: tuple[str, ...] = ()
) -> dict[str, Any]:
    """What EnginePoller._read_metrics makes of one /metrics page, then engine_view of that one poll."""
    spec: MetricSpec = SPECS[kind]
    metrics, missing, exposition = parse_metrics(page, spec)
    state, errors = EngineState.OK, []
    if exposition.bad_lines:
        state = EngineState.DEGRADED
        errors.append(
            f"/metrics: {exposition.bad_lines} line(s) could not be parsed and were dropped "
            f"(first: {exposition.first_bad!r})"
        )
    current: EngineMetrics | None = metrics
    if metrics.series == 0:
        state = EngineState.DEGRADED
        errors.append(f"/metrics has no {spec.prefix}* series")
        current = None
    elif kind == "llamacpp":
        metrics, missing = cache_queries(metrics, missing)
        current = metrics
    if state is not EngineState.OK:
        present = set(current.values) | set(current.histograms) if current else set()
        reason = f"no {spec.prefix}* series in /metrics" if current is None else f"engine {state.value}"
        for metric in ALL_METRICS:
            if metric not in present:
                missing.setdefault(metric, reason)
    snap = EngineSnapshot(
        name=name,
        kind=EngineKind(kind),
        url=f"capture:{name}",
        host=None,
        fetched_at=0.0,
        monotonic=0.0,
        state=state,
        error="; ".join(errors) or None,
        source="GET /metrics",
        version=version,
        models=models,
        metrics=current,
        missing=MappingProxyType(missing),
    )
    return _engine_doc(snap)


def _vllm_folder(path: Path) -> dict[str, Any]:
    folder = path.parent
    return _metrics_page(
        path.read_text(),
        "vllm",
        _rel(path),
        jsonparse.parse_version((folder / "version.json").read_bytes()),
        jsonparse.parse_models((folder / "v1_models.json").read_bytes()),
    )


def _llamacpp_folder(path: Path) -> dict[str, Any]:
    folder = path.parent
    return _metrics_page(
        path.read_text(),
        "llamacpp",
        _rel(path),
        jsonparse.parse_props_build((folder / "props.json").read_bytes()),
        jsonparse.parse_models((folder / "v1-models.json").read_bytes()),
    )


def _sample_page(kind: str) -> Builder:
    return lambda path: _metrics_page(path.read_text(), kind, _rel(path))


def _litellm_gateway(path: Path) -> dict[str, Any]:
    """What EnginePoller._poll_litellm makes of the proxy's liveliness, readiness and /v1/models answers
    (its /metrics was not captured: the gateway-usage reason says so)."""
    folder = path.parent
    alive = jsonparse.parse_litellm_liveliness((folder / "health-liveliness.json").read_bytes())
    readiness = jsonparse.parse_litellm_readiness((folder / "health-readiness.json").read_bytes())
    state = EngineState.OK if alive and readiness.get("status") == "healthy" else EngineState.DEGRADED
    reason = "LiteLLM is a gateway: per-engine metrics come from the engines"
    snap = EngineSnapshot(
        name=_rel(folder),
        kind=EngineKind.LITELLM,
        url=f"capture:{_rel(folder)}",
        host=None,
        fetched_at=0.0,
        monotonic=0.0,
        state=state,
        source="GET /health/liveliness, /health/readiness, /v1/models",
        models=jsonparse.parse_models((folder / "v1-models.json").read_bytes()),
        missing=MappingProxyType(dict.fromkeys(ALL_METRICS, reason)),
        extra=MappingProxyType({"readiness": readiness, "gateway_usage_unknown": "no /metrics page in this capture"}),
    )
    return _engine_doc(snap)


# -- hosts -----------------------------------------------------------------------------------------


def _host_doc(
    name: str,
    source: str,
    gpus: tuple[GpuReading, ...],
    memory: SystemMemory | None = None,
    processes: tuple[GpuProcess, ...] = (),
    memory_kind: str = "dedicated",
    notes: tuple[str, ...] = (),
) -> dict[str, Any]:
    state = HostState.OK if gpus else HostState.DEGRADED
    snap = HostSnapshot(
        name,
        f"capture:{name}",
        state,
        None if gpus else f"{source} listed no GPU",
        source=source,
        memory_kind=memory_kind,
        gpus=gpus,
        processes=processes,
        system_memory=memory,
        notes=notes,
    )
    doc = snap.to_json()
    for field in HOST_TIME_FIELDS:
        doc.pop(field)
    return doc


def _csv_tables(text: str) -> list[tuple[list[str], list[str]]]:
    """Every `--format=csv` table in a text: (field names without units, data lines)."""
    lines = text.splitlines()
    tables: list[tuple[list[str], list[str]]] = []
    for i, line in enumerate(lines):
        names = [h.strip().split(" [")[0] for h in line.split(", ")]
        if "name" not in names and "memory.total" not in names:
            continue
        rows = []
        for data in lines[i + 1 :]:
            if len(data.split(", ")) != len(names):
                break
            rows.append(data)
        if rows:
            tables.append((names, rows))
    return tables


def _query_gpu(text: str) -> tuple[GpuReading, ...] | None:
    """The GPUs of a `--query-gpu --format=csv` capture, read for the poller's FULL_FIELDS that it has
    (a field the driver was not asked for is one the poller would have dropped: unknown)."""
    for names, rows in _csv_tables(text):
        if "memory.total" not in names:
            continue
        fields = tuple(f for f in nv.FULL_FIELDS if f in names)
        lines = []
        for row in rows:
            values = dict(zip(names, (v.strip() for v in row.split(", ")), strict=True))
            lines.append(", ".join(values[f] for f in fields))
        parsed = nv.parse_query_gpu("\n".join(lines), fields)
        if parsed.unified:
            return tuple(replace(g, memory_source="system") for g in parsed.gpus)
        return parsed.gpus
    return None


def _compute_apps(text: str) -> tuple[GpuProcess, ...]:
    for names, rows in _csv_tables(text):
        if "pid" not in names:
            continue
        used = "used_memory" if "used_memory" in names else "used_gpu_memory"
        fields = ("gpu_uuid", "pid", "process_name", used)
        out = []
        for row in rows:
            values = dict(zip(names, (v.strip() for v in row.split(", ")), strict=True))
            out.append(", ".join(values[f] for f in fields))
        return nv.parse_compute_apps("\n".join(out), fields)
    return ()


def _h200(path: Path) -> dict[str, Any]:
    """An H200 all-fields capture with the compute apps of the same moment (idle / load)."""
    gpus = _query_gpu(path.read_text()) or ()
    moment = path.name.split(".")[-2]
    apps = path.parent / f"query-compute-apps.{moment}.csv"
    processes = nv.parse_compute_apps(apps.read_text()) if apps.exists() else ()
    return _host_doc(_rel(path), "nvidia-smi", gpus, processes=processes)


def _nvidia_sample(path: Path) -> dict[str, Any]:
    text = path.read_text()
    gpus = _query_gpu(text) or ()
    notes: list[str] = []
    memory = None
    kind = "dedicated"
    if gpus and all(g.memory_source == "system" for g in gpus):  # GB10: what HostPoller does with meminfo
        kind = "unified"
        meminfo = "\n".join(ln.strip() for ln in text.splitlines() if ln.strip().startswith("Mem"))
        memory = systems.parse_meminfo(meminfo) if meminfo else None
        gpus = tuple(HostPoller._unified(g, memory) for g in gpus)
        notes.append("GPU memory reads [N/A] (unified memory): memory from /proc/meminfo")
    return _host_doc(_rel(path), "nvidia-smi", gpus, memory, _compute_apps(text), kind, tuple(notes))


def _json_part(text: str) -> str:
    start = text.index("\n{") + 1
    depth = 0
    for i, ch in enumerate(text[start:], start):
        depth += ch == "{"
        depth -= ch == "}"
        if depth == 0:
            return text[start : i + 1]
    raise ValueError("no JSON object")


def _rocm_smi(path: Path) -> dict[str, Any]:
    return _host_doc(_rel(path), "rocm-smi", systems.parse_rocm_smi(_json_part(path.read_text())))


def _macmon(path: Path) -> dict[str, Any]:
    line = next(ln for ln in path.read_text().splitlines() if ln.startswith('{"all_power"'))
    memory, gpu = systems.parse_macmon(line)
    return _host_doc(_rel(path), "macos", (gpu,), memory, memory_kind="unified")


def _macos_vm_stat(path: Path) -> dict[str, Any]:
    """sysctl hw.memsize (c) with the vm_stat of (a), as HostPoller._macos without macmon."""
    text = path.read_text()
    vm_stat = text[text.index("Mach Virtual") : text.index("--- (b)")]
    memsize = re.search(r"^hw\.memsize: (\d+)$", text, re.MULTILINE)
    assert memsize is not None
    memory = systems.parse_macos(memsize.group(1) + "\n", vm_stat)
    total, available = memory.total_bytes, memory.available_bytes
    used = total - available if total is not None and available is not None else None
    gpu = GpuReading(0, "Apple GPU", None, total, used, None, None, None, None, memory_source="system")
    notes = ("install macmon for GPU power and utilisation (no sudo needed)",)
    return _host_doc(_rel(path), "macos", (gpu,), memory, memory_kind="unified", notes=notes)


# -- the capture set -------------------------------------------------------------------------------

BUILDERS: tuple[tuple[str, Builder], ...] = (
    ("vllm-0.32.0-cpu/metrics.*.txt", _vllm_folder),
    ("vllm-0.32.0-cpu/enginedead.metrics.200.txt", _vllm_folder),
    ("llamacpp-b1-0c1e570/metrics-*.txt", _llamacpp_folder),
    ("litellm-1.108.7/health-readiness.json", _litellm_gateway),
    ("gpu/nvidia-h200/query-gpu.all-fields.*.csv", _h200),
    ("issue-samples/vllm-metrics-*.txt", _sample_page("vllm")),
    ("issue-samples/sglang-metrics-*.txt", _sample_page("sglang")),
    ("issue-samples/llamacpp-metrics-*.txt", _sample_page("llamacpp")),
    ("issue-samples/ikllamacpp-metrics-*.txt", _sample_page("llamacpp")),
    ("issue-samples/nvidia-smi-rtx4080super-*.txt", _nvidia_sample),
    ("issue-samples/nvidia-smi-610-kmd-*.txt", _nvidia_sample),
    ("issue-samples/nvidia-smi-query-gb10-*.txt", _nvidia_sample),
    ("issue-samples/rocm-smi-json-*.txt", _rocm_smi),
    ("issue-samples/macmon-pipe-json-*.txt", _macmon),
    ("issue-samples/macos-vm_stat-*.txt", _macos_vm_stat),
)
"""Capture (glob under tests/fixtures/real/) -> how `status --json` would show it."""

NOT_NORMALIZED: tuple[tuple[str, str], ...] = (
    ("*.md", "provenance notes"),
    ("*.headers.txt", "HTTP headers of a capture"),
    ("vllm-0.32.0-cpu/metrics.load.summary.json", "the capture script's own summary, not an engine answer"),
    ("vllm-0.32.0-cpu/enginedead.*", "a dead engine's answers: no page to normalize"),
    ("vllm-0.32.0-cpu/*", "request/response bodies of the API, not status fields"),
    ("llamacpp-b1-0c1e570/*", "request/response bodies of the API (version, models: with the /metrics pages)"),
    ("litellm-1.108.7/*", "read with health-readiness.json (liveliness, models) or deep health / API bodies"),
    ("prometheus-2.42/*", "Prometheus API answers: the Prometheus source's tests, not one engine's page"),
    ("alertmanager-0.25/*", "Alertmanager's webhook bodies and API answers: test_notify_format, not an engine's page"),
    ("gpu/nvidia-h200/query-compute-apps.*", "read with the all-fields query of the same moment"),
    ("gpu/nvidia-h200/*", "tables, XML, NVML dumps, dmon/pmon and partial queries the poller does not run"),
    ("issue-samples/amd-smi-metric-text-*", "amd-smi text output; the poller reads `amd-smi metric --json`"),
    ("issue-samples/amd-strixhalo-*", "sysfs/HIP memory numbers, no tool output the poller reads"),
    ("issue-samples/rocm-smi-csv-*", "--csv and --showmemuse output; the poller reads --showmeminfo vram --json"),
    ("issue-samples/dcgm-exporter-*", "DCGM exporter label sets (Prometheus hosts, not a host poll)"),
    ("issue-samples/gpud-gb10-*", "gpud log lines"),
    ("issue-samples/llamacpp-response-timings-*", "a completion's timings, not /metrics"),
    ("issue-samples/ollama-api-ps-*", "pasted /api/ps JSON (test_ollama_residency)"),
    ("issue-samples/litellm-health-*", "deep /health answers, not in status"),
    ("issue-samples/litellm-metrics-*", "pretty-printed by its author: not a Prometheus page"),
    ("issue-samples/nvidia-smi-*", "plain nvidia-smi tables: the poller reads --query-gpu CSV"),
    ("issue-samples/powermetrics-*", "powermetrics text; the poller reads macmon"),
)
"""Capture files with no golden file, and why (first match wins after BUILDERS)."""


def _rel(path: Path) -> str:
    return path.relative_to(REAL).as_posix()


def golden_name(capture: str) -> str:
    """tests/fixtures/golden/<capture path, folders kept>.json"""
    return capture + ".json"


def captures() -> dict[str, Builder]:
    """Every capture with a golden file: relative path -> builder."""
    found: dict[str, Builder] = {}
    for path in sorted(p for p in REAL.rglob("*") if p.is_file()):
        rel = _rel(path)
        if rel.endswith(".headers.txt"):
            continue
        for pattern, builder in BUILDERS:
            if fnmatch.fnmatchcase(rel, pattern):
                found[rel] = builder
                break
    return found


def unaccounted() -> list[str]:
    """Capture files neither normalized nor listed in NOT_NORMALIZED with a reason."""
    built = captures()
    out = []
    for path in sorted(p for p in REAL.rglob("*") if p.is_file()):
        rel = _rel(path)
        if rel not in built and not any(fnmatch.fnmatchcase(rel, p) for p, _ in NOT_NORMALIZED):
            out.append(rel)
    return out


def render(capture: str) -> str:
    doc = captures()[capture](REAL / capture)
    return json.dumps(doc, indent=2, sort_keys=True, allow_nan=False, ensure_ascii=False) + "\n"


def write_all() -> list[Path]:
    """(Re)write every golden file and remove orphans; returns the files written."""
    written = []
    for capture in captures():
        target = GOLDEN / golden_name(capture)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(render(capture))
        written.append(target)
    for orphan in set(GOLDEN.rglob("*.json")) - set(written):
        orphan.unlink()
    return written


# -- tests -----------------------------------------------------------------------------------------


def _updating() -> bool:
    return os.environ.get("POOLCONSOLE_UPDATE_GOLDEN", "") not in ("", "0")


@pytest.mark.parametrize("capture", sorted(captures()))
def test_golden(capture: str) -> None:
    target = GOLDEN / golden_name(capture)
    actual = render(capture)
    if _updating():
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(actual)
        return
    assert target.exists(), f"no golden file {target.relative_to(FIXTURES.parent.parent)}: {HINT}"
    expected = target.read_text()
    if actual != expected:
        diff = "".join(
            difflib.unified_diff(
                expected.splitlines(keepends=True),
                actual.splitlines(keepends=True),
                fromfile=f"golden/{golden_name(capture)}",
                tofile=f"now/{capture}",
            )
        )
        pytest.fail(f"{capture}: normalized view changed\n{diff}\n{HINT}", pytrace=False)


def test_every_capture_has_a_golden_file_and_none_is_orphaned() -> None:
    assert not unaccounted(), f"captures neither normalized nor listed in NOT_NORMALIZED: {unaccounted()}"
    expected = {golden_name(c) for c in captures()}
    present = {p.relative_to(GOLDEN).as_posix() for p in GOLDEN.rglob("*.json")}
    if _updating():
        for orphan in present - expected:
            (GOLDEN / orphan).unlink()
        return
    assert not expected - present, f"captures without a golden file: {sorted(expected - present)}; {HINT}"
    assert not present - expected, f"golden files with no capture (orphans): {sorted(present - expected)}; {HINT}"
