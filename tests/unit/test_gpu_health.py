"""GPU health (issue 37): the nvidia-smi fields the host poll adds (bus id, PCIe maximum, clock-event reasons,
uncorrected ECC, pending remaps and retirements) parsed from the real H200 captures, unknown kept None; the
kernel's Xid lines windowed by uptime, an unreadable log unknown (never "no Xid"); and the gpu_xid, gpu_ecc,
gpu_throttle and gpu_pcie rules: each fires after its `for`, clears only after its clear time, ignores what
is normal (the power cap under load, an idle GPU's lower PCIe generation), never acts on unknown, and pages
with alertname, severity, host and gpu labels."""

from __future__ import annotations

import csv
import re
from dataclasses import replace
from pathlib import Path

from poolconsole.collect.hosts import nvidia_smi as nv
from poolconsole.collect.hosts import xid
from poolconsole.config.models import AlertSettings
from poolconsole.model import gpu_health
from poolconsole.model.alerts import Alerts, severity
from poolconsole.model.hosts import GpuReading, HostSnapshot, HostState, host_from_json
from poolconsole.model.notify import labels_for

H200 = Path(__file__).resolve().parents[1] / "fixtures" / "real" / "gpu" / "nvidia-h200"
UNIT = re.compile(r"\s*(MiB|W|%|MHz|us)$")


def capture_row(name: str) -> dict[str, str]:
    """One row of the all-fields capture by field name (the header's units cut, the values' too, as the poll's
    `nounits` query prints them)."""
    with (H200 / name).open() as handle:
        header, row = list(csv.reader(handle, skipinitialspace=True))[:2]
    return {h.split(" [")[0]: UNIT.sub("", v) for h, v in zip(header, row, strict=True)}


def parsed(name: str) -> GpuReading:
    row = capture_row(name)
    (gpu,) = nv.parse_query_gpu(", ".join(row[f] for f in nv.FULL_FIELDS), nv.FULL_FIELDS).gpus
    return gpu


def test_the_h200_captures_parse_the_health_fields_and_read_healthy() -> None:
    idle, load = parsed("query-gpu.all-fields.idle.csv"), parsed("query-gpu.all-fields.load.csv")
    for gpu in (idle, load):
        assert gpu.pci_bus_id == "00000000:00:06.0"
        assert (gpu.pcie_gen, gpu.pcie_gen_max, gpu.pcie_width, gpu.pcie_width_max) == (5, 5, 16, 16)
        assert gpu.ecc_uncorrected == 0 and gpu.remapped_rows_pending is False
        assert gpu.retired_pages_pending is None  # [N/A] on an H200 (it remaps rows): unknown, not False
        assert gpu.xids is None  # not read by the query
    assert idle.clock_event_reasons == 0x1  # idle
    assert load.clock_event_reasons == 0x4  # the software power cap: 690 W of 700 under load
    row = capture_row("query-gpu.all-fields.load.csv")  # the mask's bit is the column that says Active
    active = [k for k, v in row.items() if k.startswith("clocks_event_reasons.") and v == "Active"]
    assert active == ["clocks_event_reasons.sw_power_cap"]
    xml = (H200 / "nvidia-smi-q.load.xml").read_text()
    assert "<clocks_event_reason_sw_power_cap>Active<" in xml and "<max_link_gen>5<" in xml
    for gpu in (idle, load):  # what is normal raises nothing
        assert {rule: check(gpu) for rule, check in gpu_health.CHECKS.items()} == {
            "gpu_xid": None, "gpu_ecc": False, "gpu_throttle": False, "gpu_pcie": False,
        }  # fmt: skip


def test_a_driver_without_the_fields_reads_unknown_not_zero() -> None:
    fields = ("index", "uuid", "clocks_event_reasons.active", "ecc.errors.uncorrected.volatile.total",
              "remapped_rows.pending", "pcie.link.gen.max")  # fmt: skip
    (gpu,) = nv.parse_query_gpu("0, GPU-x, [N/A], [N/A], [Not Supported], [N/A]\n", fields).gpus
    assert (gpu.clock_event_reasons, gpu.ecc_uncorrected, gpu.remapped_rows_pending, gpu.pcie_gen_max) == (
        None, None, None, None,
    )  # fmt: skip
    assert all(check(gpu) is None for check in gpu_health.CHECKS.values())
    (bad,) = nv.parse_query_gpu("0, GPU-x, 0xZZ, 3, Yes, 4\n", fields).gpus
    assert bad.clock_event_reasons is None and bad.ecc_uncorrected == 3 and bad.remapped_rows_pending is True


JOURNAL = """\
[86390.120000] tp4 kernel: NVRM: Xid (PCI:0000:41:00): 31, pid=4021, name=python3, Ch 00000008
[80000.000000] tp4 kernel: NVRM: Xid (PCI:0000:61:00): 79, pid=1, GPU has fallen off the bus.
86400.00 1296000.00
"""
DMESG = """\
[86395.5] NVRM: Xid (PCI:0000:61:00): 48, pid=77, DBE (0x1,0x2)
[86396.5] NVRM: Xid (PCI:0000:61:00): 63, pid=77, Row remapper
86400.00 1296000.00
"""


def test_xid_lines_are_windowed_by_uptime_and_mapped_to_the_gpu_by_bus() -> None:
    found = xid.parse(JOURNAL)
    assert found == {"41:00": (31,)}  # 79 was logged 6400 s ago: out of the 5-minute window
    assert xid.for_gpu(found, "00000000:41:00.0") == (31,) and xid.for_gpu(found, "00000000:61:00.0") == ()
    assert xid.parse(DMESG) == {"61:00": (48, 63)}
    assert xid.parse("86400.00 1.00\n") == {}  # read, nothing logged: known, no Xid
    assert xid.parse(f"{xid.UNREADABLE}\n86400.00 1.00\n") is None  # no journal match, dmesg refused: unknown
    assert xid.parse("sh: 1: journalctl: not found\n") is None  # no uptime: the batch was cut, unknown
    assert xid.for_gpu(None, "00000000:41:00.0") is None
    assert "Xid 31 (GPU memory page fault)" in gpu_health.described((31, 31))


def gpu(**kw: object) -> GpuReading:
    base = GpuReading(2, "g", "GPU-2", None, None, 80.0, 60.0, 300.0, 350.0, pcie_gen=4, pcie_width=16,
                      pci_bus_id="00000000:81:00.0", pcie_gen_max=4, pcie_width_max=16, clock_event_reasons=0x4,
                      ecc_uncorrected=0, remapped_rows_pending=False, xids=())  # fmt: skip
    return replace(base, **kw)  # type: ignore[arg-type]


def host(*gpus: GpuReading) -> HostSnapshot:
    return HostSnapshot("tp4", "127.0.0.1", HostState.OK, gpus=gpus)


def fired(alerts: Alerts, snap: HostSnapshot, at: float) -> list[tuple[str, bool]]:
    return [(e.rule, e.fired) for e in alerts.host(snap, at) if e.rule.startswith("gpu_")]


def test_throttle_fires_after_its_for_and_clears_after_its_clear_time() -> None:
    alerts = Alerts(AlertSettings(gpu_throttle_for_s=30, gpu_throttle_clear_s=20))
    hot = host(gpu(clock_event_reasons=0x4 | 0x40))  # the power cap and a hardware thermal slowdown
    assert fired(alerts, hot, 0) == [] and fired(alerts, hot, 29) == []
    events = [e for e in alerts.host(hot, 30) if e.rule.startswith("gpu_")]
    assert [(e.rule, e.fired) for e in events] == [("gpu_throttle_gpu2", True)]
    assert events[0].message == "GPU 2: clocks held down: hardware thermal slowdown"
    cool = host(gpu())
    assert fired(alerts, cool, 40) == [] and fired(alerts, hot, 45) == []  # a dip back on: not cleared
    assert fired(alerts, cool, 50) == [] and fired(alerts, cool, 69) == []
    assert fired(alerts, cool, 70) == [("gpu_throttle_gpu2", False)]
    assert fired(alerts, host(gpu(clock_event_reasons=0x1 | 0x4 | 0x10)), 200) == []  # idle, cap, boost: normal


def test_xid_ecc_and_pcie_fire_per_gpu_and_unknown_never_acts() -> None:
    alerts = Alerts(AlertSettings())
    faulty = host(gpu(xids=(79,), ecc_uncorrected=2, remapped_rows_pending=True, pcie_width=8))
    assert fired(alerts, faulty, 0) == [("gpu_xid_gpu2", True), ("gpu_ecc_gpu2", True)]  # pcie waits 60 s
    assert fired(alerts, faulty, 60) == [("gpu_pcie_gpu2", True)]
    messages = {k[1]: e.message for k, e in alerts.active.items()}
    assert messages["gpu_xid_gpu2"] == "GPU 2: Xid 79 (fallen off the bus) in the kernel log (last 5 min)"
    assert "2 uncorrected ECC error(s)" in messages["gpu_ecc_gpu2"] and "row remap pending" in messages["gpu_ecc_gpu2"]
    assert messages["gpu_pcie_gpu2"] == "GPU 2: PCIe link x8 of x16"
    unknown = host(gpu(xids=None, ecc_uncorrected=None, remapped_rows_pending=None, pcie_width=None,
                       pcie_gen=None, clock_event_reasons=None))  # fmt: skip
    assert fired(alerts, unknown, 100) == []  # unknown neither clears ...
    fresh = Alerts(AlertSettings(gpu_xid_for_s=0, gpu_pcie_for_s=0))
    assert fired(fresh, unknown, 0) == []  # ... nor fires
    idle_gen = host(gpu(pcie_gen=1, utilization_pct=0.0))  # an idle GPU saves power at gen 1: normal
    busy_gen = host(gpu(pcie_gen=3, utilization_pct=90.0))
    assert fired(fresh, idle_gen, 1) == [] and fired(fresh, busy_gen, 2) == [("gpu_pcie_gpu2", True)]
    assert fired(alerts, host(gpu()), 200) == [("gpu_xid_gpu2", False), ("gpu_ecc_gpu2", False)]
    assert fired(alerts, host(gpu()), 259) == []  # gpu_pcie_clear_s = 60
    assert fired(alerts, host(gpu()), 260) == [("gpu_pcie_gpu2", False)]


def test_gpu_alerts_page_with_their_rule_severity_host_and_gpu() -> None:
    assert labels_for("gpu_xid_gpu2", "tp4", {"e": "tp4"}, ["tp4"]) == {
        "alertname": "gpu_xid", "severity": "critical", "host": "tp4", "gpu": "2",
    }  # fmt: skip
    assert labels_for("gpu_throttle_gpu0", "tp4", {}, ["tp4"])["alertname"] == "gpu_throttle"
    assert [severity(gpu_health.key(r, 1)) for r in gpu_health.RULES] == ["critical", "critical", "warning", "warning"]
    assert gpu_health.split("vram_gpu0") is None and gpu_health.split("gpu_pcie_gpu12") == ("gpu_pcie", "12")


def test_a_recorded_snapshot_keeps_the_health_fields() -> None:
    snap = host(gpu(xids=(31,), clock_event_reasons=0x48))
    back = host_from_json(snap.to_json())
    assert back.gpus == snap.gpus and back.gpus[0].xids == (31,)
