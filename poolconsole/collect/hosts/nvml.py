"""The console's own machine through NVML (nvidia-ml-py), in a thread: no SSH, no nvidia-smi.

Memory "used" follows nvidia-smi's meaning (allocated by contexts, without driver-reserved memory):
NVML's v2 memory info gives it directly; with only v1, reserved memory is not separable and v1's
used is reported as is, with a note.
"""

from __future__ import annotations

from typing import Any

from poolconsole.model.hosts import GpuProcess, GpuReading


class NvmlUnavailable(Exception):
    pass


def _call(fn: Any, *args: Any) -> Any:
    """An NVML reading, or None when the device does not support it (GB10 memory, power on some cards)."""
    import pynvml

    try:
        return fn(*args)
    except pynvml.NVMLError:
        return None


NOT_AVAILABLE = 2**64 - 1
"""NVML_VALUE_NOT_AVAILABLE: a process's used memory NVML cannot tell (WDDM, another PID namespace)."""


def process_memory(proc: Any) -> int | None:
    """A compute process's used memory: None when NVML does not know it (pynvml turns NVML's sentinel into
    None; an older one passes it through), and 0 when that is what NVML says."""
    used = getattr(proc, "usedGpuMemory", None)
    return None if used is None or int(used) >= NOT_AVAILABLE else int(used)


def read_nvml() -> tuple[tuple[GpuReading, ...], tuple[GpuProcess, ...], str | None, bool]:
    """Blocking: call it in a thread. Returns GPUs, compute processes, driver version, and whether memory
    was unsupported (unified memory). Raises NvmlUnavailable when the library or driver is missing."""
    import pynvml

    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        raise NvmlUnavailable(f"NVML did not load: {exc}") from None
    try:
        driver = _call(pynvml.nvmlSystemGetDriverVersion)
        gpus: list[GpuReading] = []
        processes: list[GpuProcess] = []
        unified = False
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            uuid = _call(pynvml.nvmlDeviceGetUUID, handle)
            memory = _call(pynvml.nvmlDeviceGetMemoryInfo, handle, pynvml.nvmlMemory_v2)
            if memory is None:
                memory = _call(pynvml.nvmlDeviceGetMemoryInfo, handle)
            unified = unified or memory is None
            util = _call(pynvml.nvmlDeviceGetUtilizationRates, handle)
            power = _call(pynvml.nvmlDeviceGetPowerUsage, handle)
            limit = _call(pynvml.nvmlDeviceGetEnforcedPowerLimit, handle)
            gpus.append(
                GpuReading(
                    index=index,
                    name=_call(pynvml.nvmlDeviceGetName, handle),
                    uuid=uuid,
                    memory_total_bytes=int(memory.total) if memory is not None else None,
                    memory_used_bytes=int(memory.used) if memory is not None else None,
                    utilization_pct=float(util.gpu) if util is not None else None,
                    temperature_c=_call(pynvml.nvmlDeviceGetTemperature, handle, pynvml.NVML_TEMPERATURE_GPU),
                    power_w=power / 1000 if power is not None else None,
                    power_limit_w=limit / 1000 if limit is not None else None,
                    memory_free_bytes=int(memory.free) if memory is not None else None,
                    memory_reserved_bytes=int(getattr(memory, "reserved", 0)) or None if memory is not None else None,
                    sm_clock_mhz=_call(pynvml.nvmlDeviceGetClockInfo, handle, pynvml.NVML_CLOCK_SM),
                    mem_clock_mhz=_call(pynvml.nvmlDeviceGetClockInfo, handle, pynvml.NVML_CLOCK_MEM),
                    pcie_gen=_call(pynvml.nvmlDeviceGetCurrPcieLinkGeneration, handle),
                    pcie_width=_call(pynvml.nvmlDeviceGetCurrPcieLinkWidth, handle),
                )
            )
            for proc in _call(pynvml.nvmlDeviceGetComputeRunningProcesses, handle) or []:
                processes.append(GpuProcess(int(proc.pid), None, uuid, process_memory(proc)))
        return tuple(gpus), tuple(processes), driver, unified
    finally:
        pynvml.nvmlShutdown()
