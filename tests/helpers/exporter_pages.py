"""Host exporter pages for a real Prometheus to scrape (provenance: tests/fixtures/exporters/README.md):
node_exporter's real capture (and a GB10 page derived from it), the DCGM exporter page, and
nvidia_gpu_exporter pages built from real `nvidia-smi --query-gpu` CSV captures by that exporter's rules."""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import FIXTURES, REAL

EXPORTERS = FIXTURES / "exporters"
NODE_PAGE = EXPORTERS / "node_exporter-1.5.0-meminfo.metrics"
DCGM_PAGE = EXPORTERS / "dcgm-exporter-rtx2000ada-a30mig.metrics"
RTX4080 = REAL / "issue-samples" / "nvidia-smi-rtx4080super-595-capture-nvidia_gpu_exporter.txt"
GB10 = REAL / "issue-samples" / "nvidia-smi-query-gb10-nvml-notsupported-nvitop-pr208.txt"
MIB = 1024 * 1024
GIB = 1024 * MIB


def page_value(page: bytes, name: str, labels: str = "") -> float:
    """The value of the sample `name{labels}` on an exposition page (labels: a substring of its label set)."""
    for line in page.decode().splitlines():
        if not line.startswith("#") and re.split(r"[{ ]", line, maxsplit=1)[0] == name and labels in line:
            return float(line.rsplit(" ", 1)[1])
    raise KeyError(f"{name}{{{labels}}} is not on the page")


def node_page(**values: float) -> bytes:
    """The real node_exporter capture, with the given node_memory_* samples (e.g. MemTotal_bytes=...) set."""
    text = NODE_PAGE.read_text()
    for field, value in values.items():
        text, count = re.subn(rf"^(node_memory_{field}) \S+$", rf"\1 {float(value)!r}", text, flags=re.M)
        assert count == 1, field
    return text.encode()


def gb10_node_page() -> bytes:
    """node_exporter on a GB10: the capture's MemTotal / MemAvailable in bytes, swap 12 of 16 GiB free."""
    meminfo = dict(re.findall(r"^\s+(MemTotal|MemAvailable):\s+(\d+) kB$", GB10.read_text(), flags=re.M))
    return node_page(
        MemTotal_bytes=int(meminfo["MemTotal"]) * 1024,
        MemAvailable_bytes=int(meminfo["MemAvailable"]) * 1024,
        SwapTotal_bytes=16 * GIB,
        SwapFree_bytes=12 * GIB,
    )


@dataclass(frozen=True)
class QueryGpu:
    """One GPU row of a `--query-gpu --format=csv` capture: header (with units) -> value."""

    row: dict[str, str]

    def number(self, field: str) -> float | None:
        """The value of `field` (its header without the unit) as a number, None when [N/A] or absent."""
        for header, value in self.row.items():
            if header.split(" [")[0] == field:
                number = value.split(" ")[0]
                return None if number.startswith("[") else float(number)
        return None


def query_gpu(capture: Path) -> QueryGpu:
    """The first data row under the CSV header of a capture."""
    lines = capture.read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith(("timestamp, ", "memory.total [MiB], ")))
    header = [h.strip() for h in next(csv.reader([lines[at]]))]
    values = [v.strip() for v in next(csv.reader([lines[at + 1]]))]
    return QueryGpu(dict(zip(header, values, strict=True)))


FIELDS = (
    "index",
    "memory.total",
    "memory.reserved",
    "memory.used",
    "memory.free",
    "utilization.gpu",
    "utilization.memory",
    "temperature.gpu",
    "power.draw",
    "power.limit",
)
SUFFIX = {"MiB": ("_bytes", MIB), "%": ("_ratio", 0.01), "W": ("_watts", 1.0)}


def nvidia_smi_page(gpu: QueryGpu, *, uuid: str | None = None, name: str | None = None) -> bytes:
    """nvidia_gpu_exporter's page for one GPU row: `nvidia_smi_<field>` per numeric field, labelled by the
    uuid without its GPU- prefix, in its units ([MiB] -> _bytes, [%] -> _ratio, [W] -> _watts), fields
    that read [N/A] left out, and nvidia_smi_gpu_info with the identity labels."""
    row = gpu.row
    ident = (uuid or row.get("uuid", "GPU-00000000-0000-0000-0000-000000000000")).removeprefix("GPU-")
    lines = []
    for header, value in row.items():
        field, _, unit = header.partition(" [")
        unit = unit.rstrip("]")
        if field not in FIELDS or value.startswith("["):
            continue
        suffix, scale = SUFFIX.get(unit, ("", 1.0))
        metric = "nvidia_smi_" + field.replace(".", "_") + suffix
        number = float(value.split(" ")[0]) * scale
        lines += [f"# HELP {metric} {header}", f"# TYPE {metric} gauge", f'{metric}{{uuid="{ident}"}} {number!r}']
    info = {
        "driver_version": row.get("driver_version", ""),
        "index": row.get("index", "0"),
        "name": name or row.get("name", ""),
        "pci_bus_id": row.get("pci.bus_id", ""),
        "uuid": ident,
    }
    labels = ",".join(f'{k}="{v}"' for k, v in sorted(info.items()))
    lines += [
        "# HELP nvidia_smi_gpu_info A metric with a constant '1' value labeled by gpu uuid, name, driver_version, "
        "pci_bus_id, index.",
        "# TYPE nvidia_smi_gpu_info gauge",
        f"nvidia_smi_gpu_info{{{labels}}} 1",
        "# HELP nvidia_smi_last_collect_success Whether the most recent collection succeeded (1) or not (0)",
        "# TYPE nvidia_smi_last_collect_success gauge",
        "nvidia_smi_last_collect_success 1",
    ]
    return ("\n".join(lines) + "\n").encode()
