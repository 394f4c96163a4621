"""Unknown is never 0 (issue 13, item 8): swap on a Mac without macmon, GPU memory used, a process's
memory, the GPU bar's sum over cards that did not report: None in the model, null in `status --json`,
"n/a" on screen. Each case is a real capture, or a minimal variant of one with the value made unknown."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from poolconsole.collect.hosts import nvidia_smi as nv
from poolconsole.collect.hosts.nvml import NOT_AVAILABLE, process_memory
from poolconsole.collect.hosts.poll import PROBE, SYSCTL, VM_STAT
from poolconsole.collect.hosts.systems import parse_amd_smi, parse_macmon, parse_macos
from poolconsole.config import parse_config
from poolconsole.model.hosts import GpuReading, HostSnapshot, HostState
from poolconsole.model.pool_state import HostTrack
from poolconsole.ui import cells
from poolconsole.ui.screens.detail import host_text
from tests.conftest import FIXTURES, REAL
from tests.helpers.fakehost import FakeConnection, nvidia_answers, poll
from tests.helpers.sshd import h200_catalog

H200 = REAL / "gpu" / "nvidia-h200"
SAMPLES = REAL / "issue-samples"
MIB = 1024 * 1024
COLORS = cells.Colors("green", "yellow", "red", "grey50", "cyan")
HOST = '[[hosts]]\nname = "box"\naddress = "box.example"\n'


def vm_stat_4096() -> str:
    """The real `vm_stat` of a Mac with 4096-byte pages (sample (a))."""
    text = (SAMPLES / "macos-vm_stat-sysctl-memsize-samples.txt").read_text()
    return text[text.index("Mach Virtual") : text.index("--- (b)")]


def meminfo() -> str:
    """MemTotal and MemAvailable of the real GB10 capture (no swap lines: swap unknown there too)."""
    text = (SAMPLES / "nvidia-smi-query-gb10-nvml-notsupported-nvitop-pr208.txt").read_text()
    return "".join(f"{ln.strip()}\n" for ln in text.splitlines() if ln.strip().startswith(("MemTotal", "MemAvailable")))


def h200_row(**changed: str) -> dict[str, str]:
    """The real H200 under load (the machine of the two-process capture), some fields changed."""
    return {**h200_catalog(H200 / "query-gpu.all-fields.load.csv")[0], **changed}


def one_gpu(row: dict[str, str]) -> GpuReading:
    line = ", ".join(row[f] for f in nv.FULL_FIELDS)
    (gpu,) = nv.parse_query_gpu(line, nv.FULL_FIELDS).gpus
    return gpu


def status_json(snap: HostSnapshot) -> Any:
    """What `status --json` prints for this host (cli dumps HostSnapshot.to_json)."""
    return json.loads(json.dumps(snap.to_json(), allow_nan=False, default=str))


# -- swap on a Mac without macmon ----------------------------------------------------------------


async def test_macos_without_macmon_swap_is_unknown_not_zero() -> None:
    conn = FakeConnection({PROBE: "Darwin\n", SYSCTL: "38654705664\n", VM_STAT: vm_stat_4096()})
    snap = await poll(HOST, "box", conn)
    assert snap.state is HostState.OK and snap.source == "macos", snap.error
    assert snap.system_memory is not None
    assert snap.system_memory.swap_used_bytes is None  # vm_stat counts swap-ins, not bytes in swap
    assert status_json(snap)["system_memory"]["swap_used_bytes"] is None
    text = host_text(HostTrack(parse_config(HOST).hosts[0], snap)).plain
    assert "swap n/a" in text and "swap 0" not in text
    free_pages = 6127229 + 430715 + 11820 + 628646
    assert f"system memory {(38654705664 - free_pages * 4096) / 2**30:.1f} / 36 GiB" in text  # known parts stay
    assert not any(n.startswith("swap in use") for n in snap.notes)


def test_macos_parsers_keep_swap_unknown_and_a_real_zero() -> None:
    assert parse_macos("38654705664\n", vm_stat_4096()).swap_used_bytes is None
    line = next(
        ln
        for ln in (SAMPLES / "macmon-pipe-json-apple-silicon-beszel-issue1796.txt").read_text().splitlines()
        if ln.startswith('{"all_power"')
    )
    memory, _ = parse_macmon(line)
    assert (memory.swap_used_bytes, memory.swap_total_bytes) == (1027801088, 2147483648)
    no_swap = line.replace('"swap_total":2147483648,"swap_usage":1027801088', '"swap_total":0,"swap_usage":0')
    memory, _ = parse_macmon(no_swap)
    assert (memory.swap_used_bytes, memory.swap_total_bytes) == (0, 0)  # none configured: 0, known
    assert cells.system_memory(memory).endswith("swap 0.0 GiB")


# -- GPU memory used -----------------------------------------------------------------------------


async def test_gpu_memory_used_not_reported_is_unknown() -> None:
    conn = FakeConnection(nvidia_answers([h200_row(**{"memory.used": "[N/A]"})], "", meminfo()))
    snap = await poll(HOST, "box", conn)
    (gpu,) = snap.gpus
    assert gpu.memory_total_bytes == 143771 * MIB and gpu.memory_used_bytes is None
    assert status_json(snap)["gpus"][0]["memory_used_bytes"] is None
    assert cells.gpu_memory(gpu) == "n/a / 140 GiB"
    assert cells.gpu_memory(replace(gpu, memory_used_bytes=21363 * MIB)) == "20.9 / 140 GiB"
    assert cells.gpu_bars(snap, None, COLORS).plain == "? n/a"
    text = host_text(HostTrack(parse_config(HOST).hosts[0], snap)).plain
    assert "swap n/a" in text  # /proc/meminfo without swap lines


# -- a process's memory --------------------------------------------------------------------------


def test_process_memory_not_reported_is_unknown() -> None:
    real = (H200 / "query-compute-apps.2proc.csv").read_text().splitlines()[1]  # 1024, python3, 21354 MiB
    (known,) = nv.parse_compute_apps(real)
    assert known.used_memory_bytes == 21354 * MIB and cells.process(known) == "1024:? 20.9G"
    (unknown,) = nv.parse_compute_apps(real.replace("21354 MiB", "[N/A]"))
    assert unknown.pid == 1024 and unknown.used_memory_bytes is None
    assert cells.process(unknown) == "1024:? n/a"
    assert cells.process(replace(unknown, engine="qwen", pid=None)) == "?:qwen n/a"
    snap = HostSnapshot("box", "box.example", HostState.OK, processes=(unknown,))
    assert status_json(snap)["processes"][0]["used_memory_bytes"] is None


def test_nvml_process_memory_unknown_and_zero() -> None:
    real = json.loads((H200 / "nvml.load.json").read_text())["gpus"][0]["compute_procs"][0]["used_gpu_memory"]
    assert process_memory(SimpleNamespace(pid=434, usedGpuMemory=real)) == real
    assert process_memory(SimpleNamespace(pid=434, usedGpuMemory=None)) is None  # pynvml: not available
    assert process_memory(SimpleNamespace(pid=434, usedGpuMemory=NOT_AVAILABLE)) is None  # an older pynvml
    assert process_memory(SimpleNamespace(pid=434)) is None
    assert process_memory(SimpleNamespace(pid=434, usedGpuMemory=0)) == 0  # what NVML said


# -- the GPU bar's sum ---------------------------------------------------------------------------


def test_gpu_bar_sum_over_cards_that_did_not_report_is_not_a_smaller_number() -> None:
    base = one_gpu(h200_row())
    cards = [replace(base, index=i, uuid=f"GPU-{i}") for i in range(4)]
    all_known = HostSnapshot("box", "box.example", HostState.OK, memory_kind="dedicated", gpus=tuple(cards))
    total = 4 * 143771 * MIB / 2**30
    assert cells.gpu_bars(all_known, None, COLORS).plain.endswith(f" {4 * 21363 * MIB / 2**30:.0f}/{total:.0f}G")
    fourth = {"index": "3", "uuid": "GPU-3"}
    lost_used = replace(all_known, gpus=(*cards[:3], one_gpu(h200_row(**fourth, **{"memory.used": "[N/A]"}))))
    text = cells.gpu_bars(lost_used, None, COLORS).plain
    assert text.endswith("? n/a"), text  # not 63/562G: three cards' sum read as the four's
    lost_card = replace(all_known, gpus=(*cards[:3], one_gpu(h200_row(**fourth, **{"memory.total": "[N/A]"}))))
    assert cells.gpu_bars(lost_card, None, COLORS).plain.endswith("? n/a")
    # an engine on cards 0-1 only: its own cards reported, so its sum is complete
    assert cells.gpu_bars(lost_used, [0, 1], COLORS).plain.endswith(f" {2 * 21363 * MIB / 2**30:.0f}/281G")


def test_unified_used_zero_is_known_and_unknown_is_na() -> None:
    gpu = one_gpu(h200_row())
    snap = HostSnapshot("box", "box.example", HostState.OK, memory_kind="unified", gpus=(gpu,))
    zero = replace(snap, gpus=(replace(gpu, memory_used_bytes=0),))
    assert cells.gpu_bars(zero, None, COLORS).plain == "◆ 0% unified"
    assert cells.gpu_bars(replace(snap, gpus=(replace(gpu, memory_used_bytes=None),)), None, COLORS).plain == (
        "◆ n/a unified"
    )
    narrow = replace(snap, gpus=(replace(gpu, memory_used_bytes=0),))
    assert cells.gpu_bars(narrow, None, COLORS, width=9).plain == "◆ 0%"  # the word whole or not at all


def test_amd_memory_pool_not_reported_leaves_used_unknown(tmp_path: Path) -> None:
    text = (FIXTURES / "amd-smi-metric-radeon890m.json").read_text()
    (apu,) = parse_amd_smi(text)
    assert apu.memory_total_bytes == (65536 + 12288) * MIB and apu.memory_used_bytes == (1512 + 129) * MIB
    (partial,) = parse_amd_smi(text.replace('"used_gtt": {"value": 129, "unit": "MB"}', '"used_gtt": "N/A"'))
    assert partial.memory_total_bytes == (65536 + 12288) * MIB
    assert partial.memory_used_bytes is None  # not 1512 MiB: VRAM alone, read as all of it
    (no_gtt,) = parse_amd_smi(text.replace('"total_gtt": {"value": 12288, "unit": "MB"}', '"total_gtt": "N/A"'))
    assert no_gtt.memory_total_bytes is None and no_gtt.memory_used_bytes == (1512 + 129) * MIB  # GTT size unknown


def test_a_card_is_named_by_the_words_that_tell_it_apart() -> None:
    names = {
        "NVIDIA H200": "H200",
        "NVIDIA GeForce RTX 3090": "RTX 3090",
        "NVIDIA GeForce RTX 5090": "RTX 5090",
        "NVIDIA RTX 6000 Ada Generation": "RTX 6000 Ada",  # was "Ada Generation"
        "NVIDIA GB10": "GB10",
        "AMD Radeon RX 7900 XTX": "RX 7900 XTX",
        None: "GPU",
    }
    assert {name: cells.card_name(name) for name in names} == names


def test_the_detail_of_a_host_that_never_answered_says_its_state_as_the_overview_does_and_unknown_as_n_a() -> None:
    """It read "auth_failed  source -  memory  rtt n/a": a raw state id, a dash, a kind left empty."""
    snap = HostSnapshot("box", "box.example", HostState.AUTH_FAILED, "authentication refused", fetched_at=1.0)
    text = host_text(HostTrack(parse_config(HOST).hosts[0], snap)).plain
    first = text.splitlines()[0]
    assert first == "host box  (box.example)  auth failed  source n/a  memory: n/a  rtt n/a", first
    assert cells.state_word(snap.state) == "auth failed"  # the overview's State column
