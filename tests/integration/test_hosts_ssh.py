"""Hosts over a real OpenSSH sshd on loopback, real captures played back by shims for exactly the fields
asked: NVIDIA discrete, field fallback, tensor-parallel mapping, unified memory (GB10), AMD, Apple;
and the failures: unknown and changed host keys, refused authentication, sshd killed mid-poll, a
command that hangs."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from poolconsole.collect.hosts.poll import HostPoller
from poolconsole.collect.hosts.sampling import sample_hosts
from poolconsole.collect.hosts.systems import parse_meminfo
from poolconsole.collect.ssh import SSHPool
from poolconsole.config import parse_config
from poolconsole.model.hosts import HostState
from tests.conftest import FIXTURES, REAL
from tests.helpers.sshd import Lab, NetNamespace, h200_catalog

H200 = REAL / "gpu" / "nvidia-h200"
SAMPLES = REAL / "issue-samples"
MIB = 1024 * 1024


def apps(capture: Path) -> list[dict[str, str]]:
    lines = capture.read_text().splitlines()[1:]
    fields = ["gpu_uuid", "pid", "process_name", "used_memory"]
    rows = [dict(zip(fields, (v.strip() for v in line.split(", ")), strict=True)) for line in lines if line]
    for row in rows:
        row["used_gpu_memory"] = row["used_memory"]
    return rows


def gb10_row() -> dict[str, str]:
    """GB10 answers from the nvitop PR #208 capture: every framebuffer field [N/A]."""
    return {
        "index": "0",
        "uuid": "GPU-6b6e0000-0000-0000-0000-00000000gb10",
        "name": "NVIDIA GB10",
        "memory.total": "[N/A]",
        "memory.used": "[N/A]",
        "memory.free": "[N/A]",
        "memory.reserved": "[N/A]",
        "utilization.gpu": "0 %",
        "temperature.gpu": "35",
        "power.draw": "11.17 W",
        "power.limit": "[N/A]",
        "clocks.current.sm": "2418 MHz",
        "clocks.current.memory": "[N/A]",
        "pcie.link.gen.current": "[N/A]",
        "pcie.link.width.current": "[N/A]",
    }


def json_part(path: Path) -> str:
    text = path.read_text()
    start = text.index("\n{") + 1
    depth = 0
    for i, ch in enumerate(text[start:], start):
        depth += ch == "{"
        depth -= ch == "}"
        if depth == 0:
            return text[start : i + 1]
    raise AssertionError("no JSON object")


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    lab = Lab(tmp_path / "lab")
    yield lab
    lab.stop()


def write(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


async def poll_all(lab: Lab, engines: str = "", **per_host: str) -> dict[str, Any]:
    config = parse_config(lab.toml(engines, **per_host))
    return {h.name: h for h in await sample_hosts(config)}


def add_h200_under_load(lab: Lab) -> None:
    """Host "h200" answering from the H200 capture under load."""
    lab.add(
        "h200",
        {
            "nvidia": {
                "gpus": h200_catalog(H200 / "query-gpu.all-fields.load.csv"),
                "apps": apps(H200 / "query-compute-apps.load.csv"),
            }
        },
        ("nvidia-smi",),
    )


async def test_nvidia_h200_under_load(lab: Lab) -> None:
    add_h200_under_load(lab)
    snap = (await poll_all(lab))["h200"]
    assert snap.state is HostState.OK, snap.error
    doc = snap.to_json()
    assert doc["source"] == "nvidia-smi" and doc["memory_kind"] == "dedicated"
    (gpu,) = doc["gpus"]
    raw = dict(h200_catalog(H200 / "query-gpu.all-fields.load.csv")[0])
    assert gpu["name"] == "NVIDIA H200" and gpu["uuid"] == raw["uuid"]
    assert gpu["memory_total_bytes"] == int(raw["memory.total"].split()[0]) * MIB
    assert gpu["memory_used_bytes"] == int(raw["memory.used"].split()[0]) * MIB
    assert gpu["memory_reserved_bytes"] == int(raw["memory.reserved"].split()[0]) * MIB
    assert gpu["utilization_pct"] == float(raw["utilization.gpu"].split()[0])
    assert gpu["power_w"] == float(raw["power.draw"].split()[0])
    assert gpu["power_limit_w"] == float(raw["power.limit"].split()[0])
    assert doc["processes"][0]["pid"] == 434 and doc["processes"][0]["used_memory_bytes"] == 50154 * MIB
    total = parse_meminfo(Path("/proc/meminfo").read_text()).total_bytes
    assert doc["system_memory"]["total_bytes"] == total and doc["rtt_ms"] is not None


async def test_rejected_field_falls_back_and_keeps_reading(lab: Lab) -> None:
    rows = h200_catalog(H200 / "query-gpu.all-fields.idle.csv")
    lab.add(
        "old",
        {
            "nvidia": {
                "gpus": rows,
                "apps": [],
                "app_fields": ["gpu_uuid", "pid", "process_name", "used_memory"],
                "reject": ["clocks.current.sm", "pcie.link.width.current"],
            }
        },
        ("nvidia-smi",),
    )
    snap = (await poll_all(lab))["old"]
    assert snap.state is HostState.OK, snap.error
    assert snap.gpus[0].memory_total_bytes == 143771 * MIB and snap.gpus[0].sm_clock_mhz is None
    assert any("clocks.current.sm" in n for n in snap.notes) and any("pcie.link.width" in n for n in snap.notes)


async def test_unified_gb10_reads_memory_from_meminfo(lab: Lab) -> None:
    uuid = gb10_row()["uuid"]
    lab.add(
        "spark",
        {
            "nvidia": {
                "gpus": [gb10_row()],
                "apps": [
                    {
                        "gpu_uuid": uuid,
                        "pid": "4242",
                        "process_name": "llama-server",
                        "used_memory": "35200 MiB",
                        "used_gpu_memory": "35200 MiB",
                    }
                ],
            }
        },
        ("nvidia-smi",),
    )
    snap = (await poll_all(lab))["spark"]
    assert snap.state is HostState.OK, snap.error
    doc = snap.to_json()
    assert doc["memory_kind"] == "unified"
    gpu = doc["gpus"][0]
    meminfo = parse_meminfo(Path("/proc/meminfo").read_text())
    assert gpu["memory_total_bytes"] == meminfo.total_bytes  # MemTotal, not a made-up number
    assert 0 < gpu["memory_used_bytes"] < meminfo.total_bytes  # MemTotal - MemAvailable at poll time
    assert gpu["power_w"] == 11.17 and gpu["power_limit_w"] is None
    assert doc["processes"][0]["used_memory_bytes"] == 35200 * MIB  # per-process memory still works
    assert any("unified" in n for n in doc["notes"])


async def test_tensor_parallel_node_maps_engine_to_gpus(lab: Lab) -> None:
    base = h200_catalog(H200 / "query-gpu.all-fields.load.csv")[0]
    rows = [{**base, "index": str(i), "uuid": f"GPU-0000000{i}-tp4"} for i in range(4)]
    procs = [
        {
            "gpu_uuid": f"GPU-0000000{i}-tp4",
            "pid": str(100 + i),
            "process_name": "python3",
            "used_memory": "20000 MiB",
            "used_gpu_memory": "20000 MiB",
        }
        for i in range(3)
    ]
    lab.add("tp4", {"nvidia": {"gpus": rows, "apps": procs}}, ("nvidia-smi",))
    engines = (
        '[[engines]]\nname = "qwen-tp4"\nkind = "vllm"\nurl = "http://127.0.0.1:9"\nhost = "tp4"\ngpus = [0, 1, 2, 3]\n'
    )
    snap = (await poll_all(lab, engines))["tp4"]
    assert len(snap.gpus) == 4
    assert {p.engine for p in snap.processes} == {"qwen-tp4"}
    assert snap.engine_gpus == {"qwen-tp4": [0, 1, 2, 3]}
    assert "engine qwen-tp4: no compute process on GPU 3" in snap.notes


async def test_amd_rocm_smi_and_amd_smi_apu(lab: Lab, tmp_path: Path) -> None:
    rocm = write(tmp_path / "rocm.json", json_part(SAMPLES / "rocm-smi-json-csv-rx7900xt-marimo-issue9237.txt"))
    lab.add("rx7900", {"files": {"rocm-smi": rocm}}, ("rocm-smi",))
    lab.add("apu", {"files": {"amd-smi": str(FIXTURES / "amd-smi-metric-radeon890m.json")}}, ("amd-smi",))
    snaps = await poll_all(lab)
    rx = snaps["rx7900"]
    assert rx.state is HostState.OK and rx.source == "rocm-smi", rx.error
    assert rx.gpus[0].memory_total_bytes == 21458059264 and rx.gpus[0].name == "Radeon RX 7900 XT"
    apu = snaps["apu"]
    assert apu.source == "amd-smi" and apu.gpus[0].memory_total_bytes == (65536 + 12288) * MIB  # VRAM + GTT
    assert apu.gpus[0].utilization_pct is None and apu.gpus[0].temperature_c == 28


async def test_apple_silicon_over_ssh(lab: Lab, tmp_path: Path) -> None:
    vm_text = (SAMPLES / "macos-vm_stat-sysctl-memsize-samples.txt").read_text()
    vm_stat = vm_text[vm_text.index("Mach Virtual") : vm_text.index("--- (b)")]
    macmon = next(
        ln
        for ln in (SAMPLES / "macmon-pipe-json-apple-silicon-beszel-issue1796.txt").read_text().splitlines()
        if ln.startswith('{"all_power"')
    )
    lab.add(
        "studio",
        {
            "uname": "Darwin",
            "files": {
                "sysctl": write(tmp_path / "s", "38654705664\n"),
                "vm_stat": write(tmp_path / "v", vm_stat),
                "macmon": write(tmp_path / "m", macmon + "\n"),
            },
        },
        ("uname", "sysctl", "vm_stat", "macmon"),
    )
    snap = (await poll_all(lab))["studio"]
    assert snap.state is HostState.OK and snap.source == "macos", snap.error
    assert snap.memory_kind == "unified"
    assert snap.system_memory is not None and snap.system_memory.total_bytes == 38654705664
    free_pages = 6127229 + 430715 + 11820 + 628646  # free + speculative + purgeable + inactive, 4096-byte pages
    assert snap.system_memory.available_bytes == free_pages * 4096
    assert snap.system_memory.swap_used_bytes == 1027801088  # from macmon
    assert snap.gpus[0].power_w == pytest.approx(0.004442947451025248)
    assert any("swap in use" in n for n in snap.notes)


# -- failures ------------------------------------------------------------------------------------


async def test_unknown_host_key_is_refused_with_the_fix(lab: Lab) -> None:
    lab.add("new", {}, (), trust=False)
    snap = (await poll_all(lab))["new"]
    assert snap.state is HostState.HOST_KEY_UNKNOWN
    assert "ssh-keyscan" in (snap.error or "") and "accept-new" in (snap.error or "")


async def test_accept_new_records_a_first_seen_key(lab: Lab) -> None:
    lab.add("new", {}, (), trust=False)
    snap = (await poll_all(lab, new='host_key_policy = "accept-new"'))["new"]
    assert snap.state is HostState.OK, snap.error
    host, keytype, key = lab.hosts["new"].known_hosts_line().split()[:3]
    assert f"{host} {keytype} {key}" in lab.known_hosts.read_text()


async def test_changed_host_key_is_refused_even_with_accept_new(lab: Lab, tmp_path: Path) -> None:
    host = lab.add("moved", {}, ())
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "other")], check=True)
    other = (tmp_path / "other.pub").read_text().strip()
    lab.known_hosts.write_text(f"[127.0.0.1]:{host.port} {other}\n")
    snap = (await poll_all(lab, moved='host_key_policy = "accept-new"'))["moved"]
    assert snap.state is HostState.HOST_KEY_CHANGED and "ssh-keygen -R" in (snap.error or "")
    assert lab.known_hosts.read_text().count("127.0.0.1") == 1  # nothing was silently added


async def test_authentication_refused(lab: Lab, tmp_path: Path) -> None:
    lab.add("locked", {}, ())
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "stranger")], check=True)
    config = parse_config(lab.toml().replace(str(lab.client_key), str(tmp_path / "stranger")))
    (snap,) = await sample_hosts(config)
    assert snap.state is HostState.AUTH_FAILED and "authorized_keys" in (snap.error or "")


async def test_persistent_connection_and_sshd_killed_mid_poll(lab: Lab) -> None:
    row = h200_catalog(H200 / "query-gpu.all-fields.idle.csv")
    scenario = {"nvidia": {"gpus": row, "apps": [], "app_fields": ["gpu_uuid", "pid", "process_name", "used_memory"]}}
    lab.add("a", scenario, ("nvidia-smi",))
    lab.add("b", scenario, ("nvidia-smi",))
    config = parse_config(lab.toml())
    pool = SSHPool(config.hosts, 2.0, 8)
    pollers = {h.name: HostPoller(h, pool[h.name]) for h in config.hosts}
    try:
        for _ in range(3):
            snaps = await asyncio.gather(*(p.poll() for p in pollers.values()))
            assert all(s.state is HostState.OK for s in snaps), [s.error for s in snaps]
        assert pool["a"].connects == 1 and pool["b"].connects == 1  # no handshake per poll
        lab.hosts["a"].set_scenario({"nvidia": {**scenario["nvidia"], "hang": True}})
        in_flight = asyncio.create_task(pollers["a"].poll())
        await asyncio.sleep(0.5)
        lab.hosts["a"].stop()  # sshd and its sessions die while the poll waits on nvidia-smi
        started = asyncio.get_running_loop().time()
        dead, alive = await asyncio.gather(in_flight, pollers["b"].poll())
        assert asyncio.get_running_loop().time() - started < 2.0 + 1.0  # within one timeout
        assert dead.state in (HostState.UNREACHABLE, HostState.DEGRADED) and dead.error
        assert alive.state is HostState.OK
        again = await pollers["a"].poll()
        assert again.state is HostState.UNREACHABLE and "refused" in (again.error or "")
    finally:
        await pool.close()


async def test_hanging_command_times_out_and_others_keep_updating(lab: Lab) -> None:
    row = h200_catalog(H200 / "query-gpu.all-fields.idle.csv")
    lab.add("stuck", {"nvidia": {"gpus": row, "apps": [], "hang": True}}, ("nvidia-smi",))
    lab.add("fine", {"nvidia": {"gpus": row, "apps": [], "app_fields": ["gpu_uuid"]}}, ("nvidia-smi",))
    started = asyncio.get_running_loop().time()
    snaps = await poll_all(lab)
    assert asyncio.get_running_loop().time() - started < 3.0 * 2 + 1
    assert snaps["stuck"].state is HostState.DEGRADED and "did not finish" in (snaps["stuck"].error or "")
    assert snaps["fine"].state is HostState.OK


def test_status_json_fills_hosts(lab: Lab, tmp_path: Path) -> None:
    add_h200_under_load(lab)
    lab.add("spark", {"nvidia": {"gpus": [gb10_row()], "apps": [], "app_fields": ["gpu_uuid"]}}, ("nvidia-smi",))
    config = tmp_path / "hosts.toml"
    config.write_text(lab.toml())
    proc = subprocess.run(
        [sys.executable, "-m", "poolconsole", "status", "--config", str(config), "--json", "--samples", "1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    hosts = {h["name"]: h for h in json.loads(proc.stdout)["hosts"]}
    for h in hosts.values():
        assert set(h) >= {"name", "state", "error", "source", "memory_kind", "gpus", "system_memory", "rtt_ms"}
        assert set(h["system_memory"]) >= {"total_bytes", "available_bytes", "swap_used_bytes"}
        for g in h["gpus"]:
            assert set(g) >= {
                "index",
                "name",
                "uuid",
                "memory_total_bytes",
                "memory_used_bytes",
                "utilization_pct",
                "temperature_c",
                "power_w",
                "power_limit_w",
            }
    assert hosts["h200"]["memory_kind"] == "dedicated" and hosts["spark"]["memory_kind"] == "unified"
    assert re.match(r"GPU-", hosts["h200"]["gpus"][0]["uuid"])


async def test_host_in_a_network_namespace_whose_link_is_cut(lab: Lab) -> None:
    ns = NetNamespace(f"pc{__import__('os').getpid() % 100000}").up()
    try:
        row = h200_catalog(H200 / "query-gpu.all-fields.idle.csv")
        scenario = {"nvidia": {"gpus": row, "apps": [], "app_fields": ["gpu_uuid"]}}
        lab.add("far", scenario, ("nvidia-smi",), address=ns.ns_ip, netns=ns.name)
        lab.add("near", scenario, ("nvidia-smi",))
        config = parse_config(lab.toml())
        pool = SSHPool(config.hosts, 2.0, 8)
        pollers = {h.name: HostPoller(h, pool[h.name]) for h in config.hosts}
        try:
            first = await asyncio.gather(*(p.poll() for p in pollers.values()))
            assert all(s.state is HostState.OK for s in first), [s.error for s in first]
            ns.cut()
            loop = asyncio.get_running_loop()
            started = loop.time()
            far, near = await asyncio.gather(pollers["far"].poll(), pollers["near"].poll())
            assert near.state is HostState.OK  # the others keep updating
            assert far.state is HostState.UNREACHABLE and "stopped answering" in (far.error or ""), far.error
            assert loop.time() - started < 2.0 + 2.0 + 1.0  # one command timeout plus one ping
        finally:
            pool["far"].abort()
            await pool.close()
    finally:
        lab.hosts["far"].stop() if "far" in lab.hosts else None
        ns.down()


async def test_streamed_telemetry_one_channel_live_values_then_hang_and_death(lab: Lab) -> None:
    """The console's mode: one remote loop per host (collect.hosts.stream). Samples follow the host's
    state over one channel and one connection; a loop that goes quiet is dropped and the batch run
    once, which says the command hangs; a dead sshd reads as unreachable."""
    idle = h200_catalog(H200 / "query-gpu.all-fields.idle.csv")
    load = h200_catalog(H200 / "query-gpu.all-fields.load.csv")
    scenario = {"nvidia": {"gpus": idle, "apps": [], "app_fields": ["gpu_uuid", "pid", "process_name", "used_memory"]}}
    lab.add("a", scenario, ("nvidia-smi",))
    config = parse_config(lab.toml())
    pool = SSHPool(config.hosts, 2.0, 8)
    poller = HostPoller(config.hosts[0], pool["a"], interval_s=0.3)
    try:
        first = await poller.poll()
        assert first.state is HostState.OK, first.error
        stream = poller.stream
        assert stream is not None and first.gpus[0].utilization_pct == float(idle[0]["utilization.gpu"].split()[0])
        lab.hosts["a"].set_scenario({"nvidia": {**scenario["nvidia"], "gpus": load}})
        busy = float(load[0]["utilization.gpu"].split()[0])
        for _ in range(20):
            snap = await poller.poll()
            assert snap.state is HostState.OK, snap.error
            if snap.gpus[0].utilization_pct == busy:
                break
        assert snap.gpus[0].utilization_pct == busy  # the running loop picked up the new state
        assert poller.stream is stream and stream.count >= 2 and pool["a"].connects == 1
        lab.hosts["a"].set_scenario({"nvidia": {**scenario["nvidia"], "hang": True}})
        for _ in range(3):  # a sample may already be on its way: the quiet loop shows within a few polls
            stuck = await poller.poll()
            if stuck.state is not HostState.OK:
                break
        assert stuck.state is HostState.DEGRADED and "did not finish" in (stuck.error or ""), stuck.error
        assert poller.stream is None or poller.stream is not stream  # the quiet loop was dropped
        lab.hosts["a"].stop()
        dead = await poller.poll()
        assert dead.state in (HostState.UNREACHABLE, HostState.DEGRADED) and dead.error
        again = await poller.poll()
        assert again.state is HostState.UNREACHABLE and "refused" in (again.error or "")
    finally:
        await poller.close()
        await pool.close()
