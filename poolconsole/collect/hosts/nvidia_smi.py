"""nvidia-smi `--query-gpu` / `--query-compute-apps` CSV, as fixed command strings and pure parsers.

Memory "used" is nvidia-smi's `memory.used`: memory allocated by contexts, *excluding* what the driver
and firmware reserve (`memory.reserved`, reported separately). NVML's v1 `used` includes reserved
memory; the NVML collector subtracts it so both sources mean the same thing.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from poolconsole.model.hosts import GpuProcess, GpuReading

MIB = 1024 * 1024

FULL_FIELDS = (
    "index", "uuid", "name", "memory.total", "memory.used", "memory.free", "memory.reserved", "utilization.gpu",
    "temperature.gpu", "power.draw", "power.limit", "clocks.current.sm", "clocks.current.memory",
    "pcie.link.gen.current", "pcie.link.width.current", "pci.bus_id", "pcie.link.gen.max", "pcie.link.width.max",
    "clocks_event_reasons.active", "ecc.errors.uncorrected.volatile.total", "remapped_rows.pending",
    "retired_pages.pending",
)  # fmt: skip
"""The GPU-health fields (the bus id, the PCIe maximum, clock-event reasons, ECC, pending remaps and
retirements) end the list: a driver that does not know one (before 535 the reasons were
`clocks_throttle_reasons.*`) has it dropped alone, and it reads unknown (poll.HostPoller._fix_fields)."""
MINIMAL_FIELDS = (
    "index", "uuid", "name", "memory.total", "memory.used", "utilization.gpu", "temperature.gpu", "power.draw",
)  # fmt: skip
APPS_FIELDS = ("gpu_uuid", "pid", "process_name", "used_memory")
APPS_FALLBACK = ("gpu_uuid", "pid", "process_name", "used_gpu_memory")

SENTINELS = {
    "",
    "n/a",
    "[n/a]",
    "[not supported]",
    "not supported",
    "[unknown error]",
    "[insufficient permissions]",
    "[gpu is lost]",
    "[requested functionality has been deprecated]",
    "[not available]",
}
_INVALID = re.compile(r'Field "([^"]+)" is not a valid field to query')
UNITS = ("MiB", "GiB", "MHz", "W", "%", "C")
"""The units nvidia-smi prints after a reading without `nounits`."""


def _without_unit(raw: str) -> str:
    """The reading without its unit, in linear time: a regex `\\s*(MiB|...)$` backtracked over every run of
    blanks (an 81 KB line of them took 107 s in the fuzzer)."""
    for unit in UNITS:
        if raw.endswith(unit):
            return raw[: -len(unit)].rstrip()
    return raw


def query_gpu_command(fields: tuple[str, ...]) -> str:
    """A fixed command: field names come from this module's constants, never from config or the network."""
    return f"nvidia-smi --query-gpu={','.join(fields)} --format=csv,noheader,nounits"


def query_apps_command(fields: tuple[str, ...] = APPS_FIELDS) -> str:
    return f"nvidia-smi --query-compute-apps={','.join(fields)} --format=csv,noheader,nounits"


def rejected_field(output: str) -> str | None:
    """nvidia-smi fails the whole query for one field it does not know: which one?"""
    match = _INVALID.search(output)
    return match.group(1) if match else None


def value(text: str | None) -> str | None:
    if text is None:
        return None
    text = text.strip()
    return None if text.lower() in SENTINELS else text


def number(text: str | None) -> float | None:
    """A reading; None for a sentinel, and for nan/inf (or 1e999): not finite is unknown, never a value."""
    raw = value(text)
    if raw is None:
        return None
    try:
        got = float(raw)  # the usual answer (nounits): no unit to cut
    except ValueError:
        raw = _without_unit(raw)
        try:
            got = float(raw)
        except ValueError:
            return None
    return got if math.isfinite(got) else None


def mib(text: str | None) -> int | None:
    n = number(text)
    return None if n is None or not math.isfinite(n * MIB) else int(n * MIB)


def _int(text: str | None) -> int | None:
    n = number(text)
    return None if n is None else int(n)


def _hex(text: str | None) -> int | None:
    """A bitmask as nvidia-smi prints it (0x0000000000000004)."""
    raw = value(text)
    try:
        return int(raw, 16) if raw is not None and raw.lower().startswith("0x") else None
    except ValueError:
        return None


def _yes(text: str | None) -> bool | None:
    raw = (value(text) or "").lower()
    return True if raw == "yes" else False if raw == "no" else None


@dataclass(frozen=True)
class QueryResult:
    gpus: tuple[GpuReading, ...]
    unified: bool
    """Every memory field came back [N/A] / Not Supported: a unified-memory box (GB10, Jetson)."""


def _split(line: str) -> list[str]:
    return [part.strip() for part in line.split(",")]


def parse_query_gpu(text: str, fields: tuple[str, ...]) -> QueryResult:
    """Rows of `--query-gpu` output for `fields`. Lines that do not have one value per field are skipped."""
    gpus: list[GpuReading] = []
    saw_memory_na = False
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = _split(line)
        if len(parts) != len(fields):
            continue
        row = dict(zip(fields, parts, strict=True))
        total = mib(row.get("memory.total"))
        if "memory.total" in row and total is None:
            saw_memory_na = True
        gpus.append(
            GpuReading(
                index=_int(row.get("index")),
                name=value(row.get("name")),
                uuid=value(row.get("uuid")),
                memory_total_bytes=total,
                memory_used_bytes=mib(row.get("memory.used")),
                utilization_pct=number(row.get("utilization.gpu")),
                temperature_c=number(row.get("temperature.gpu")),
                power_w=number(row.get("power.draw")),
                power_limit_w=number(row.get("power.limit")),
                memory_free_bytes=mib(row.get("memory.free")),
                memory_reserved_bytes=mib(row.get("memory.reserved")),
                sm_clock_mhz=number(row.get("clocks.current.sm")),
                mem_clock_mhz=number(row.get("clocks.current.memory")),
                pcie_gen=_int(row.get("pcie.link.gen.current")),
                pcie_width=_int(row.get("pcie.link.width.current")),
                pci_bus_id=value(row.get("pci.bus_id")),
                pcie_gen_max=_int(row.get("pcie.link.gen.max")),
                pcie_width_max=_int(row.get("pcie.link.width.max")),
                clock_event_reasons=_hex(row.get("clocks_event_reasons.active")),
                ecc_uncorrected=_int(row.get("ecc.errors.uncorrected.volatile.total")),
                remapped_rows_pending=_yes(row.get("remapped_rows.pending")),
                retired_pages_pending=_yes(row.get("retired_pages.pending")),
            )
        )
    return QueryResult(tuple(gpus), unified=saw_memory_na and bool(gpus))


def parse_compute_apps(text: str, fields: tuple[str, ...] = APPS_FIELDS) -> tuple[GpuProcess, ...]:
    out: list[GpuProcess] = []
    for line in text.splitlines():
        if not line.strip() or line.lower().startswith("gpu_uuid") or "no running" in line.lower():
            continue
        parts = _split(line)
        if len(parts) != len(fields):
            continue
        row = dict(zip(fields, parts, strict=True))
        used = row.get("used_memory", row.get("used_gpu_memory"))
        out.append(
            GpuProcess(_int(row.get("pid")), value(row.get("process_name")), value(row.get("gpu_uuid")), mib(used))
        )
    return tuple(out)
