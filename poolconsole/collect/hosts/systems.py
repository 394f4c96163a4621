"""Pure parsers for the other host sources: /proc/meminfo, rocm-smi and amd-smi JSON, macOS
(sysctl, vm_stat with its page size, macmon pipe)."""

from __future__ import annotations

import json
import math
import re
from typing import Any

from poolconsole.collect.prom import ParseError
from poolconsole.model.hosts import GpuReading, SystemMemory

KIB = 1024
MIB = 1024 * 1024


MEMINFO_LINE = re.compile(
    r"^[ \t]*(MemTotal|MemAvailable|MemFree|Buffers|Cached|SwapTotal|SwapFree):[ \t]+(\d{1,20})(?:[ \t]+kB)?[ \t]*\r?$",
    re.MULTILINE,
)
"""The lines parse_meminfo reads, found in one pass (read every second from every host). A value of more than
20 digits (past any memory, and past int()'s 4300 at worst: a ValueError) is no such line."""


def parse_meminfo(text: str) -> SystemMemory:
    """/proc/meminfo: values in kB (really KiB). Used = MemTotal - MemAvailable."""
    values = {key: int(number) * KIB for key, number in MEMINFO_LINE.findall(text)}
    if "MemTotal" not in values:
        raise ParseError("/proc/meminfo: no MemTotal line")
    available = values.get("MemAvailable")
    if available is None and "MemFree" in values:  # kernels before 3.14
        available = values["MemFree"] + values.get("Buffers", 0) + values.get("Cached", 0)
    swap_total = values.get("SwapTotal")
    swap_free = values.get("SwapFree")
    swap_used = swap_total - swap_free if swap_total is not None and swap_free is not None else None
    return SystemMemory(values["MemTotal"], available, swap_used, swap_total)


def _num(value: Any) -> float | None:
    """amd-smi: {"value": N, "unit": ...} or "N/A"; rocm-smi: numbers as strings. A number that is not
    finite (macmon's NaN and Infinity, 1e999) is unknown, never a value."""
    if isinstance(value, dict):
        value = value.get("value")
    if isinstance(value, bool) or value is None:
        return None
    number: float | None = None
    if isinstance(value, int | float):
        try:
            number = float(value)
        except OverflowError:  # an integer past the largest float
            return None
    elif isinstance(value, str):
        match = re.match(r"^\s*(-?\d+(?:\.\d+)?)", value)
        number = float(match.group(1)) if match else None
    return _finite(number)


def _finite(number: float | None) -> float | None:
    return number if number is not None and math.isfinite(number) else None


def _whole(number: float | None) -> int | None:
    """A count of bytes from a reading (None stays None; a product or sum past the largest float too)."""
    return int(number) if number is not None and math.isfinite(number) else None


MAX_OUTPUT = 4 * MIB
"""The most output a host tool's JSON is read from: amd-smi on eight GPUs prints well under 1 MiB. More
fails the poll with the reason, rather than holding the console up."""
MAX_TRIES = 32
"""The candidate documents tried in one output, each tried in linear time: the search stays linear."""
_OPENING = re.compile(r"^[ \t]*(?:(\{)\s*[\"}]|(\[)\s*[\]\[{\"0-9tfnNI-])", re.MULTILINE)
"""A line that starts a JSON object or array ("[WARNING] ..." does not: no JSON value starts with W)."""


def _integer(digits: str) -> int | float:
    """A JSON integer; one too long for int() (which raises past 4300 digits) is read as a float (inf)."""
    return int(digits) if len(digits) <= 300 else float(digits)


_DECODER = json.JSONDecoder(parse_int=_integer)


def _bounded(text: str, what: str) -> None:
    if len(text) > MAX_OUTPUT:
        cap = MAX_OUTPUT // MIB
        raise ParseError(f"{what}: {len(text) / MIB:.1f} MiB of output, more than the {cap} MiB read here")


def _load(text: str, what: str) -> Any:
    """The first JSON document in the output that starts a line (tools print warnings before it).
    Linear in the output: it is capped (MAX_OUTPUT), candidates are found by one forward regex search, and
    at most MAX_TRIES of them are decoded (each failed decode costs up to the whole output: trying every
    `{` had made 245 KB of '{ ' take 16 s)."""
    _bounded(text, what)
    at = 0
    for _ in range(MAX_TRIES):
        found = _OPENING.search(text, at)
        if found is None:
            break
        start = found.start(1) if found.group(1) else found.start(2)
        at = start + 1
        try:
            return _DECODER.raw_decode(text, start)[0]  # what follows it is not read (a tool's last line may
            # have no line break: the batch's exit marker follows on the same line)
        except RecursionError:  # (ParseError is a ValueError: not caught below)
            raise ParseError(f"{what}: JSON nested too deeply") from None
        except ValueError:
            continue
    raise ParseError(f"{what}: no JSON in the output")


def parse_rocm_smi(text: str) -> tuple[GpuReading, ...]:
    """`rocm-smi --showmeminfo vram --showuse --showtemp --showpower --showproductname --json`:
    {"card0": {"VRAM Total Memory (B)": "...", ...}}; every value a string, memory in bytes."""
    data = _load(text, "rocm-smi")
    if not isinstance(data, dict):
        raise ParseError("rocm-smi: expected an object of cards")
    gpus: list[GpuReading] = []
    for key in sorted(k for k in data if k.startswith("card")):
        card = data[key]
        if not isinstance(card, dict):
            continue

        def pick(*names: str, card: dict[str, Any] = card) -> float | None:
            for name in names:
                for k, v in card.items():
                    if k.lower().startswith(name.lower()):
                        return _num(v)
            return None

        total = pick("VRAM Total Memory (B)")
        used = pick("VRAM Total Used Memory (B)")
        name = card.get("Card Series") or card.get("Card series") or card.get("Card SKU") or card.get("Device Name")
        gpus.append(
            GpuReading(
                index=int(key[4:]) if re.fullmatch(r"[0-9]{1,9}", key[4:]) else None,  # not isdigit(): "card²"
                name=name if isinstance(name, str) else None,
                uuid=card.get("Unique ID") if isinstance(card.get("Unique ID"), str) else None,
                memory_total_bytes=_whole(total),
                memory_used_bytes=_whole(used),
                utilization_pct=pick("GPU use (%)"),
                temperature_c=pick("Temperature (Sensor edge) (C)", "Temperature (Sensor junction) (C)"),
                power_w=pick("Average Graphics Package Power (W)", "Current Socket Graphics Package Power (W)"),
                power_limit_w=pick("Max Graphics Package Power (W)"),
            )
        )
    return tuple(gpus)


def parse_amd_smi(text: str) -> tuple[GpuReading, ...]:
    """`amd-smi metric --json`: a list of per-GPU objects (or {"gpu_data": [...]}); memory "MB" is MiB.
    APUs report VRAM plus GTT: both are counted, since models live in GTT there."""
    data = _load(text, "amd-smi")
    if isinstance(data, dict):
        data = data.get("gpu_data", [data])
    if not isinstance(data, list):
        raise ParseError("amd-smi: expected a list of GPUs")
    gpus: list[GpuReading] = []
    for i, gpu in enumerate(data):
        if not isinstance(gpu, dict):
            continue
        mem = gpu.get("mem_usage") if isinstance(gpu.get("mem_usage"), dict) else {}
        usage = gpu.get("usage") if isinstance(gpu.get("usage"), dict) else {}
        power = gpu.get("power") if isinstance(gpu.get("power"), dict) else {}
        temp = gpu.get("temperature") if isinstance(gpu.get("temperature"), dict) else {}
        assert isinstance(mem, dict) and isinstance(usage, dict) and isinstance(power, dict) and isinstance(temp, dict)

        def mib(key: str, mem: dict[str, Any] = mem) -> float | None:
            n = _num(mem.get(key))
            return None if n is None else _finite(n * MIB)

        # The pools reported at all; a sum is known only when each of them gave that value (a partial sum
        # would read as a smaller number, complete).
        pools = [(mib(f"total_{name}"), mib(f"used_{name}")) for name in ("vram", "gtt")]
        pools = [(t, u) for t, u in pools if t is not None or u is not None]
        totals = [t for t, _ in pools if t is not None]
        useds = [u for _, u in pools if u is not None]
        total = sum(totals) if pools and len(totals) == len(pools) else None
        used = sum(useds) if pools and len(useds) == len(pools) else None
        index = gpu.get("gpu", i)
        gpus.append(
            GpuReading(
                index=int(index) if isinstance(index, int) else i,
                name=None,
                uuid=None,
                memory_total_bytes=_whole(total),
                memory_used_bytes=_whole(used),
                utilization_pct=_num(usage.get("gfx_activity")),
                temperature_c=_num(temp.get("edge"))
                if _num(temp.get("edge")) is not None
                else _num(temp.get("hotspot")),
                power_w=_num(power.get("socket_power")),
                power_limit_w=None,
            )
        )
    return tuple(gpus)


def parse_macos(sysctl_text: str, vm_stat_text: str) -> SystemMemory:
    """`sysctl -n hw.memsize` (bytes) and `vm_stat` (page counts, page size in the header line)."""
    try:
        total = int(sysctl_text.strip().splitlines()[0].split()[-1])
    except (ValueError, IndexError):
        raise ParseError("sysctl hw.memsize: not a number") from None
    size_match = re.search(r"page size of (\d{1,20}) bytes", vm_stat_text)  # (int() raises past 4300 digits)
    if size_match is None:
        raise ParseError("vm_stat: no page size in the header")
    page = int(size_match.group(1))
    pages: dict[str, int] = {}
    for line in vm_stat_text.splitlines():
        match = re.match(r'^"?([^":]+)"?:\s+(\d{1,20})\.?\s*$', line.strip())
        if match:
            pages[match.group(1).strip().lower()] = int(match.group(2))
    free = pages.get("pages free", 0) + pages.get("pages speculative", 0)
    reclaimable = pages.get("pages purgeable", 0) + pages.get("pages inactive", 0)
    available = (free + reclaimable) * page
    share = available / total if total else 0.0
    pressure = "normal" if share > 0.25 else "warn" if share > 0.1 else "critical"
    # vm_stat counts swap-ins/outs, not bytes in swap: swap use stays unknown here (macmon reports it).
    return SystemMemory(total, available, None, None, pressure)


def parse_macmon(text: str) -> tuple[SystemMemory, GpuReading]:
    """One `macmon pipe -s 1` JSON line: memory in bytes, gpu_usage [MHz, fraction], powers in W."""
    _bounded(text, "macmon")
    line = next((ln for ln in text.splitlines() if ln.strip().startswith("{")), "")
    try:
        data = _DECODER.decode(line)
    except RecursionError:
        raise ParseError("macmon: JSON nested too deeply") from None
    except ValueError:
        raise ParseError("macmon: no JSON line in the output") from None
    if not isinstance(data, dict):
        raise ParseError("macmon: expected an object")
    mem = data.get("memory") if isinstance(data.get("memory"), dict) else {}
    assert isinstance(mem, dict)
    total, used = _num(mem.get("ram_total")), _num(mem.get("ram_usage"))
    swap, swap_total = _num(mem.get("swap_usage")), _num(mem.get("swap_total"))
    gpu_usage = data.get("gpu_usage")
    util = _num(gpu_usage[1]) if isinstance(gpu_usage, list) and len(gpu_usage) > 1 else None
    temps = data.get("temp") if isinstance(data.get("temp"), dict) else {}
    assert isinstance(temps, dict)
    gpu_temp = _num(temps.get("gpu_temp_avg"))
    memory = SystemMemory(
        _whole(total),
        _whole(total - used) if total is not None and used is not None else None,
        _whole(swap),
        _whole(swap_total),
    )
    gpu = GpuReading(
        index=0,
        name="Apple GPU",
        uuid=None,
        memory_total_bytes=memory.total_bytes,
        memory_used_bytes=_whole(used),
        utilization_pct=_finite(util * 100) if util is not None else None,
        temperature_c=gpu_temp if gpu_temp else None,  # macmon reports 0.0 when it cannot read it
        power_w=_num(data.get("gpu_power")),
        power_limit_w=None,
        memory_source="system",
    )
    return memory, gpu
