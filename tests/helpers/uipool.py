"""A deterministic pool for UI tests and snapshots: the example hosts.toml, with snapshots parsed from
real captures at fixed times (no network, a fixed clock)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from types import MappingProxyType

from poolconsole.collect.engines import jsonparse, specs
from poolconsole.collect.engines.mapping import MetricSpec, parse_metrics
from poolconsole.collect.hosts import nvidia_smi as nv
from poolconsole.collect.hosts.systems import parse_meminfo
from poolconsole.config import PoolConfig, load_config
from poolconsole.config.models import EngineKind
from poolconsole.model.hosts import GpuProcess, GpuReading, HostSnapshot, HostState
from poolconsole.model.snapshots import EngineSnapshot, EngineState
from tests.conftest import REAL
from tests.helpers.sshd import h200_catalog

ROOT = Path(__file__).resolve().parents[2]
T0 = 1_796_000_000.0  # the fixed clock: 2026-11-29
VLLM = REAL / "vllm-0.32.0-cpu"
LLAMA = REAL / "llamacpp-b1-0c1e570"
SAMPLES = REAL / "issue-samples"
MEMINFO = (
    "MemTotal:       131072000 kB\nMemFree:         8000000 kB\nMemAvailable:   30000000 kB\n"
    "SwapTotal:       8388604 kB\nSwapFree:        8388604 kB\n"
)


def config() -> PoolConfig:
    return load_config(ROOT / "hosts.toml")


def _engine(
    name: str,
    kind: str,
    url: str,
    host: str | None,
    at: float,
    body: bytes,
    spec: MetricSpec,
    models: tuple[str, ...],
    version: str,
) -> EngineSnapshot:
    metrics, missing, _ = parse_metrics(body, spec)
    return EngineSnapshot(
        name,
        EngineKind(kind),
        url,
        host,
        at,
        at - T0,
        EngineState.OK,
        None,
        "GET /metrics",
        0.004,
        version,
        models,
        metrics,
        "1",
        MappingProxyType(missing),
    )


def engine_snapshots(cfg: PoolConfig) -> list[EngineSnapshot]:
    out: list[EngineSnapshot] = []
    for e in cfg.engines:
        kind = e.kind.value
        if kind == "vllm":
            for i, capture in enumerate(("metrics.load.txt", "metrics.after.txt")):
                out.append(
                    _engine(
                        e.name,
                        kind,
                        e.url,
                        e.host,
                        T0 + 2 * i,
                        (VLLM / capture).read_bytes(),
                        specs.VLLM,
                        (e.name,),
                        "0.32.0",
                    )
                )
        elif kind == "sglang":
            body = (SAMPLES / "sglang-metrics-v0.5.1-issue13485.txt").read_bytes()
            out.append(_engine(e.name, kind, e.url, e.host, T0 + 2, body, specs.SGLANG, ("gemma-3-27b-it",), "0.5.1"))
        elif kind == "llamacpp":
            for i, capture in enumerate(("metrics-before.txt", "metrics-after-requests.txt")):
                snap = _engine(
                    e.name,
                    kind,
                    e.url,
                    e.host,
                    T0 + 2 * i,
                    (LLAMA / capture).read_bytes(),
                    specs.LLAMACPP,
                    ("tiny",),
                    "b1-0c1e570",
                )
                out.append(
                    replace(snap, slots=jsonparse.parse_slots((LLAMA / "slots-after-requests.json").read_bytes()))
                )
        elif kind == "ollama":
            text = (SAMPLES / "ollama-api-ps-2025-08-nirmato-issue13.txt").read_text()
            loaded = jsonparse.parse_ollama_ps(text[text.index("{") : text.index("# Also")])
            out.append(
                EngineSnapshot(
                    e.name,
                    e.kind,
                    e.url,
                    e.host,
                    T0 + 2,
                    2.0,
                    EngineState.OK,
                    None,
                    "GET /api/ps, /api/tags",
                    0.003,
                    "0.33.0",
                    ("gemma3:latest",),
                    ollama_models=loaded,
                    residency_read=True,
                )
            )
        elif kind == "litellm":
            out.append(
                EngineSnapshot(
                    e.name,
                    e.kind,
                    e.url,
                    e.host,
                    T0 + 2,
                    2.0,
                    EngineState.OK,
                    None,
                    "GET /health/liveliness, /health/readiness",
                    0.002,
                    None,
                    ("qwen3-next-80b", "gemma-3-27b-it", "retired-model"),
                    extra=MappingProxyType({"readiness": {"status": "healthy"}}),
                )
            )
    return out


def host_snapshots(cfg: PoolConfig) -> list[HostSnapshot]:
    row = h200_catalog(REAL / "gpu/nvidia-h200/query-gpu.all-fields.load.csv")[0]
    line = ", ".join(row[f] for f in nv.FULL_FIELDS)
    h200 = nv.parse_query_gpu(line, nv.FULL_FIELDS).gpus[0]
    memory = parse_meminfo(MEMINFO)
    out = []
    for h in cfg.hosts:
        gpus: tuple[GpuReading, ...] = ()
        kind = "dedicated"
        source = "nvidia-smi"
        procs: tuple[GpuProcess, ...] = ()
        if h.name == "tp4":
            gpus = tuple(replace(h200, index=i, uuid=f"GPU-tp4-{i}") for i in range(4))
            procs = tuple(
                GpuProcess(100 + i, "python3", f"GPU-tp4-{i}", 40 * 2**30, "qwen3-next-80b") for i in range(4)
            )
        elif h.name in ("ws48", "duo5090", "rig3090"):
            gpus = (replace(h200, uuid=f"GPU-{h.name}"),)
        elif h.name in ("spark", "studio"):
            kind = "unified"
            used = (memory.total_bytes or 0) - (memory.available_bytes or 0)
            gpus = (
                replace(
                    h200,
                    name="NVIDIA GB10" if h.name == "spark" else "Apple GPU",
                    memory_total_bytes=memory.total_bytes,
                    memory_used_bytes=used,
                    memory_source="system",
                ),
            )
            source = "nvidia-smi" if h.name == "spark" else "macos"
        else:
            source = "meminfo"
        out.append(HostSnapshot(h.name, h.address, HostState.OK, None, source, kind, gpus, procs, memory, 12.5, T0 + 2))
    return out


def clock() -> float:
    return T0 + 3
