"""GPU health from what a host reports (issue 37): one condition per kind, each a sentence or None.

- gpu_xid: the kernel logged an `NVRM: Xid` for the GPU in the last 5 minutes (collect.hosts.xid);
- gpu_ecc: uncorrected ECC errors since the driver loaded, or a row remap / page retirement pending;
- gpu_throttle: clocks held down by a hardware slowdown, a thermal slowdown or the power brake (the power
  cap and idle are normal and never count);
- gpu_pcie: the link narrower than its maximum, or at a lower generation than its maximum while the GPU is
  busy (an idle GPU drops its generation to save power).

Unknown (a field the driver does not report, a kernel log that could not be read) is no condition either
way: the rule neither fires nor clears on it. Pure: no I/O."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from poolconsole.model.hosts import GpuReading

RULES = ("gpu_xid", "gpu_ecc", "gpu_throttle", "gpu_pcie")
REASONS = {
    0x8: "hardware slowdown",
    0x20: "software thermal slowdown",
    0x40: "hardware thermal slowdown",
    0x80: "hardware power brake",
}
"""The clock-event reasons that mean a fault (nvml.h's nvmlClocksEventReason* bits). Not here: idle (0x1),
application clocks (0x2), the software power cap (0x4: a GPU at its power limit under load, as the H200
capture under load shows), sync boost (0x10), display clocks (0x100)."""
PCIE_BUSY_PCT = 30.0
"""A generation below the maximum counts only at this utilisation or more."""


def xid(gpu: GpuReading) -> str | bool | None:
    if gpu.xids is None:
        return None
    return f"{described(gpu.xids)} in the kernel log (last 5 min)" if gpu.xids else False


def ecc(gpu: GpuReading) -> str | bool | None:
    known = (gpu.ecc_uncorrected, gpu.remapped_rows_pending, gpu.retired_pages_pending)
    if all(v is None for v in known):
        return None
    said = []
    if gpu.ecc_uncorrected:
        said.append(f"{gpu.ecc_uncorrected} uncorrected ECC error(s) since the driver loaded")
    if gpu.remapped_rows_pending:
        said.append("a row remap pending (reset the GPU)")
    if gpu.retired_pages_pending:
        said.append("a page retirement pending (reboot)")
    return "; ".join(said) if said else False


def throttle(gpu: GpuReading) -> str | bool | None:
    if gpu.clock_event_reasons is None:
        return None
    active = [words for bit, words in REASONS.items() if gpu.clock_event_reasons & bit]
    return f"clocks held down: {', '.join(active)}" if active else False


def pcie(gpu: GpuReading) -> str | bool | None:
    gen, gen_max, width, width_max = gpu.pcie_gen, gpu.pcie_gen_max, gpu.pcie_width, gpu.pcie_width_max
    if width is not None and width_max is not None and width < width_max:
        return f"PCIe link x{width} of x{width_max}"
    busy = gpu.utilization_pct is not None and gpu.utilization_pct >= PCIE_BUSY_PCT
    if gen is not None and gen_max is not None and gen < gen_max and busy:
        return f"PCIe link gen {gen} of gen {gen_max} while busy"
    if (width is None or width_max is None) and (gen is None or gen_max is None or not busy):
        return None
    return False


CHECKS: dict[str, Callable[[GpuReading], str | bool | None]] = {
    "gpu_xid": xid,
    "gpu_ecc": ecc,
    "gpu_throttle": throttle,
    "gpu_pcie": pcie,
}
"""rule -> its condition on one GPU: a sentence when it holds, False when it does not, None when unknown."""


def key(rule: str, index: int) -> str:
    """The alert's key per GPU (`gpu_xid_gpu2`), as vram_gpuN; its alertname stays `gpu_xid` (split)."""
    return f"{rule}_gpu{index}"


def split(key_: str) -> tuple[str, str] | None:
    """`gpu_xid_gpu2` -> ("gpu_xid", "2"); None for any other rule."""
    base, sep, index = key_.rpartition("_gpu")
    return (base, index) if sep and base in RULES and index.isdigit() else None


def described(codes: Iterable[int]) -> str:
    """`Xid 79 (fallen off the bus), Xid 31`: the codes in words where the meaning is settled."""
    out = []
    for code in dict.fromkeys(codes):
        meaning = MEANINGS.get(code)
        out.append(f"Xid {code}" + (f" ({meaning})" if meaning else ""))
    return ", ".join(out)


MEANINGS = {
    13: "graphics engine exception",
    31: "GPU memory page fault",
    43: "GPU stopped processing",
    45: "preemptive cleanup",
    48: "double-bit ECC error",
    61: "internal micro-controller breakpoint",
    62: "internal micro-controller halt",
    63: "ECC page retirement or row remap",
    64: "ECC page retirement or row remap failure",
    74: "NVLink error",
    79: "fallen off the bus",
    92: "high single-bit ECC error rate",
    94: "contained ECC error",
    95: "uncontained ECC error",
    119: "GSP RPC timeout",
    120: "GSP error",
}
"""From NVIDIA's Xid catalogue (docs.nvidia.com/deploy/xid-errors)."""
