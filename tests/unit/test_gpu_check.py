"""The CPU side of the device check (scripts/gpu_check.py, issue 19), on the real H200 captures: both
references parsed, the tolerances passing real readings of one GPU and failing the known mistakes,
poolconsole's own two readers compared with the references exactly as the device run will, the
process and follow checks, the masking of captures, and the pieces that run without a GPU."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import asyncssh
import pytest

from poolconsole.collect.hosts import nvidia_smi as nv
from poolconsole.collect.hosts.sampling import local_snapshot
from poolconsole.config import parse_config
from poolconsole.model.hosts import HostSnapshot, HostState
from scripts import gpu_check as gc
from scripts.gpu_check import GIB, MIB, REFERENCE_QUERY, Check, Gpu, Masker, Process, Reading, Sample
from tests.conftest import REAL
from tests.helpers.sshd import h200_catalog

ROOT = Path(__file__).resolve().parents[2]
H200 = REAL / "gpu" / "nvidia-h200"
UUID_A = "GPU-1dd5be1c-1e72-07c1-a2cc-e83243b56e3b"  # the first H200 machine
UUID_B = "GPU-9228b3d5-1a14-22f5-06a6-4017cf0c6f25"  # the second
SERIALS = ("1653724062031", "1654024030833")
UNITS = re.compile(r"\s+(MiB|GiB|W|%|MHz|C|us)$")


def read(name: str) -> str:
    return (H200 / name).read_text()


def nvml(phase: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(read(f"nvml.{phase}.json"))
    return doc


def failed(checks: list[Check]) -> dict[str, str]:
    return {c.what: c.detail for c in checks if not c.ok}


# -- references -----------------------------------------------------------------------------------


def test_nvidia_smi_with_units_and_bare_numbers_read_the_same() -> None:
    (g,) = gc.parse_smi_gpus(read("query-gpu.load.csv")).gpus
    assert (g.index, g.uuid, g.name) == (0, UUID_A, "NVIDIA H200")
    assert g.memory_total_bytes == 143771 * MIB and g.memory_used_bytes == 50163 * MIB
    assert g.memory_reserved_bytes == 616 * MIB
    assert (g.utilization_pct, g.temperature_c, g.power_w, g.power_limit_w) == (100, 55, 692.66, 700)
    (bare,) = gc.parse_smi_gpus(read("query-gpu.load.noheader-nounits.csv"), REFERENCE_QUERY).gpus
    assert bare.uuid == UUID_A and bare.memory_used_bytes == g.memory_used_bytes
    assert failed(gc.compare("bare", bare, [g])) == {}  # another instant: power 691.09 W
    assert len(read("query-gpu.load.csv").splitlines()[0].split(",")) == len(REFERENCE_QUERY)


def test_reference_parser_is_strict() -> None:
    with pytest.raises(ValueError, match="values for"):
        gc.parse_smi_gpus("index, memory.used [MiB]\n0, 12 MiB, 7\n")


def test_compute_apps_and_the_nvml_dump() -> None:
    assert gc.parse_smi_apps(read("query-compute-apps.idle.csv")) == ()
    assert gc.parse_smi_apps(read("query-compute-apps.load.csv")) == (Process(434, UUID_A, 50154 * MIB),)
    reading = gc.parse_nvml_dump(nvml("load"))
    (g,) = reading.gpus
    assert g.memory_used_bytes == 52599521280  # v2: without the 616 MiB reserved (v1 says 53244461056)
    assert g.memory_reserved_bytes == 644939776 and g.memory_total_bytes == 150754820096
    assert (g.utilization_pct, g.temperature_c, g.power_w, g.power_limit_w) == (100, 55, 694.607, 700)
    assert reading.processes == (Process(434, UUID_A, 52590280704),)


@pytest.mark.parametrize("phase", ["idle", "load"])
def test_nvml_and_nvidia_smi_of_one_gpu_agree_within_the_tolerances(phase: str) -> None:
    smi = gc.parse_smi_gpus(read(f"query-gpu.{phase}.csv"))
    checks = gc.compare_readings("nvml", gc.parse_nvml_dump(nvml(phase)), [smi])
    assert len(checks) == len(gc.FIELDS) and failed(checks) == {}


def test_tolerances_catch_the_known_mistakes() -> None:
    (ref,) = gc.parse_smi_gpus(read("query-gpu.load.csv")).gpus
    (good,) = gc.parse_nvml_dump(nvml("load")).gpus
    v1_used = replace(good, memory_used_bytes=53244461056)  # reserved memory counted as used
    milliwatts = replace(good, power_w=694607.0, power_limit_w=700000.0)
    mib_not_bytes = replace(good, memory_total_bytes=143771.0)
    lost = replace(good, temperature_c=None)
    assert set(failed(gc.compare("x", v1_used, [ref]))) == {"x memory_used_bytes"}
    assert set(failed(gc.compare("x", milliwatts, [ref]))) == {"x power_w", "x power_limit_w"}
    assert set(failed(gc.compare("x", mib_not_bytes, [ref]))) == {"x memory_total_bytes"}
    assert failed(gc.compare("x", lost, [ref])) == {"x temperature_c": "n/a where the reference reads 55 C"}
    (idle,) = gc.parse_nvml_dump(nvml("idle")).gpus
    assert {"x memory_used_bytes", "x utilization_pct", "x power_w"} <= set(failed(gc.compare("x", idle, [ref])))


def test_a_reading_between_the_references_before_and_after_passes() -> None:
    before = Gpu(0, "u", "g", utilization_pct=10)
    after = Gpu(0, "u", "g", utilization_pct=90)
    assert gc.compare("x", Gpu(0, "u", "g", utilization_pct=50), [before, after])[3].ok
    assert not gc.compare("x", Gpu(0, "u", "g", utilization_pct=50), [before])[3].ok
    assert gc.compare("x", Gpu(0, "u", "g"), [Gpu(0, "u", "g")])[3] == Check(
        "x utilization_pct", True, "n/a; no reference value"
    )


def test_gpus_pair_by_uuid_and_a_missing_gpu_fails() -> None:
    ref = Reading("smi", (Gpu(0, "GPU-a", "g", temperature_c=40), Gpu(1, "GPU-b", "g", temperature_c=70)))
    candidate = Reading("pc", (Gpu(0, "GPU-b", "g", temperature_c=70),))  # another numbering: the UUID decides
    assert failed(gc.compare_readings("pc", candidate, [ref])) == {}
    assert "pc GPU 0: same GPU" in failed(gc.compare_readings("pc", candidate, [ref, Reading("nvml", ())]))
    assert failed(gc.compare_readings("pc", Reading("pc", (), detail="state=degraded"), [ref])) == {
        "pc: GPUs": "no GPU read (state=degraded)"
    }


# -- poolconsole's own readers against the references, as the device run compares them ---------------


def status_doc(*snapshots: HostSnapshot) -> dict[str, Any]:
    """What `poolconsole status --json` prints for these hosts (through JSON, as the device run reads it)."""
    doc: dict[str, Any] = json.loads(json.dumps({"hosts": [s.to_json() for s in snapshots]}, default=str))
    return doc


def test_the_ssh_reader_matches_the_reference_on_the_all_fields_capture() -> None:
    """poolconsole's nvidia-smi parser on the fields it queries, bare numbers (as over SSH), against the
    independent reference parser on the same capture with units."""
    (row,) = h200_catalog(H200 / "query-gpu.all-fields.load.csv")
    bare = ", ".join(UNITS.sub("", row[f]) for f in nv.FULL_FIELDS)
    snap = HostSnapshot(
        "self-ssh", "127.0.0.1", HostState.OK, source="nvidia-smi", gpus=nv.parse_query_gpu(bare, nv.FULL_FIELDS).gpus
    )
    reading = gc.parse_status(status_doc(snap))["self-ssh"]
    assert reading.detail == "source=nvidia-smi state=ok"
    reference = gc.parse_smi_gpus(read("query-gpu.all-fields.load.csv"))
    assert reference.gpus[0].uuid == UUID_B and reference.gpus[0].memory_used_bytes == 21363 * MIB
    checks = gc.compare_readings("self-ssh", reading, [reference])
    assert len(checks) == len(gc.FIELDS) and failed(checks) == {}


class FakeNvmlError(Exception):
    pass


def fake_pynvml(capture: dict[str, Any]) -> ModuleType:
    """pynvml answering from an nvml.*.json capture; any call the capture has no answer for raises
    NVMLError, as a call the device does not support."""
    (g,) = capture["gpus"]
    v1, v2 = g["memory_v1_fields"], g["memory_v2_fields"]
    mod = ModuleType("pynvml")
    answers: dict[str, Any] = {
        "NVMLError": FakeNvmlError,
        "nvmlMemory_v2": "v2",
        "NVML_TEMPERATURE_GPU": 0,
        "NVML_CLOCK_SM": 1,
        "NVML_CLOCK_MEM": 2,
        "nvmlInit": lambda: None,
        "nvmlShutdown": lambda: None,
        "nvmlSystemGetDriverVersion": lambda: capture["driver"],
        "nvmlSystemGetNVMLVersion": lambda: capture["nvml"],
        "nvmlSystemGetCudaDriverVersion": lambda: capture["cuda_driver"],
        "nvmlDeviceGetCount": lambda: 1,
        "nvmlDeviceGetHandleByIndex": lambda i: i,
        "nvmlDeviceGetName": lambda h: g["name"],
        "nvmlDeviceGetUUID": lambda h: g["uuid"],
        "nvmlDeviceGetMemoryInfo": lambda h, version=None: SimpleNamespace(**(v2 if version == "v2" else v1)),
        "nvmlDeviceGetUtilizationRates": lambda h: SimpleNamespace(**g["utilization"]),
        "nvmlDeviceGetTemperature": lambda h, sensor: g["temperature_c"],
        "nvmlDeviceGetPowerUsage": lambda h: g["power_mw"],
        "nvmlDeviceGetEnforcedPowerLimit": lambda h: g["power_limit_mw"],
        "nvmlDeviceGetPowerManagementLimit": lambda h: g["power_limit_mw"],
        "nvmlDeviceGetClockInfo": lambda h, clock: g["clock_sm_mhz"] if clock == 1 else None,
        "nvmlDeviceGetCurrPcieLinkGeneration": lambda h: g["pcie_gen"],
        "nvmlDeviceGetCurrPcieLinkWidth": lambda h: g["pcie_width"],
        "nvmlDeviceGetCudaComputeCapability": lambda h: tuple(g["cuda_cc"]),
        "nvmlDeviceGetEccMode": lambda h: tuple(g["ecc_mode"]),
        "nvmlDeviceGetMigMode": lambda h: tuple(g["mig_mode"]),
        "nvmlDeviceGetComputeRunningProcesses": lambda h: [
            SimpleNamespace(pid=p["pid"], usedGpuMemory=p["used_gpu_memory"]) for p in g["compute_procs"]
        ],
    }
    for name, value in answers.items():
        setattr(mod, name, value)

    def unsupported(name: str) -> Any:
        def call(*args: Any) -> Any:
            raise FakeNvmlError(f"{name}: Not Supported")

        return call

    mod.__getattr__ = unsupported  # type: ignore[method-assign]
    return mod


@pytest.mark.parametrize("phase", ["idle", "load"])
def test_the_nvml_reader_matches_both_references(phase: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """poolconsole's NVML path (the `local = true` host) on NVML answering from the capture, against NVML
    read directly (the check's own dump, through the same fake) and nvidia-smi."""
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(nvml(phase)))
    host = parse_config('[[hosts]]\nname = "self-nvml"\naddress = "127.0.0.1"\nlocal = true\n').hosts[0]
    snap = local_snapshot(host)
    assert snap is not None
    reading = gc.parse_status(status_doc(snap))["self-nvml"]
    assert reading.detail == "source=nvml state=ok"
    dump = gc.dump_nvml()
    assert dump["gpus"][0]["memory_v2_fields"] == nvml(phase)["gpus"][0]["memory_v2_fields"]
    assert dump["gpus"][0]["serial"] is None  # unsupported: None, the rest still read
    direct = gc.parse_nvml_dump(dump)
    assert direct == gc.parse_nvml_dump(nvml(phase))  # the dump has the captures' shape
    smi = gc.parse_smi_gpus(read(f"query-gpu.{phase}.csv"))
    assert failed(gc.compare_readings("self-nvml vs NVML", reading, [direct])) == {}
    assert failed(gc.compare_readings("self-nvml vs nvidia-smi", reading, [smi])) == {}
    assert [p.used_memory_bytes for p in reading.processes] == [p.used_memory_bytes for p in direct.processes]


# -- the workload's process, and the reading after it stops -------------------------------------------


def test_process_listed_mapped_and_sized() -> None:
    (proc,) = gc.parse_smi_apps(read("query-compute-apps.load.csv"))
    reading = Reading("pc", (), (replace(proc, engine="gpu0-ssh"),), "source=nvidia-smi state=ok")
    expect = (48 * GIB, 49 * GIB)  # 50154 MiB
    direct = 52590280704.0  # NVML's view of the same process
    assert failed(gc.check_process("x", reading, 434, expect, "gpu0-ssh", direct)) == {}
    assert set(failed(gc.check_process("x", reading, 434, expect, "gpu0-nvml"))) == {
        "x: process mapped to engine gpu0-nvml"
    }
    assert set(failed(gc.check_process("x", reading, 434, (10 * GIB, 20 * GIB)))) == {"x: process memory"}
    assert set(failed(gc.check_process("x", reading, 434, expect, None, 40 * GIB))) == {
        "x: process memory vs direct reading"
    }
    missing = failed(gc.check_process("x", reading, 999, expect, "gpu0-ssh"))
    assert missing == {"x: workload pid 999 listed": "listed: 434 (50154.0 MiB) (source=nvidia-smi state=ok)"}


def test_the_reading_must_follow_the_stop_within_one_poll() -> None:
    timeline = [Sample(9.0, True, 9e9), Sample(10.2, True, 9e9), Sample(11.2, False, 1e6)]
    check, latency = gc.follows("stream", timeline, 10.0, 1.6)
    assert check.ok and latency == pytest.approx(1.2) and "1 stale" in check.detail
    assert not gc.follows("stream", timeline, 10.0, 1.0)[0].ok
    check, latency = gc.follows("stream", timeline[:2], 10.0, 1.6)
    assert not check.ok and latency is None and "all list it" in check.detail


def test_cost_summary() -> None:
    summary = gc.cost([0.010, 0.012, 0.011, 0.050], [0.001, 0.003])
    assert summary == {"samples": 4.0, "wall_median_ms": 11.5, "wall_p95_ms": 50.0, "cpu_mean_ms": 2.0}


def test_side_by_side_has_a_row_per_field_and_na_for_a_missing_source() -> None:
    (g,) = gc.parse_smi_gpus(read("query-gpu.load.csv")).gpus
    table = gc.side_by_side([("nvidia-smi", g), ("NVML", None)]).splitlines()
    assert len(table) == 1 + len(gc.FIELDS)
    assert table[0].split() == ["nvidia-smi", "NVML"]
    assert table[2].split() == ["memory_used_bytes", "50163.0", "MiB", "n/a"]


# -- masking ---------------------------------------------------------------------------------------

CAPTURES = (
    "nvidia-smi-q.load.xml",
    "nvidia-smi-q.idle.xml",
    "query-gpu.load.csv",
    "query-compute-apps.load.csv",
    "nvml.load.json",
    "query-gpu.all-fields.load.csv",
    "per-field.txt",
    "query-compute-apps.2proc.csv",
)


def test_masking_removes_uuids_serials_and_host_names_and_keeps_captures_usable() -> None:
    masker = Masker(hostnames=["h200-box-17.example.net", "h200-box-17"])
    texts = {name: read(name) for name in CAPTURES}
    for text in texts.values():
        masker.learn(text)
    assert set(SERIALS) <= masker.serials
    masked = {name: masker.mask(text) for name, text in texts.items()}
    for name, text in masked.items():
        for secret in (UUID_A, UUID_B, *SERIALS):
            assert secret.lower() not in text.lower(), (name, secret)
        assert masker.leaks(text) == [], name
        assert masker.mask(text) == text  # masking twice changes nothing
    assert masker.leaks(texts["per-field.txt"])  # the unmasked one does leak
    # one stand-in per GPU, the same in every file: processes still point at their GPU
    (gpu,) = gc.parse_smi_gpus(masked["query-gpu.load.csv"]).gpus
    (proc,) = gc.parse_smi_apps(masked["query-compute-apps.load.csv"])
    assert gpu.uuid == proc.gpu_uuid == "GPU-00000000-0000-0000-0000-000000000001"
    assert gc.parse_nvml_dump(json.loads(masked["nvml.load.json"])).gpus[0].uuid == gpu.uuid
    assert replace(gpu, uuid=UUID_A) == gc.parse_smi_gpus(texts["query-gpu.load.csv"]).gpus[0]
    assert "<serial>0000000000000</serial>" in masked["nvidia-smi-q.load.xml"]
    assert "serial|0|0000000000000" in masked["per-field.txt"]
    # numbers that are not identifiers survive
    assert (
        "143771 MiB" in masked["query-gpu.load.csv"] and "<board_id>0x6</board_id>" in masked["nvidia-smi-q.load.xml"]
    )
    note = masker.mask("ssh h200-box-17.example.net; H200-BOX-17 up; h200-box-170 is another")
    assert note == "ssh gpu-host; gpu-host up; h200-box-170 is another"


def test_placeholders_are_not_taken_for_serials() -> None:
    masker = Masker(serials=["N/A", "[N/A]", "0", "0x0000000000000000", " 1654024030833 "])
    assert masker.serials == {"1654024030833"}
    assert Masker(hostnames=["ab"]).mask("ab cd") == "ab cd"  # too short to mask safely


# -- the pieces that run without a GPU ------------------------------------------------------------------


def test_the_shell_script_parses() -> None:
    done = subprocess.run(["bash", "-n", str(ROOT / "scripts" / "gpu-check.sh")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_workload_without_torch_says_why(tmp_path: Path) -> None:
    """The workload runs under the python holding torch, which need not have poolconsole's packages: it
    imports only the standard library until torch; without torch it reports instead of starting."""
    code = (
        "import sys\n"
        "for m in ('torch', 'poolconsole', 'pydantic', 'asyncssh', 'pynvml'): sys.modules[m] = None\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        "from scripts.gpu_check import main\n"
        "raise SystemExit(main(['workload', '--gib', '0.001']))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert json.loads(done.stdout) == {
        "ready": False,
        "error": "ModuleNotFoundError: import of torch halted; None in sys.modules",
    }


def test_start_workload_reports_when_none_can_start(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Under a python without torch (this one; or one whose torch sees no GPU)."""
    assert gc.start_workload(sys.executable, 0.001, gc.Report(Masker(), tmp_path)) is None
    assert "no workload could be started" in capsys.readouterr().out


def test_loop_cpu_finds_the_streamed_sample_loop() -> None:
    loop = subprocess.Popen(["sh", "-c", "while :; do echo @@poolconsole-sample >/dev/null; sleep 0.05; done"])
    try:
        time.sleep(0.3)
        assert isinstance(gc.loop_cpu().get(loop.pid), float)
    finally:
        loop.kill()
        loop.wait()
    assert loop.pid not in gc.loop_cpu()


async def test_stand_in_ssh_server_runs_commands_and_kills_abandoned_loops(tmp_path: Path) -> None:
    """The asyncssh server used where the device has no sshd: exit status and output as sshd gives them,
    and a closed stream's loop is killed (not left running on the GPU host)."""
    host, client = str(tmp_path / "host"), str(tmp_path / "client")
    gc.keygen([host, client])
    assert oct(os.stat(host).st_mode & 0o777) == "0o600"
    server = await gc.ssh_server(0, host, f"{client}.pub")
    port = server.sockets[0].getsockname()[1]
    try:
        async with asyncssh.connect("127.0.0.1", port, client_keys=[client], known_hosts=None, username="me") as conn:
            result = await conn.run("echo out; echo err >&2; exit 3")
            assert (result.exit_status, result.stdout, result.stderr) == (3, "out\n", "err\n")
            marker = tmp_path / "alive"
            proc = await conn.create_process(f"while :; do echo @@poolconsole-sample; touch {marker}; sleep 0.05; done")
            assert (await proc.stdout.readline()).strip() == "@@poolconsole-sample"
            proc.close()
            await asyncio.sleep(0.5)
            marker.unlink(missing_ok=True)
            await asyncio.sleep(0.3)
            assert not marker.exists()  # the loop is gone
    finally:
        server.close()
