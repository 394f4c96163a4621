"""A large deterministic pool for the overview at fleet scale (issue 16 item 5): N engines, four to a host,
each host with sixteen H200 cards (1,000 engines: 250 hosts, 4,000 GPUs), the
engines' pages parsed from the real vLLM, SGLang and llama.cpp captures, the hosts' GPUs from the real
H200 `nvidia-smi` capture. `polls(step)` gives every target's next poll, its counters moved on, so each
refresh has new views to draw (no network, a clock the caller moves)."""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType

from poolconsole.collect.engines import specs
from poolconsole.collect.engines.mapping import parse_metrics
from poolconsole.collect.hosts import nvidia_smi as nv
from poolconsole.collect.hosts.systems import parse_meminfo
from poolconsole.config import PoolConfig, parse_config
from poolconsole.model.hosts import GpuProcess, HostSnapshot, HostState
from poolconsole.model.snapshots import COUNTERS, EngineMetrics, EngineSnapshot, EngineState
from tests.conftest import REAL
from tests.helpers import uipool
from tests.helpers.sshd import h200_catalog

ENGINES_PER_HOST = 4
MODELS = tuple(f"model-{i:02d}" for i in range(20))
"""The models served: engine i serves MODELS[i % 20], so grouped by model 1,000 engines are 20 groups."""
KINDS = ("vllm", "vllm", "sglang", "llamacpp")
DOWN_EVERY = 97
"""Every 97th engine refuses connections (about ten in 1,000): the problems a big pool always has."""


def host_name(i: int) -> str:
    return f"n{i:04d}"


def engine_name(i: int) -> str:
    return f"e{i:04d}"


def config(engines: int, gpus_per_host: int = 16) -> PoolConfig:
    """`engines` engines on engines / 4 hosts of `gpus_per_host` cards each (engine j of a host on its
    cards j, j+4, ...)."""
    hosts = (engines + ENGINES_PER_HOST - 1) // ENGINES_PER_HOST
    parts = ["[settings]\npoll_interval_s = 1.0\n"]
    for h in range(hosts):
        parts.append(f'[[hosts]]\nname = "{host_name(h)}"\naddress = "127.0.0.1"\nport = 9\n')
    for i in range(engines):
        h, slot = divmod(i, ENGINES_PER_HOST)
        cards = list(range(slot, gpus_per_host, ENGINES_PER_HOST)) or [0]
        parts.append(
            f'[[engines]]\nname = "{engine_name(i)}"\nkind = "{KINDS[i % len(KINDS)]}"\n'
            f'url = "http://127.0.0.1:9/{i}"\nhost = "{host_name(h)}"\nmodel = "{MODELS[i % len(MODELS)]}"\n'
            f"gpus = {cards}\n"
        )
    return parse_config("\n".join(parts), "bigpool.toml")


class Pages:
    """The captures, parsed once: every engine's poll is one of these with its own name and counters."""

    def __init__(self) -> None:
        vllm = (uipool.VLLM / "metrics.load.txt").read_bytes()
        sglang = (uipool.SAMPLES / "sglang-metrics-v0.5.1-issue13485.txt").read_bytes()
        llama = (uipool.LLAMA / "metrics-after-requests.txt").read_bytes()
        self.metrics = {
            "vllm": parse_metrics(vllm, specs.VLLM),
            "sglang": parse_metrics(sglang, specs.SGLANG),
            "llamacpp": parse_metrics(llama, specs.LLAMACPP),
        }
        self.versions = {"vllm": "0.32.0", "sglang": "0.5.1", "llamacpp": "b1-0c1e570"}
        row = h200_catalog(REAL / "gpu/nvidia-h200/query-gpu.all-fields.load.csv")[0]
        self.h200 = nv.parse_query_gpu(", ".join(row[f] for f in nv.FULL_FIELDS), nv.FULL_FIELDS).gpus[0]
        self.memory = parse_meminfo(uipool.MEMINFO)


def engine_poll(cfg: PoolConfig, pages: Pages, index: int, step: int) -> EngineSnapshot:
    """Engine `index`'s poll number `step` (one a second): its counters grown by a rate of its own."""
    e = cfg.engines[index]
    at = uipool.T0 + step
    if index % DOWN_EVERY == DOWN_EVERY - 1:
        return EngineSnapshot(
            e.name, e.kind, e.url, e.host, at, float(step), EngineState.DOWN, "connection refused", "GET /metrics"
        )
    metrics, missing, _ = pages.metrics[e.kind.value]
    assert metrics is not None
    rate = 20.0 + (index * 37) % 400
    grown = {k: v + rate * step * (1 + j) for j, (k, v) in enumerate(metrics.values.items()) if k in COUNTERS}
    moved: EngineMetrics = replace(metrics, values=MappingProxyType(dict(metrics.values) | grown))
    return EngineSnapshot(
        e.name,
        e.kind,
        e.url,
        e.host,
        at,
        float(step),
        EngineState.OK,
        None,
        "GET /metrics",
        0.004,
        pages.versions[e.kind.value],
        (MODELS[index % len(MODELS)],),
        moved,
        "1",
        MappingProxyType(missing),
    )


def host_poll(cfg: PoolConfig, pages: Pages, index: int, step: int, gpus_per_host: int = 16) -> HostSnapshot:
    h = cfg.hosts[index]
    names = cfg.engines[index * ENGINES_PER_HOST : (index + 1) * ENGINES_PER_HOST]
    gpus = tuple(replace(pages.h200, index=g, uuid=f"GPU-{h.name}-{g}") for g in range(gpus_per_host))
    procs = tuple(
        GpuProcess(1000 + g, "python3", f"GPU-{h.name}-{g}", (30 + g % 7) * 2**30, names[g % len(names)].name)
        for g in range(gpus_per_host)
        if names
    )
    return HostSnapshot(
        h.name, h.address, HostState.OK, None, "nvidia-smi", "dedicated", gpus, procs, pages.memory, 1.5,
        uipool.T0 + step,
    )  # fmt: skip


def polls(
    cfg: PoolConfig, pages: Pages, step: int, every: int = 1, gpus_per_host: int = 16
) -> tuple[list[HostSnapshot], list[EngineSnapshot]]:
    """Poll number `step` of every `every`-th target (offset by the step, so all are polled in turn)."""
    hosts = [host_poll(cfg, pages, i, step, gpus_per_host) for i in range(len(cfg.hosts)) if (i + step) % every == 0]
    engines = [engine_poll(cfg, pages, i, step) for i in range(len(cfg.engines)) if (i + step) % every == 0]
    return hosts, engines
