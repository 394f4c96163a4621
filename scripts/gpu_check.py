"""The device check of issue 19: poolconsole's two GPU readers on a real NVIDIA GPU, against nvidia-smi and
NVML read directly.

scripts/gpu-check.sh installs the package, starts a throwaway sshd on 127.0.0.1 and writes a config with
this machine twice: `self-nvml` (`local = true`, read through NVML) and `self-ssh` (nvidia-smi over that
sshd), each with an engine on GPU 0. Then `run` here: readings side by side and compared within
tolerances, idle and under a torch workload of known size (its process mapped to the engine, with its
memory), the reading after the workload stops, the cost per sample of both readers, and masked captures.

Three layers, so that most of it is tested on any machine (tests/unit/test_gpu_check.py, on the H200
captures): the pure part (parsing both references and `status --json`, comparing, masking) imports the
standard library only; the driver (`run`, `keygen`, `serve-ssh`) imports poolconsole and asyncssh when
called; `workload` runs under the python that holds torch, which need not have poolconsole's packages.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

MIB = 1024 * 1024
GIB = 1024 * MIB

REFERENCE_QUERY = (
    "index", "uuid", "name", "pci.bus_id", "driver_version", "memory.total", "memory.used", "memory.free",
    "memory.reserved", "utilization.gpu", "utilization.memory", "temperature.gpu", "power.draw", "power.limit",
    "clocks.sm", "clocks.mem", "pcie.link.gen.current", "pcie.link.width.current", "pstate", "compute_cap",
)  # fmt: skip
"""The query of the H200 captures (tests/fixtures/real/gpu/nvidia-h200/CAPTURE.md), so new captures match."""
APPS_QUERY = ("gpu_uuid", "pid", "process_name", "used_memory")

FIELDS = (
    "memory_total_bytes",
    "memory_used_bytes",
    "memory_reserved_bytes",
    "utilization_pct",
    "temperature_c",
    "power_w",
    "power_limit_w",
)
"""What is compared. Memory "used" means nvidia-smi's memory.used: without driver-reserved memory."""

# nvidia-smi's names, header form ("memory.used [MiB]" cut at " [") and query form, to our fields.
_SMI_NAMES = {
    "memory.total": "memory_total_bytes",
    "memory.used": "memory_used_bytes",
    "memory.reserved": "memory_reserved_bytes",
    "utilization.gpu": "utilization_pct",
    "temperature.gpu": "temperature_c",
    "power.draw": "power_w",
    "power.limit": "power_limit_w",
}
_UNIT = re.compile(r"\s*(MiB|GiB|KiB|W|%|MHz|C)$")


@dataclass(frozen=True)
class Gpu:
    """One GPU as one source read it; None = the source gave no value."""

    index: int | None
    uuid: str | None
    name: str | None
    memory_total_bytes: float | None = None
    memory_used_bytes: float | None = None
    memory_reserved_bytes: float | None = None
    utilization_pct: float | None = None
    temperature_c: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None

    def get(self, name: str) -> float | None:
        value = getattr(self, name)
        return None if value is None else float(value)


@dataclass(frozen=True)
class Process:
    pid: int | None
    gpu_uuid: str | None
    used_memory_bytes: float | None
    engine: str | None = None


@dataclass(frozen=True)
class Reading:
    """What one source said at one moment."""

    source: str
    gpus: tuple[Gpu, ...]
    processes: tuple[Process, ...] = ()
    detail: str = ""
    """poolconsole: `source=nvml state=ok`, and the error if any."""


@dataclass(frozen=True)
class Tolerance:
    absolute: float
    relative: float = 0.0

    def allowed(self, reference: float) -> float:
        return max(self.absolute, abs(reference) * self.relative)


TOLERANCES: Mapping[str, Tolerance] = {
    "memory_total_bytes": Tolerance(1 * MIB),  # nvidia-smi prints whole MiB
    "memory_used_bytes": Tolerance(64 * MIB),  # far below reserved (616 MiB on H200): v1's "used" fails
    "memory_reserved_bytes": Tolerance(2 * MIB),
    "utilization_pct": Tolerance(15),  # each source samples its own window
    "temperature_c": Tolerance(3),
    "power_w": Tolerance(25, 0.10),  # instant vs averaged readings, read moments apart
    "power_limit_w": Tolerance(1),
}
PROCESS_MEMORY = Tolerance(64 * MIB)
"""A process's memory as poolconsole reports it against nvidia-smi's and NVML's."""


@dataclass(frozen=True)
class Check:
    what: str
    ok: bool
    detail: str


# -- the references ------------------------------------------------------------------------------


def _cell(text: str) -> str | None:
    text = text.strip()
    if not text or text.startswith("[") or text.lower() in {"n/a", "not supported"}:
        return None
    return text


def _number(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        return float(_UNIT.sub("", text))
    except ValueError:
        return None


def _rows(text: str, fields: Sequence[str] | None) -> Iterator[dict[str, str | None]]:
    """`--format=csv` (a header, values with units) when `fields` is None, else `csv,noheader,nounits` of
    `fields`. Strict: a row with the wrong number of values is an error, never skipped (a reference)."""
    lines = [line for line in text.splitlines() if line.strip()]
    if fields is None:
        if not lines:
            raise ValueError("no header line")
        names = [h.strip().split(" [")[0] for h in lines[0].split(",")]
        lines = lines[1:]
    else:
        names = list(fields)
    for line in lines:
        if line.lower().startswith("no running"):
            continue
        values = line.split(",")
        if len(values) != len(names):
            raise ValueError(f"{len(values)} values for {len(names)} fields: {line[:120]!r}")
        yield {n: _cell(v) for n, v in zip(names, values, strict=True)}


def parse_smi_gpus(text: str, fields: Sequence[str] | None = None) -> Reading:
    """nvidia-smi `--query-gpu` output (see `_rows`) as a reference reading."""
    gpus: list[Gpu] = []
    for row in _rows(text, fields):
        values: dict[str, float | None] = {}
        for smi_name, ours in _SMI_NAMES.items():
            n = _number(row.get(smi_name))
            values[ours] = n * MIB if n is not None and ours.startswith("memory") else n
        index = _number(row.get("index"))
        gpus.append(Gpu(None if index is None else int(index), row.get("uuid"), row.get("name"), **values))
    return Reading("nvidia-smi", tuple(gpus))


def parse_smi_apps(text: str, fields: Sequence[str] | None = None) -> tuple[Process, ...]:
    """`--query-compute-apps=gpu_uuid,pid,process_name,used_memory` (header: `used_gpu_memory [MiB]`)."""
    out: list[Process] = []
    for row in _rows(text, fields):
        pid = _number(row.get("pid"))
        used = _number(row.get("used_memory", row.get("used_gpu_memory")))
        out.append(
            Process(None if pid is None else int(pid), row.get("gpu_uuid"), None if used is None else used * MIB)
        )
    return tuple(out)


def parse_nvml_dump(doc: Mapping[str, Any]) -> Reading:
    """A `dump_nvml` document (the shape of the H200 captures' nvml.*.json): bytes and milliwatts. "Used"
    is the v2 reading's (without reserved memory, as nvidia-smi); with only v1, v1's is taken as is."""
    gpus: list[Gpu] = []
    processes: list[Process] = []
    for i, g in enumerate(doc.get("gpus", [])):
        v1 = g.get("memory_v1_fields") or {}
        v2 = g.get("memory_v2_fields") or {}
        memory = v2 or v1
        util = g.get("utilization") or {}
        power = g.get("power_mw")
        limit = g.get("power_limit_mw")
        gpus.append(
            Gpu(
                g.get("index", i),
                g.get("uuid"),
                g.get("name"),
                memory_total_bytes=memory.get("total"),
                memory_used_bytes=memory.get("used"),
                memory_reserved_bytes=v2.get("reserved"),
                utilization_pct=util.get("gpu"),
                temperature_c=g.get("temperature_c"),
                power_w=None if power is None else power / 1000,
                power_limit_w=None if limit is None else limit / 1000,
            )
        )
        for p in g.get("compute_procs") or []:
            processes.append(Process(p.get("pid"), g.get("uuid"), p.get("used_gpu_memory")))
    return Reading("nvml", tuple(gpus), tuple(processes))


def parse_status(doc: Mapping[str, Any]) -> dict[str, Reading]:
    """`poolconsole status --json`: each host's GPUs and processes, by host name."""
    out: dict[str, Reading] = {}
    for h in doc.get("hosts", []):
        gpus = tuple(Gpu(**{k: g.get(k) for k in ("index", "uuid", "name", *FIELDS)}) for g in h.get("gpus", []))
        processes = tuple(
            Process(p.get("pid"), p.get("gpu_uuid"), p.get("used_memory_bytes"), p.get("engine"))
            for p in h.get("processes", [])
        )
        detail = f"source={h.get('source')} state={h.get('state')}" + (f" error={h['error']}" if h.get("error") else "")
        out[h["name"]] = Reading(f"poolconsole:{h['name']}", gpus, processes, detail)
    return out


# -- comparing -------------------------------------------------------------------------------------


def fmt(name: str, value: float | None) -> str:
    if value is None:
        return "n/a"
    if name.startswith("memory"):
        return f"{value / MIB:.1f} MiB"
    if name == "utilization_pct":
        return f"{value:.0f} %"
    if name == "temperature_c":
        return f"{value:.0f} C"
    return f"{value:.2f} W"


def same_gpu(gpu: Gpu, reading: Reading) -> Gpu | None:
    """The GPU of `reading` that `gpu` is: by UUID, else by index."""
    if gpu.uuid:
        match = next((g for g in reading.gpus if g.uuid == gpu.uuid), None)
        if match is not None:
            return match
    return next((g for g in reading.gpus if g.index == gpu.index and g.index is not None), None)


def compare(
    label: str, candidate: Gpu, references: Sequence[Gpu], tolerances: Mapping[str, Tolerance] = TOLERANCES
) -> list[Check]:
    """Each field of `candidate` against the references (read before and after it: the value must lie in
    their range widened by the tolerance). A value the references have and the candidate lacks fails: a
    metric lost reads n/a, never 0, but it is still lost."""
    checks: list[Check] = []
    for name in FIELDS:
        value = candidate.get(name)
        known = [v for v in (r.get(name) for r in references) if v is not None]
        what = f"{label} {name}"
        if not known:
            checks.append(Check(what, True, f"{fmt(name, value)}; no reference value"))
            continue
        lo, hi = min(known), max(known)
        tol = tolerances[name].allowed(max(abs(lo), abs(hi)))
        span = fmt(name, lo) if lo == hi else f"{fmt(name, lo)}..{fmt(name, hi)}"
        if value is None:
            checks.append(Check(what, False, f"n/a where the reference reads {span}"))
            continue
        ok = lo - tol <= value <= hi + tol
        checks.append(Check(what, ok, f"{fmt(name, value)} vs {span} (within {fmt(name, tol)})"))
    return checks


def compare_readings(label: str, candidate: Reading, references: Sequence[Reading]) -> list[Check]:
    """Every GPU of `candidate` against the same GPU in each reference, plus that each is found."""
    checks: list[Check] = []
    if not candidate.gpus:
        return [Check(f"{label}: GPUs", False, f"no GPU read ({candidate.detail})")]
    for gpu in candidate.gpus:
        matches = [m for m in (same_gpu(gpu, r) for r in references) if m is not None]
        where = f"{label} GPU {gpu.index}"
        if len(matches) != len(references):
            checks.append(Check(f"{where}: same GPU", False, "not found in every reference by UUID or index"))
        if matches:
            checks += compare(where, gpu, matches)
    return checks


def side_by_side(columns: Sequence[tuple[str, Gpu | None]]) -> str:
    """A table: one row per compared field, one column per source."""
    rows = [["", *(title for title, _ in columns)]]
    rows += [[name, *(fmt(name, g.get(name) if g else None) for _, g in columns)] for name in FIELDS]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))) for r in rows
    )


def check_process(
    label: str,
    reading: Reading,
    pid: int,
    expect_bytes: tuple[float, float],
    engine: str | None = None,
    reference_bytes: float | None = None,
) -> list[Check]:
    """The workload's process in `reading`: listed, mapped to `engine` (when given), holding memory within
    `expect_bytes` (lo, hi) and matching the direct reading of it (`reference_bytes`)."""
    proc = next((p for p in reading.processes if p.pid == pid), None)
    if proc is None:
        listed = ", ".join(f"{p.pid} ({fmt('memory', p.used_memory_bytes)})" for p in reading.processes) or "none"
        return [Check(f"{label}: workload pid {pid} listed", False, f"listed: {listed} ({reading.detail})")]
    checks = [Check(f"{label}: workload pid {pid} listed", True, "")]
    if engine is not None:
        checks.append(
            Check(f"{label}: process mapped to engine {engine}", proc.engine == engine, f"engine={proc.engine}")
        )
    used = proc.used_memory_bytes
    lo, hi = expect_bytes
    checks.append(
        Check(
            f"{label}: process memory",
            used is not None and lo <= used <= hi,
            f"{fmt('memory', used)}, expected {fmt('memory', lo)}..{fmt('memory', hi)}",
        )
    )
    if reference_bytes is not None:
        tol = PROCESS_MEMORY.allowed(reference_bytes)
        checks.append(
            Check(
                f"{label}: process memory vs direct reading",
                used is not None and abs(used - reference_bytes) <= tol,
                f"{fmt('memory', used)} vs {fmt('memory', reference_bytes)}",
            )
        )
    return checks


@dataclass(frozen=True)
class Sample:
    at: float
    """Monotonic time the reading arrived."""
    present: bool
    """The workload's process is listed."""
    used_bytes: float | None


def follows(label: str, timeline: Sequence[Sample], exited_at: float, budget_s: float) -> tuple[Check, float | None]:
    """After the workload exited at `exited_at`, the first reading without its process must arrive within
    `budget_s` (one poll: the interval plus the batch's own time). Returns the check and the latency."""
    after = [s for s in timeline if s.at >= exited_at]
    gone = next((s for s in after if not s.present), None)
    if gone is None:
        return Check(
            f"{label}: reading follows the stop", False, f"{len(after)} readings after the exit, all list it"
        ), None
    latency = gone.at - exited_at
    stale = sum(1 for s in after if s.at < gone.at)
    return (
        Check(
            f"{label}: reading follows the stop",
            latency <= budget_s,
            f"{latency:.2f} s after the exit (budget {budget_s:.2f} s; {stale} stale reading(s) first)",
        ),
        latency,
    )


def cost(walls_s: Sequence[float], cpus_s: Sequence[float]) -> dict[str, float]:
    """Per sample, in milliseconds: median and p95 of the wall time, mean CPU time."""
    ordered = sorted(walls_s)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))] if ordered else float("nan")
    return {
        "samples": float(len(walls_s)),
        "wall_median_ms": round(statistics.median(walls_s) * 1000, 3) if walls_s else float("nan"),
        "wall_p95_ms": round(p95 * 1000, 3),
        "cpu_mean_ms": round(statistics.fmean(cpus_s) * 1000, 3) if cpus_s else float("nan"),
    }


# -- masking ---------------------------------------------------------------------------------------

_UUID = re.compile(r"\b((?:GPU|MIG)-)?([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})\b")
_MASKED_UUID = re.compile(r"^00000000-0000-0000-0000-\d{12}$")
_SERIALS = (
    re.compile(r"<(?:serial|chassis_serial_number|board_serial)>\s*([^<\s][^<]*?)\s*</"),
    re.compile(r"^\s*(?:Serial Number|Chassis Serial Number)\s*:\s*(\S.*?)\s*$", re.MULTILINE),
    re.compile(r"^serial\|\d+\|(.+?)\s*$", re.MULTILINE),  # per-field.txt: field|exit code|output
)
_NOT_SECRET = {"", "n/a", "[n/a]", "none", "0", "not supported", "[not supported]"}


class Masker:
    """Masks what identifies the machine in a capture: GPU and MIG UUIDs (each to a stable stand-in of the
    same shape, so a process's gpu_uuid still matches its GPU), serial numbers (to zeros of the same
    length when numeric) and host names (to `gpu-host`). Serials and names are learnt: from `learn` on a
    capture, or given. Masking a masked text changes nothing."""

    def __init__(self, hostnames: Iterable[str] = (), serials: Iterable[str] = ()) -> None:
        self.uuids: dict[str, str] = {}
        self.serials: set[str] = set()
        self.hostnames = sorted({h for h in hostnames if len(h) >= 3}, key=len, reverse=True)
        for serial in serials:
            self.add_serial(serial)

    def add_serial(self, serial: str) -> None:
        serial = serial.strip()
        if serial.lower() not in _NOT_SECRET and not set(serial) <= {"0", "x"}:
            self.serials.add(serial)

    def learn(self, text: str) -> None:
        """Serial numbers in nvidia-smi's XML and text, per-field listings, and `serial` CSV columns."""
        for pattern in _SERIALS:
            for match in pattern.finditer(text):
                self.add_serial(match.group(1))
        lines = text.splitlines()
        if lines and "serial" in {h.strip().split(" [")[0] for h in lines[0].split(",")}:
            names = [h.strip().split(" [")[0] for h in lines[0].split(",")]
            for line in lines[1:]:
                values = line.split(",")
                for name, value in zip(names, values, strict=False):
                    if name in ("serial", "platform.chassis_serial_number"):
                        self.add_serial(value)

    def _uuid(self, match: re.Match[str]) -> str:
        prefix, body = match.group(1) or "", match.group(2)
        if _MASKED_UUID.match(body):
            return match.group(0)
        masked = self.uuids.setdefault(body.lower(), f"00000000-0000-0000-0000-{len(self.uuids) + 1:012d}")
        return prefix + masked

    def mask(self, text: str) -> str:
        text = _UUID.sub(self._uuid, text)
        for serial in sorted(self.serials, key=len, reverse=True):
            stand_in = "0" * len(serial) if serial.isdigit() else "MASKED-SERIAL"
            text = re.sub(rf"(?<![0-9A-Za-z]){re.escape(serial)}(?![0-9A-Za-z])", stand_in, text)
        for name in self.hostnames:
            text = re.sub(rf"(?<![\w.-]){re.escape(name)}(?![\w-])", "gpu-host", text, flags=re.IGNORECASE)
        return text

    def leaks(self, text: str) -> list[str]:
        """Learnt identifiers still in `text` (a check on what is written out)."""
        found = [u for u in self.uuids if u in text.lower()]
        found += [s for s in self.serials if re.search(rf"(?<![0-9A-Za-z]){re.escape(s)}(?![0-9A-Za-z])", text)]
        found += [h for h in self.hostnames if re.search(rf"(?<![\w.-]){re.escape(h)}(?![\w-])", text, re.IGNORECASE)]
        return found


# -- the device driver (impure: NVML, nvidia-smi, poolconsole, processes) ------------------------------


def _nvml_call(fn: Any, *args: Any) -> Any:
    import pynvml

    try:
        return fn(*args)
    except pynvml.NVMLError:
        return None


def dump_nvml() -> dict[str, Any]:
    """NVML read directly, in the shape of the H200 captures' nvml.*.json (bytes, milliwatts). Raises
    when NVML does not load. `power_limit_mw` is the management limit (nvidia-smi's power.limit);
    `enforced_power_limit_mw` is what poolconsole's reader reports."""
    import pynvml

    pynvml.nvmlInit()
    try:
        doc: dict[str, Any] = {
            "driver": _nvml_call(pynvml.nvmlSystemGetDriverVersion),
            "nvml": _nvml_call(pynvml.nvmlSystemGetNVMLVersion),
            "cuda_driver": _nvml_call(pynvml.nvmlSystemGetCudaDriverVersion),
            "gpus": [],
        }
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            v1 = _nvml_call(pynvml.nvmlDeviceGetMemoryInfo, h)
            v2 = _nvml_call(pynvml.nvmlDeviceGetMemoryInfo, h, pynvml.nvmlMemory_v2)
            util = _nvml_call(pynvml.nvmlDeviceGetUtilizationRates, h)
            procs = _nvml_call(pynvml.nvmlDeviceGetComputeRunningProcesses, h) or []
            doc["gpus"].append(
                {
                    "index": i,
                    "name": _nvml_call(pynvml.nvmlDeviceGetName, h),
                    "uuid": _nvml_call(pynvml.nvmlDeviceGetUUID, h),
                    "serial": _nvml_call(pynvml.nvmlDeviceGetSerial, h),
                    "memory_v1_fields": {"total": v1.total, "used": v1.used, "free": v1.free} if v1 else {},
                    "memory_v2_fields": (
                        {"total": v2.total, "reserved": v2.reserved, "used": v2.used, "free": v2.free} if v2 else {}
                    ),
                    "utilization": {"gpu": util.gpu, "memory": util.memory} if util else {},
                    "temperature_c": _nvml_call(pynvml.nvmlDeviceGetTemperature, h, pynvml.NVML_TEMPERATURE_GPU),
                    "power_mw": _nvml_call(pynvml.nvmlDeviceGetPowerUsage, h),
                    "power_limit_mw": _nvml_call(pynvml.nvmlDeviceGetPowerManagementLimit, h),
                    "enforced_power_limit_mw": _nvml_call(pynvml.nvmlDeviceGetEnforcedPowerLimit, h),
                    "clock_sm_mhz": _nvml_call(pynvml.nvmlDeviceGetClockInfo, h, pynvml.NVML_CLOCK_SM),
                    "pcie_gen": _nvml_call(pynvml.nvmlDeviceGetCurrPcieLinkGeneration, h),
                    "pcie_width": _nvml_call(pynvml.nvmlDeviceGetCurrPcieLinkWidth, h),
                    "compute_procs": [{"pid": p.pid, "used_gpu_memory": p.usedGpuMemory} for p in procs],
                    "cuda_cc": _nvml_call(pynvml.nvmlDeviceGetCudaComputeCapability, h),
                    "ecc_mode": _nvml_call(pynvml.nvmlDeviceGetEccMode, h),
                    "mig_mode": _nvml_call(pynvml.nvmlDeviceGetMigMode, h),
                }
            )
        return doc
    finally:
        pynvml.nvmlShutdown()


def smi(*args: str, timeout_s: float = 30) -> str:
    """nvidia-smi's output (stderr folded in), or a line saying why there is none."""
    try:
        done = subprocess.run(["nvidia-smi", *args], capture_output=True, text=True, timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"# nvidia-smi {' '.join(args)}: {exc}\n"
    return done.stdout + (f"# exit {done.returncode}: {done.stderr}" if done.returncode else "")


def this_machine_masker() -> Masker:
    """A masker that knows this machine's host names and GPU serial numbers."""
    names = {socket.gethostname(), socket.getfqdn(), socket.gethostname().split(".")[0]}
    masker = Masker(names - {"localhost", "localhost.localdomain"})
    for line in smi("--query-gpu=serial,uuid", "--format=csv,noheader").splitlines():
        if not line.startswith("#"):
            masker.add_serial(line.split(",")[0])
            masker.mask(line)  # learns the UUID's stand-in, so uuids are numbered in GPU order
    with contextlib.suppress(Exception):
        for g in dump_nvml()["gpus"]:
            masker.add_serial(str(g.get("serial") or ""))
    return masker


def loop_cpu() -> dict[int, float]:
    """CPU seconds of each streamed sample loop on this machine, by pid (the shell running poolconsole's
    `while :` loop, with the nvidia-smi runs it reaped): what the samples cost the host."""
    out: dict[int, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            if b"@@poolconsole-sample" not in cmdline or b"while :" not in cmdline:
                continue
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[int(entry.name)] = sum(int(f) for f in fields[11:15]) / tick  # utime stime cutime cstime
    return out


@dataclass
class Report:
    masker: Masker
    captures: Path
    checks: list[Check] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)
    tables: list[str] = field(default_factory=list)

    def say(self, text: str = "") -> None:
        print(self.masker.mask(text), flush=True)

    def add(self, checks: Iterable[Check], group: str) -> None:
        checks = list(checks)
        self.checks += checks
        failed = [c for c in checks if not c.ok]
        self.say(f"  {group}: {len(checks) - len(failed)}/{len(checks)} checks pass")
        for c in failed:
            self.say(f"    FAIL {c.what}: {c.detail}")

    def table(self, title: str, text: str) -> None:
        self.tables.append(f"{title}\n{text}\n")
        self.say(title)
        self.say(text)

    def save(self, name: str, text: str) -> None:
        (self.captures / name).write_text(self.masker.mask(text))


@dataclass
class Workload:
    proc: subprocess.Popen[str]
    pid: int
    held_bytes: int
    torch_reserved_bytes: int
    info: dict[str, Any]


def start_workload(torch_python: str, gib: float, report: Report) -> Workload | None:
    """The torch workload under `torch_python`, or None (reported) when it cannot start."""
    env = {**os.environ, "CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": "0"}
    try:
        proc = subprocess.Popen(
            [torch_python, __file__, "workload", "--gib", str(gib)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
        )
    except OSError as exc:
        report.say(f"no workload could be started: {exc}")
        return None
    deadline = time.monotonic() + 180
    assert proc.stdout is not None
    output: list[str] = []
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        output.append(line.rstrip())
        if line.startswith("{"):
            info = json.loads(line)
            if info.get("ready"):
                return Workload(
                    proc, int(info["pid"]), int(info["held_bytes"]), int(info["torch_reserved_bytes"]), info
                )
            break
    with contextlib.suppress(OSError):
        proc.kill()
    report.say("no workload could be started: " + " | ".join(output[-6:]))
    return None


class Driver:
    """The checks, in order; each step records its checks and captures and never stops the next."""

    def __init__(self, args: argparse.Namespace) -> None:
        from poolconsole.config import load_config

        self.args = args
        self.config_path = Path(args.config)
        self.config = load_config(self.config_path)
        self.local = next(h for h in self.config.hosts if h.local)
        self.remote = next(h for h in self.config.hosts if not h.local)
        self.engine_of = {e.host: e.name for e in self.config.engines if e.host}
        self.captures = Path(args.captures)
        self.captures.mkdir(parents=True, exist_ok=True)
        self.report = Report(this_machine_masker(), self.captures)
        self.idle_used: float | None = None

    # one reading of everything ----------------------------------------------------------------
    def reference(self) -> tuple[Reading, tuple[Process, ...], Reading | None, dict[str, Any] | None, str, str]:
        gpus = smi(f"--query-gpu={','.join(REFERENCE_QUERY)}", "--format=csv")
        apps = smi(f"--query-compute-apps={','.join(APPS_QUERY)}", "--format=csv")
        try:
            dump: dict[str, Any] | None = dump_nvml()
        except Exception as exc:  # NVML absent or broken: reported, the rest goes on
            self.report.say(f"NVML read directly failed: {type(exc).__name__}: {exc}")
            dump = None
        return (
            parse_smi_gpus(gpus),
            parse_smi_apps(apps),
            parse_nvml_dump(dump) if dump else None,
            dump,
            gpus,
            apps,
        )

    def status(self) -> dict[str, Any]:
        started = time.monotonic()
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "poolconsole",
                "status",
                "--config",
                str(self.config_path),
                "--json",
                "--samples",
                "1",
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        self.report.say(f"  poolconsole status --json: exit {done.returncode} in {time.monotonic() - started:.1f} s")
        if done.returncode not in (0, 1):  # 1: an engine is down (there is none on port 9): expected
            raise RuntimeError(f"status failed: {done.stderr[-1500:]}")
        doc: dict[str, Any] = json.loads(done.stdout)
        return doc

    def round(self, phase: str) -> tuple[dict[str, Reading], tuple[Process, ...], Reading | None]:
        """References before and after one `status --json`; both hosts compared with both references."""
        r = self.report
        r.say(f"\n== {phase}: nvidia-smi and NVML direct, poolconsole status --json, then both again")
        smi_before, apps, nvml_before, dump, gpus_text, apps_text = self.reference()
        doc = self.status()
        smi_after, _, nvml_after, _, _, _ = self.reference()
        r.save(f"query-gpu.{phase}.csv", gpus_text)
        r.save(f"query-compute-apps.{phase}.csv", apps_text)
        r.save(
            f"query-gpu.{phase}.noheader-nounits.csv",
            smi(f"--query-gpu={','.join(REFERENCE_QUERY)}", "--format=csv,noheader,nounits"),
        )
        r.save(f"status.{phase}.json", json.dumps(doc, indent=1))
        r.save(f"nvidia-smi.{phase}.txt", smi())
        r.save(f"nvidia-smi-q.{phase}.xml", smi("-q", "-x"))
        if dump is not None:
            r.save(f"nvml.{phase}.json", json.dumps(dump, indent=1))
        hosts = parse_status(doc)
        smi_refs = [smi_before, smi_after]
        nvml_refs = [x for x in (nvml_before, nvml_after) if x is not None]
        checks: list[Check] = []
        for name, want in ((self.local.name, "nvml"), (self.remote.name, "nvidia-smi")):
            reading = hosts.get(name)
            got = reading.detail if reading else "missing from status"
            checks.append(
                Check(f"{phase} {name}: read through {want}, state ok", f"source={want} state=ok" in got, got)
            )
        for ref_gpu in smi_before.gpus:
            columns: list[tuple[str, Gpu | None]] = [("nvidia-smi", ref_gpu)]
            columns += [("NVML", same_gpu(ref_gpu, nvml_refs[0]) if nvml_refs else None)]
            for name in (self.local.name, self.remote.name):
                columns.append((f"pc:{name}", same_gpu(ref_gpu, hosts[name]) if name in hosts else None))
            columns += [("nvidia-smi after", same_gpu(ref_gpu, smi_after))]
            columns += [("NVML after", same_gpu(ref_gpu, nvml_refs[-1]) if nvml_refs else None)]
            r.table(f"-- {phase}, GPU {ref_gpu.index} ({ref_gpu.name}):", side_by_side(columns))
        for name, reading in hosts.items():
            checks += compare_readings(f"{phase} {name} vs nvidia-smi", reading, smi_refs)
            if nvml_refs:
                checks += compare_readings(f"{phase} {name} vs NVML", reading, nvml_refs)
        if nvml_refs:
            checks += compare_readings(f"{phase} NVML direct vs nvidia-smi", nvml_refs[0], smi_refs)
        r.add(checks, f"{phase} readings")
        self.report.data[phase] = {"hosts": {n: h.detail for n, h in hosts.items()}}
        return hosts, apps, nvml_before

    # the workload ---------------------------------------------------------------------------------
    def under_load(self, work: Workload) -> None:
        r = self.report
        time.sleep(3)  # utilisation and power settle
        hosts, apps, nvml = self.round("load")
        r.save("pmon.load.txt", smi("pmon", "-c", "1", timeout_s=15))
        r.save("dmon.load.txt", smi("dmon", "-c", "3", timeout_s=15))
        direct = next((p.used_memory_bytes for p in apps if p.pid == work.pid), None)
        nvml_direct = next((p.used_memory_bytes for p in nvml.processes if p.pid == work.pid), None) if nvml else None
        if direct is None and apps:
            r.say(f"  nvidia-smi lists pids {[p.pid for p in apps]}, not the workload's {work.pid} (a PID namespace?)")
        expect = (float(work.torch_reserved_bytes), float(work.torch_reserved_bytes + 2 * GIB))
        checks: list[Check] = []
        for name, reading in hosts.items():
            checks += check_process(
                f"load {name}",
                reading,
                work.pid,
                expect,
                self.engine_of.get(name),
                direct if direct is not None else nvml_direct,
            )
        if direct is not None:
            overhead = direct - work.torch_reserved_bytes
            r.say(f"  workload: torch holds {fmt('memory', work.torch_reserved_bytes)}; the process uses "
                  f"{fmt('memory', direct)} (CUDA context and the rest: {fmt('memory', overhead)})")  # fmt: skip
            r.data["workload"] = {**work.info, "process_used_bytes": direct, "context_overhead_bytes": overhead}
        r.add(checks, "workload process")

    async def stop_and_follow(self, work: Workload) -> None:
        """Stop the workload while the console's streamed nvidia-smi loop runs; then one poll of each reader."""
        from poolconsole.collect.hosts.poll import HostPoller
        from poolconsole.collect.hosts.sampling import local_snapshot
        from poolconsole.collect.ssh import SSHPool

        r = self.report
        r.say("\n== stop the workload: does the next reading follow?")
        interval = 1.0
        settings = self.config.settings
        pool = SSHPool([self.remote], settings.ssh_timeout_s, settings.ssh_concurrency)
        stream = HostPoller(self.remote, pool[self.remote.name], self.config.engines, interval)
        timeline: list[Sample] = []
        checks: list[Check] = []

        async def sample() -> None:
            snap = await stream.poll()
            used = snap.gpus[0].memory_used_bytes if snap.gpus else None
            timeline.append(Sample(time.monotonic(), any(p.pid == work.pid for p in snap.processes), used))

        try:
            for _ in range(10):
                await sample()
                if timeline[-1].present:
                    break
            if not timeline or not timeline[-1].present:
                r.say("  the streamed loop never listed the workload: the follow check cannot tell anything")
            once = HostPoller(self.remote, pool[self.remote.name], self.config.engines)
            await once.poll()  # probes the host
            batch_started = time.monotonic()
            await once.poll()  # the batch alone: what one sample takes
            batch_s = time.monotonic() - batch_started
            work.proc.send_signal(signal.SIGTERM)
            rc = await asyncio.to_thread(work.proc.wait, 60)
            exited_at = time.monotonic()
            r.say(f"  workload exited ({rc})")
            for _ in range(10):
                await sample()
                if not timeline[-1].present:
                    break
            budget = interval + batch_s + 0.5
            check, latency = follows(f"{self.remote.name} streamed nvidia-smi", timeline, exited_at, budget)
            checks.append(check)
            after = await once.poll()
            checks.append(
                Check(
                    f"{self.remote.name} one poll after the stop",
                    not any(p.pid == work.pid for p in after.processes),
                    after.state.value,
                )
            )
            local = await asyncio.to_thread(local_snapshot, self.local)
            if local is None:
                checks.append(Check(f"{self.local.name} one NVML poll after the stop", False, "NVML did not load"))
            else:
                gone = not any(p.pid == work.pid for p in local.processes)
                used = local.gpus[0].memory_used_bytes if local.gpus else None
                back = (
                    used is not None
                    and self.idle_used is not None
                    and used <= self.idle_used + TOLERANCES["memory_used_bytes"].absolute
                )
                checks.append(
                    Check(
                        f"{self.local.name} one NVML poll after the stop",
                        gone and back,
                        f"listed={not gone} used={fmt('memory', used)} idle={fmt('memory', self.idle_used)}",
                    )
                )
            r.data["follow"] = {
                "interval_s": interval,
                "batch_s": batch_s,
                "latency_s": latency,
                "timeline": [
                    {"t": round(s.at - exited_at, 3), "present": s.present, "used_bytes": s.used_bytes}
                    for s in timeline
                ],
            }
        finally:
            await stream.close()
            await pool.close()
        r.add(checks, "stop")

    async def costs(self) -> None:
        """Cost per sample: poolconsole's NVML reader, and its streamed nvidia-smi loop (client and host)."""
        from poolconsole.collect.hosts.nvml import NvmlUnavailable, read_nvml
        from poolconsole.collect.hosts.poll import HostPoller
        from poolconsole.collect.ssh import SSHPool

        r = self.report
        r.say("\n== cost per sample")
        out: dict[str, Any] = {}
        walls: list[float] = []
        cpus: list[float] = []
        try:
            for _ in range(20):
                t, c = time.perf_counter(), time.process_time()
                read_nvml()
                walls.append(time.perf_counter() - t)
                cpus.append(time.process_time() - c)
            out["nvml_read"] = cost(walls, cpus)
        except NvmlUnavailable as exc:
            out["nvml_read"] = {"error": str(exc)}
        settings = self.config.settings
        pool = SSHPool([self.remote], settings.ssh_timeout_s, settings.ssh_concurrency)
        try:
            once = HostPoller(self.remote, pool[self.remote.name], self.config.engines)
            await once.poll()  # connect and probe
            walls, cpus = [], []
            for _ in range(5):
                t, c = time.perf_counter(), time.process_time()
                await once.poll()
                walls.append(time.perf_counter() - t)
                cpus.append(time.process_time() - c)
            out["ssh_exec_poll"] = cost(walls, cpus)
            interval = 0.5
            stream = HostPoller(self.remote, pool[self.remote.name], self.config.engines, interval)
            try:
                await stream.poll()
                await stream.poll()
                n = 10
                t, c, host = time.perf_counter(), time.process_time(), loop_cpu()
                for _ in range(n):
                    await stream.poll()
                wall = (time.perf_counter() - t) / n
                client = (time.process_time() - c) / n
                host_after = loop_cpu()
                loops = [pid for pid in host_after if pid in host]  # the stream's loop (alone there, normally)
                out["ssh_stream_sample"] = {
                    "interval_s": interval,
                    "samples": n,
                    "wall_per_sample_ms": round(wall * 1000, 3),
                    "client_cpu_per_sample_ms": round(client * 1000, 3),
                    "host_cpu_per_sample_ms": (
                        round(sum(host_after[p] - host[p] for p in loops) / n * 1000, 3) if loops else None
                    ),
                    "loops_seen": len(loops),
                }
            finally:
                await stream.close()
        finally:
            await pool.close()
        for name, values in out.items():
            r.say(f"  {name}: {json.dumps(values)}")
        r.data["costs"] = out

    @contextlib.contextmanager
    def step(self, name: str) -> Iterator[None]:
        """A step that breaks is a failed check with its error; the next step still runs."""
        try:
            yield
        except Exception as exc:
            self.report.say(f"  {name} broke: {type(exc).__name__}: {exc}")
            self.report.checks.append(Check(name, False, f"{type(exc).__name__}: {exc}"))

    async def run(self) -> int:
        r = self.report
        r.say(f"== GPU check: config {self.config_path}, sshd: {self.args.sshd}")
        r.save("version.txt", smi("--version"))
        r.save("topo.txt", smi("topo", "-m"))
        with self.step("idle round"):
            hosts, _, _ = self.round("idle")
            local = hosts.get(self.local.name)
            if local and local.gpus:
                self.idle_used = local.gpus[0].memory_used_bytes
        work = start_workload(self.args.torch_python, self.args.gib, r)
        if work is None:
            r.checks.append(Check("workload started", False, "no workload could be started (see above)"))
        else:
            r.say(f"  workload: pid {work.pid}, {json.dumps(work.info)}")
            try:
                with self.step("load round"):
                    self.under_load(work)
                with self.step("stop and follow"):
                    await self.stop_and_follow(work)
            finally:
                if work.proc.poll() is None:
                    work.proc.kill()
        with self.step("costs"):
            await self.costs()
        self.finish()
        return 0 if all(c.ok for c in r.checks) else 1

    def finish(self) -> None:
        r = self.report
        failed = [c for c in r.checks if not c.ok]
        r.data["checks"] = [asdict(c) for c in r.checks]
        r.data["sshd"] = self.args.sshd
        (self.captures / "comparison.txt").write_text(r.masker.mask("\n".join(r.tables)))
        (self.captures / "report.json").write_text(r.masker.mask(json.dumps(r.data, indent=1, default=str)))
        (self.captures / "CAPTURE.md").write_text(r.masker.mask(capture_notes(self.args.sshd)))
        leaks = [f"{p.name}: {x}" for p in self.captures.iterdir() for x in r.masker.leaks(p.read_text())]
        if leaks:
            r.checks.append(Check("captures are masked", False, "; ".join(leaks)))
            failed.append(r.checks[-1])
        r.say(f"\n== {len(r.checks) - len(failed)}/{len(r.checks)} checks pass")
        for c in failed:
            r.say(f"  FAIL {c.what}: {c.detail}")


def capture_notes(sshd: str) -> str:
    driver = smi("--query-gpu=name,driver_version", "--format=csv,noheader").strip()
    return (
        f"# {driver} - captured by scripts/gpu-check.sh on {time.strftime('%Y-%m-%d', time.gmtime())}\n\n"
        "Masked: GPU/MIG UUIDs (stable stand-ins), serial numbers (zeros), host names (`gpu-host`).\n\n"
        f"- `*.idle.*`: nothing of ours on the GPU; `*.load.*`: one torch process (scripts/gpu_check.py workload)\n"
        "  holding a known amount of memory and running bf16 matrix products.\n"
        f"- `query-gpu.*.csv`: `--query-gpu={','.join(REFERENCE_QUERY)}` (`--format=csv` and `csv,noheader,nounits`).\n"
        f"- `query-compute-apps.*.csv`: `--query-compute-apps={','.join(APPS_QUERY)} --format=csv`.\n"
        "- `nvml.*.json`: nvidia-ml-py read directly (bytes, milliwatts; `power_limit_mw` is the management limit,\n"
        "  `enforced_power_limit_mw` the enforced one).\n"
        "- `status.*.json`: `poolconsole status --json` of this machine as `self-nvml` (`local = true`, NVML) and\n"
        f"  `self-ssh` (nvidia-smi over SSH to 127.0.0.1, server: {sshd}), each with an engine on GPU 0.\n"
        "- `comparison.txt`: the readings side by side; `report.json`: every check, the stop timeline, the costs.\n"
    )


# -- the helpers gpu-check.sh calls ------------------------------------------------------------------


def keygen(paths: Sequence[str]) -> None:
    """ed25519 key pairs in OpenSSH format (no ssh-keygen needed), private keys 0600 (sshd insists)."""
    import asyncssh

    for path in paths:
        key = asyncssh.generate_private_key("ssh-ed25519")
        key.write_private_key(path)
        os.chmod(path, 0o600)
        key.write_public_key(f"{path}.pub")


async def ssh_server(port: int, host_key: str, authorized_keys: str) -> Any:
    """An SSH server on 127.0.0.1 running each command under /bin/sh, for where no OpenSSH sshd is
    installed (the report says which server was used). A command whose client goes away (a closed
    stream) is killed with its whole process group. Returns the acceptor (close() stops it)."""
    import asyncssh

    async def pump(reader: asyncio.StreamReader | None, write: Any) -> None:
        if reader is None:
            return
        with contextlib.suppress(OSError, asyncssh.Error):
            while chunk := await reader.read(1 << 16):
                write(chunk)

    async def handle(process: asyncssh.SSHServerProcess[bytes]) -> None:
        if not process.command:
            process.stderr.write(b"only commands are served\n")
            process.exit(1)
            return
        local = await asyncio.create_subprocess_shell(
            process.command,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
        pumps: asyncio.Future[Any] = asyncio.gather(
            pump(local.stdout, process.stdout.write), pump(local.stderr, process.stderr.write)
        )
        closed: asyncio.Future[Any] = asyncio.ensure_future(process.wait_closed())
        await asyncio.wait({pumps, closed}, return_when=asyncio.FIRST_COMPLETED)
        if not pumps.done():  # the client went away (a stream closed): end the command's whole group
            with contextlib.suppress(ProcessLookupError):
                os.killpg(local.pid, signal.SIGKILL)
            pumps.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await pumps
        status = await local.wait()
        with contextlib.suppress(OSError, asyncssh.Error):
            process.exit(max(0, status))
        closed.cancel()

    return await asyncssh.listen(
        "127.0.0.1",
        port,
        server_host_keys=[host_key],
        authorized_client_keys=authorized_keys,
        process_factory=handle,
        encoding=None,
    )


async def serve_ssh(port: int, host_key: str, authorized_keys: str) -> None:
    await ssh_server(port, host_key, authorized_keys)
    await asyncio.Event().wait()


def workload(gib: float, max_s: float) -> int:
    """Run under the python holding torch: hold `gib` GiB on GPU 0 and multiply bf16 matrices until
    SIGTERM (or `max_s`). Prints one JSON line when ready: pid, bytes held, torch's reserved bytes."""
    stop = {"now": False}
    signal.signal(signal.SIGTERM, lambda *_: stop.update(now=True))
    try:
        import torch  # type: ignore[import-not-found, unused-ignore]

        if not torch.cuda.is_available():
            print(json.dumps({"ready": False, "error": "torch sees no CUDA device"}), flush=True)
            return 1
        device = torch.device("cuda:0")
        held = torch.empty(int(gib * GIB), dtype=torch.uint8, device=device)
        held.fill_(1)
        a = torch.randn(8192, 8192, device=device, dtype=torch.bfloat16)
        b = torch.randn(8192, 8192, device=device, dtype=torch.bfloat16)
        c = a @ b
        torch.cuda.synchronize()
    except Exception as exc:
        print(json.dumps({"ready": False, "error": f"{type(exc).__name__}: {exc}"}), flush=True)
        return 1
    info = {
        "ready": True,
        "pid": os.getpid(),
        "held_bytes": held.numel(),
        "torch_reserved_bytes": torch.cuda.memory_reserved(device),
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name(device),
    }
    print(json.dumps(info), flush=True)
    deadline = time.monotonic() + max_s
    while not stop["now"] and time.monotonic() < deadline:
        for _ in range(20):
            c = a @ b
        torch.cuda.synchronize()
    del c
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="the checks (scripts/gpu-check.sh sets everything up)")
    run.add_argument("--config", required=True)
    run.add_argument("--captures", required=True, help="folder for the masked captures")
    run.add_argument("--torch-python", default="python3", help="the python that holds torch, for the workload")
    run.add_argument("--gib", type=float, default=8.0, help="GiB the workload holds on GPU 0")
    run.add_argument("--sshd", default="openssh", help="which SSH server serves self-ssh (for the report)")
    keys = sub.add_parser("keygen", help="ed25519 key pairs")
    keys.add_argument("paths", nargs="+")
    serve = sub.add_parser("serve-ssh", help="an SSH server on 127.0.0.1 where no sshd is installed")
    serve.add_argument("--port", type=int, required=True)
    serve.add_argument("--host-key", required=True)
    serve.add_argument("--authorized-keys", required=True)
    load = sub.add_parser("workload", help="the torch workload (run under the python holding torch)")
    load.add_argument("--gib", type=float, default=8.0)
    load.add_argument("--max-s", type=float, default=300.0)
    mask = sub.add_parser("mask", help="mask a file (UUIDs, serials, host names of this machine) to stdout")
    mask.add_argument("path")
    args = parser.parse_args(argv)
    if args.command == "run":
        return asyncio.run(Driver(args).run())
    if args.command == "keygen":
        keygen(args.paths)
        return 0
    if args.command == "serve-ssh":
        asyncio.run(serve_ssh(args.port, args.host_key, args.authorized_keys))
        return 0
    if args.command == "workload":
        return workload(args.gib, args.max_s)
    masker = this_machine_masker()
    text = Path(args.path).read_text(errors="replace")
    masker.learn(text)
    sys.stdout.write(masker.mask(text))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
