"""Host snapshots: GPUs and memory of one machine, as read over SSH or NVML. Unknown is None."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import Any


class HostState(StrEnum):
    OK = "ok"
    DEGRADED = "degraded"
    UNREACHABLE = "unreachable"
    AUTH_FAILED = "auth_failed"
    HOST_KEY_UNKNOWN = "host_key_unknown"
    HOST_KEY_CHANGED = "host_key_changed"

    @property
    def answering(self) -> bool:
        """It answered with readings (degraded: some of them); the others are down in some way."""
        return self in (HostState.OK, HostState.DEGRADED)

    @property
    def severity(self) -> int:
        """As EngineState.severity: 0 ok, 1 degraded, 2 not answering (unreachable, auth, host key)."""
        return 0 if self is HostState.OK else 1 if self is HostState.DEGRADED else 2


@dataclass(frozen=True)
class GpuProcess:
    pid: int | None
    name: str | None
    gpu_uuid: str | None
    used_memory_bytes: int | None
    engine: str | None = None
    """The configured engine this process belongs to, when the mapping is known."""


@dataclass(frozen=True)
class GpuReading:
    index: int | None
    name: str | None
    uuid: str | None
    memory_total_bytes: int | None
    memory_used_bytes: int | None
    utilization_pct: float | None
    temperature_c: float | None
    power_w: float | None
    power_limit_w: float | None
    memory_free_bytes: int | None = None
    memory_reserved_bytes: int | None = None
    sm_clock_mhz: float | None = None
    mem_clock_mhz: float | None = None
    pcie_gen: int | None = None
    pcie_width: int | None = None
    memory_source: str = "device"
    """'device' (the GPU's own memory counters) or 'system' (unified memory read from the OS)."""
    pci_bus_id: str | None = None
    """nvidia-smi's `pci.bus_id` (00000000:41:00.0): how a kernel Xid line names this GPU."""
    pcie_gen_max: int | None = None
    """The highest PCIe generation this GPU and its slot can run (`pcie.link.gen.max`)."""
    pcie_width_max: int | None = None
    clock_event_reasons: int | None = None
    """`clocks_event_reasons.active`: the bitmask of why its clocks are held down now (model.gpu_health)."""
    ecc_uncorrected: int | None = None
    """Uncorrected ECC errors since the driver loaded (`ecc.errors.uncorrected.volatile.total`); None without
    ECC."""
    remapped_rows_pending: bool | None = None
    """A row remap waits for a GPU reset (Ampere and later: `remapped_rows.pending`)."""
    retired_pages_pending: bool | None = None
    """A page retirement waits for a reboot (before Ampere: `retired_pages.pending`)."""
    xids: tuple[int, ...] | None = None
    """The Xid codes the kernel logged for this GPU in the last few minutes (collect.hosts.xid); None when
    the kernel log could not be read."""


@dataclass(frozen=True)
class SystemMemory:
    total_bytes: int | None
    available_bytes: int | None
    swap_used_bytes: int | None
    swap_total_bytes: int | None = None
    pressure: str | None = None
    """macOS: normal / warn / critical, from the free+purgeable share; None elsewhere."""


@dataclass(frozen=True)
class HostSnapshot:
    name: str
    address: str
    state: HostState
    error: str | None = None
    source: str | None = None
    memory_kind: str | None = None
    gpus: tuple[GpuReading, ...] = ()
    processes: tuple[GpuProcess, ...] = ()
    system_memory: SystemMemory | None = None
    rtt_ms: float | None = None
    fetched_at: float = 0.0
    driver: str | None = None
    notes: tuple[str, ...] = ()
    engine_gpus: dict[str, list[int]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        gpus = [_flat(g) for g in self.gpus]
        return {
            "name": self.name,
            "state": self.state.value,
            "error": self.error,
            "source": self.source,
            "memory_kind": self.memory_kind,
            "gpus": gpus,
            "system_memory": _flat(self.system_memory)
            if self.system_memory
            else {"total_bytes": None, "available_bytes": None, "swap_used_bytes": None},
            "rtt_ms": self.rtt_ms,
            "address": self.address,
            "driver": self.driver,
            "processes": [_flat(p) for p in self.processes],
            "engine_gpus": self.engine_gpus,
            "notes": list(self.notes),
            "polled_at": self.fetched_at,
        }


_NAMES = {cls: tuple(f.name for f in fields(cls)) for cls in (GpuReading, GpuProcess, SystemMemory)}


def _flat(item: GpuReading | GpuProcess | SystemMemory) -> dict[str, Any]:
    """A reading's fields as `dataclasses.asdict` gives them, without its recursive deep copy: every field of
    these three is a scalar or a tuple of ints, so the same values (tests/unit/test_hosts_json.py). Why: the
    history store encodes a host at each poll: a 4-GPU host's to_json took 182 us with asdict, 15 without
    (at 1,000 engines and 250 hosts, 4 % of the console's busy samples under py-spy)."""
    return {name: getattr(item, name) for name in _NAMES[type(item)]}


def _pick(cls: type[GpuReading | GpuProcess | SystemMemory], doc: dict[str, Any]) -> dict[str, Any]:
    names = _NAMES[cls]
    return {k: v for k, v in doc.items() if k in names}


def _gpu(doc: dict[str, Any]) -> GpuReading:
    picked = _pick(GpuReading, doc)
    if isinstance(picked.get("xids"), list):  # JSON has no tuple
        picked["xids"] = tuple(picked["xids"])
    return GpuReading(**picked)


def host_from_json(doc: dict[str, Any]) -> HostSnapshot:
    """A snapshot back from its `to_json` form (a recording): what was stored, unknowns still None."""
    memory = doc.get("system_memory") or {}
    return HostSnapshot(
        name=str(doc["name"]),
        address=str(doc.get("address") or ""),
        state=HostState(doc.get("state") or "ok"),
        error=doc.get("error"),
        source=doc.get("source"),
        memory_kind=doc.get("memory_kind"),
        gpus=tuple(_gpu(g) for g in doc.get("gpus") or ()),
        processes=tuple(GpuProcess(**_pick(GpuProcess, p)) for p in doc.get("processes") or ()),
        system_memory=SystemMemory(**_pick(SystemMemory, memory)) if any(memory.values()) else None,
        rtt_ms=doc.get("rtt_ms"),
        fetched_at=float(doc.get("polled_at") or 0.0),
        driver=doc.get("driver"),
        notes=tuple(doc.get("notes") or ()),
        engine_gpus=dict(doc.get("engine_gpus") or {}),
    )
