"""What the exporters Prometheus scrapes on a host say, as host readings: node_exporter's meminfo families as
SystemMemory, NVIDIA's DCGM exporter's and nvidia_gpu_exporter's GPU families as GpuReadings (MIG instances
summed, unified GPUs without framebuffer figures), the families each exporter is known by. Pure: series in,
readings out (prometheus.hosts reads the series)."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable

from poolconsole.collect import dcgm_health
from poolconsole.collect.prometheus.api import Series
from poolconsole.model.hosts import GpuReading, SystemMemory

MIB = 1024 * 1024

NODE = "node_exporter"
DCGM = "DCGM exporter"
NVSMI = "nvidia_gpu_exporter"

NODE_NAMES = (
    "node_memory_MemTotal_bytes",
    "node_memory_MemAvailable_bytes",
    "node_memory_SwapTotal_bytes",
    "node_memory_SwapFree_bytes",
)
DCGM_NAMES = (
    "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_DEV_FB_FREE",
    "DCGM_FI_DEV_FB_RESERVED",
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_DEV_POWER_USAGE",
    "DCGM_FI_DEV_POWER_MGMT_LIMIT",
    "DCGM_FI_DEV_GPU_TEMP",
    *dcgm_health.NAMES,  # Xid and ECC, for gpu_xid and gpu_ecc (collect.dcgm_health)
)
NVSMI_NAMES = (
    "nvidia_smi_gpu_info",
    "nvidia_smi_index",
    "nvidia_smi_memory_used_bytes",
    "nvidia_smi_memory_total_bytes",
    "nvidia_smi_memory_free_bytes",
    "nvidia_smi_memory_reserved_bytes",
    "nvidia_smi_utilization_gpu_ratio",
    "nvidia_smi_power_draw_watts",
    "nvidia_smi_power_limit_watts",
    "nvidia_smi_temperature_gpu",
)
FAMILIES = {NODE: NODE_NAMES, DCGM: DCGM_NAMES, NVSMI: NVSMI_NAMES}
MARKERS = {
    NODE: ("node_memory_MemTotal_bytes",),
    DCGM: ("DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_POWER_USAGE"),
    NVSMI: ("nvidia_smi_gpu_info", "nvidia_smi_index"),
}
"""The families whose presence says a target is that exporter (one name per term: functions drop it)."""


def exporter_of(name: str) -> str | None:
    for exporter, names in FAMILIES.items():
        if name in names:
            return exporter
    return None


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def _int(value: float | None, scale: float = 1.0) -> int | None:
    value = _finite(value)
    return None if value is None else round(value * scale)


def _index(text: str | None) -> int | None:
    return int(text) if text is not None and text.strip().isdigit() else None


def system_memory(series: Iterable[Series]) -> SystemMemory | None:
    """node_exporter's meminfo families -> SystemMemory (None when MemTotal is absent)."""
    values = {s.labels["__name__"]: s.value for s in series}
    total = _int(values.get("node_memory_MemTotal_bytes"))
    if total is None:
        return None
    swap_total = _int(values.get("node_memory_SwapTotal_bytes"))
    swap_free = _int(values.get("node_memory_SwapFree_bytes"))
    return SystemMemory(
        total_bytes=total,
        available_bytes=_int(values.get("node_memory_MemAvailable_bytes")),
        swap_used_bytes=swap_total - swap_free if swap_total is not None and swap_free is not None else None,
        swap_total_bytes=swap_total,
    )


def dcgm_gpus(series: Iterable[Series]) -> tuple[list[GpuReading], list[str], str | None]:
    """DCGM exporter series -> one reading per `gpu` index. A MIG GPU (series per GPU instance, GPU_I_ID)
    whose whole-GPU series are absent has its instances' framebuffer figures summed."""
    by_gpu: dict[int, dict[str, list[Series]]] = defaultdict(lambda: defaultdict(list))
    driver: str | None = None
    for s in series:
        index = _index(s.labels.get("gpu"))
        if index is not None:
            by_gpu[index][s.labels["__name__"]].append(s)
            driver = driver or s.labels.get("DCGM_FI_DRIVER_VERSION")
    gpus: list[GpuReading] = []
    notes: list[str] = []
    for index in sorted(by_gpu):
        fields = by_gpu[index]

        def pick(name: str, fields: dict[str, list[Series]] = fields) -> list[Series]:
            found = fields.get(name, [])
            whole = [s for s in found if "GPU_I_ID" not in s.labels]
            return whole or found

        def one(name: str) -> float | None:
            found = pick(name)
            return _finite(found[0].value) if found else None

        def mib(name: str, index: int = index) -> int | None:
            found = pick(name)
            if not found:
                return None
            values = [_finite(s.value) for s in found]
            if None in values:
                return None
            if len(found) > 1:
                note = f"GPU {index}: MIG, framebuffer figures summed over {len(found)} GPU instances"
                if note not in notes:
                    notes.append(note)
            return round(sum(v for v in values if v is not None) * MIB)

        used, free, reserved = mib("DCGM_FI_DEV_FB_USED"), mib("DCGM_FI_DEV_FB_FREE"), mib("DCGM_FI_DEV_FB_RESERVED")
        labels = next(s for found in fields.values() for s in found).labels
        gpus.append(
            GpuReading(
                index=index,
                name=labels.get("modelName"),
                uuid=labels.get("UUID"),
                memory_total_bytes=used + free + (reserved or 0) if used is not None and free is not None else None,
                memory_used_bytes=used,
                utilization_pct=one("DCGM_FI_DEV_GPU_UTIL"),
                temperature_c=one("DCGM_FI_DEV_GPU_TEMP"),
                power_w=one("DCGM_FI_DEV_POWER_USAGE"),
                power_limit_w=one("DCGM_FI_DEV_POWER_MGMT_LIMIT"),
                memory_free_bytes=free,
                memory_reserved_bytes=reserved,
            )
        )
    return dcgm_health.with_health(gpus, series), notes, driver


def nvidia_smi_gpus(series: Iterable[Series]) -> tuple[list[GpuReading], str | None]:
    """nvidia_gpu_exporter series (per `uuid`, which it writes without the GPU- prefix) -> readings. The
    exporter drops fields nvidia-smi reports as [N/A], so a unified GPU's memory families are absent."""
    by_uuid: dict[str, dict[str, Series]] = defaultdict(dict)
    for s in series:
        uuid = s.labels.get("uuid")
        if uuid:
            by_uuid[uuid].setdefault(s.labels["__name__"], s)
    gpus: list[GpuReading] = []
    driver: str | None = None
    for uuid, fields in by_uuid.items():

        def value(name: str, fields: dict[str, Series] = fields) -> float | None:
            found = fields.get(name)
            return _finite(found.value) if found is not None else None

        info = fields.get("nvidia_smi_gpu_info")
        labels = info.labels if info is not None else {}
        driver = driver or labels.get("driver_version") or None
        index = _index(labels.get("index"))
        if index is None:
            index = _int(value("nvidia_smi_index"))
        ratio = value("nvidia_smi_utilization_gpu_ratio")
        gpus.append(
            GpuReading(
                index=index,
                name=labels.get("name"),
                uuid=uuid if uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}",
                memory_total_bytes=_int(value("nvidia_smi_memory_total_bytes")),
                memory_used_bytes=_int(value("nvidia_smi_memory_used_bytes")),
                utilization_pct=None if ratio is None else round(ratio * 100, 6),
                temperature_c=value("nvidia_smi_temperature_gpu"),
                power_w=value("nvidia_smi_power_draw_watts"),
                power_limit_w=value("nvidia_smi_power_limit_watts"),
                memory_free_bytes=_int(value("nvidia_smi_memory_free_bytes")),
                memory_reserved_bytes=_int(value("nvidia_smi_memory_reserved_bytes")),
            )
        )
    gpus.sort(key=lambda g: (g.index is None, g.index or 0))
    return gpus, driver
