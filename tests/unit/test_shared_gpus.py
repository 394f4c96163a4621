"""Shared GPUs (issue 13, item 10): with Ollama and llama.cpp both on GPU 0 of rig3090, each compute
process goes to the engine whose systemd unit or container its cgroup names, and when that cannot be
told, to no engine with a note saying so, never to whichever engine the config listed last.

The processes are the real two-process capture of an H200 (PIDs 1024 and 1051, `nvidia-smi -q`), in
the shape `--query-compute-apps` prints; the cgroup lines are the formats systemd, Docker and Podman
write (written for these tests: no capture of them exists in the fixtures)."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from poolconsole.collect.hosts import nvidia_smi as nv
from poolconsole.collect.hosts import owners
from poolconsole.collect.hosts.poll import PROBE
from poolconsole.collect.ssh import SSHFailure
from poolconsole.config import parse_config
from poolconsole.model.hosts import GpuReading, HostState
from tests.conftest import REAL
from tests.helpers.fakehost import FakeConnection, nvidia_answers, poll, poller
from tests.helpers.sshd import h200_catalog

H200 = REAL / "gpu" / "nvidia-h200"
GPU0 = "GPU-9228b3d5-1a14-22f5-06a6-4017cf0c6f25"
OLLAMA_ID = "4f1c9b7e2a3d" + "0" * 52
UNIT_CGROUP = "0::/user.slice/user-1000.slice/user@1000.service/app.slice/llama-coder.service"
DOCKER_CGROUP = f"0::/system.slice/docker-{OLLAMA_ID}.scope"


def rig3090(ollama_gpus: str = "gpus = [0]\n") -> str:
    """rig3090 of the example hosts.toml: llama.cpp as a systemd user unit, Ollama in a container."""
    return (
        '[[hosts]]\nname = "rig3090"\naddress = "rig3090.example"\n'
        '[[engines]]\nname = "qwen2.5-coder-3090"\nkind = "llamacpp"\nurl = "http://rig3090.example:8081"\n'
        'host = "rig3090"\ngpus = [0]\ncontainer = "llama-coder"\n'
        '[engines.control]\nbackend = "systemd"\nname = "llama-coder.service"\nuser_unit = true\n'
        '[[engines]]\nname = "embeddings"\nkind = "ollama"\nurl = "http://rig3090.example:11434"\n'
        f'host = "rig3090"\n{ollama_gpus}container = "ollama"\n'
    )


def two_processes() -> str:
    """PIDs 1024 and 1051 with their names and memory from the real `nvidia-smi -q` two-process capture."""
    text = (H200 / "q-memory-util-pids.2proc.txt").read_text()
    rows = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if "Process ID" in line:
            pid = line.split(":")[1].strip()
            name = lines[i + 2].split(":", 1)[1].strip()
            used = lines[i + 3].split(":", 1)[1].strip()
            rows.append(f"{GPU0}, {pid}, {name}, {used}")
    assert [r.split(", ")[1] for r in rows] == ["1024", "1051"]
    return "\n".join(rows) + "\n"


def meminfo() -> str:
    return "MemTotal:       131072000 kB\nMemAvailable:   30000000 kB\nSwapTotal: 0 kB\nSwapFree: 0 kB\n"


def host(identify: str | SSHFailure | None) -> FakeConnection:
    """rig3090's GPU (the real H200 under load) with the two processes; `identify` answers the cgroup
    read (None: the poller must not ask)."""
    gpu = h200_catalog(H200 / "query-gpu.all-fields.load.csv")[0]
    answers = nvidia_answers([gpu], two_processes(), meminfo())
    if identify is not None:
        answers[owners.IDENTIFY] = identify
    return FakeConnection(answers)


def h200() -> GpuReading:
    row = h200_catalog(H200 / "query-gpu.all-fields.load.csv")[0]
    return nv.parse_query_gpu(", ".join(row[f] for f in nv.FULL_FIELDS), nv.FULL_FIELDS).gpus[0]


def identified(*lines: str) -> str:
    return "".join(f"{line}\n" for line in lines)


async def test_two_engines_on_one_gpu_each_process_by_its_cgroup() -> None:
    conn = host(
        identified(
            f"pid 1024 {UNIT_CGROUP} ",
            f"pid 1051 {DOCKER_CGROUP} ",
            f"ctr {OLLAMA_ID} ollama ",
        )
    )
    snap = await poll(rig3090(), "rig3090", conn)
    assert snap.state is HostState.OK, snap.error
    assert {p.pid: p.engine for p in snap.processes} == {1024: "qwen2.5-coder-3090", 1051: "embeddings"}
    assert not any("shared" in n for n in snap.notes), snap.notes
    assert snap.engine_gpus == {"qwen2.5-coder-3090": [0], "embeddings": [0]}


async def test_shared_gpu_without_evidence_attributes_nothing_and_says_so() -> None:
    conn = host(identified("pid 1024 ", "pid 1051 "))  # cgroups unreadable (hidepid, another namespace)
    snap = await poll(rig3090(), "rig3090", conn)
    assert [p.engine for p in snap.processes] == [None, None]  # not both to "embeddings", listed last
    assert (
        "GPU 0 is shared by embeddings and qwen2.5-coder-3090, cannot tell which process is whose: "
        "1024 (python3), 1051 (/opt/torch/.venv/bin/python3)"
    ) in snap.notes
    assert snap.to_json()["processes"][0]["engine"] is None


async def test_one_process_told_the_other_not() -> None:
    """A container id docker does not list (another user's podman, a daemon that would not answer)."""
    conn = host(identified(f"pid 1024 {UNIT_CGROUP}", f"pid 1051 {DOCKER_CGROUP}"))
    snap = await poll(rig3090(), "rig3090", conn)
    assert {p.pid: p.engine for p in snap.processes} == {1024: "qwen2.5-coder-3090", 1051: None}
    assert any(n.endswith("whose: 1051 (/opt/torch/.venv/bin/python3)") for n in snap.notes), snap.notes


async def test_an_engine_listing_no_gpus_may_share_every_gpu() -> None:
    """The example hosts.toml: llama.cpp lists GPU 0, Ollama lists none; Ollama's process is not llama.cpp's."""
    conn = host(identified(f"pid 1024 {UNIT_CGROUP}", "pid 1051 0::/user.slice/user-1000.slice/session-3.scope"))
    snap = await poll(rig3090(ollama_gpus=""), "rig3090", conn)
    assert {p.pid: p.engine for p in snap.processes} == {1024: "qwen2.5-coder-3090", 1051: None}
    assert snap.engine_gpus == {"qwen2.5-coder-3090": [0]}
    assert any(n.startswith("GPU 0 is shared by embeddings and qwen2.5-coder-3090") for n in snap.notes)


async def test_cgroups_are_read_once_per_new_process() -> None:
    apps = [two_processes()]
    conn = host(
        identified(f"pid 1024 {UNIT_CGROUP}", f"pid 1051 {DOCKER_CGROUP}", f"pid 2001 {DOCKER_CGROUP}")
        + f"ctr {OLLAMA_ID} ollama\n"
    )
    conn.answers["nvidia-smi --query-compute-apps="] = lambda: apps[0]
    hp = poller(rig3090(), "rig3090", conn)
    for _ in range(3):
        snap = await hp.poll()
    assert conn.commands.count(owners.IDENTIFY) == 1  # the poll path itself is unchanged
    assert {p.pid: p.engine for p in snap.processes} == {1024: "qwen2.5-coder-3090", 1051: "embeddings"}
    apps[0] = two_processes().replace(", 1051, ", ", 2001, ")  # Ollama loaded another model: a new runner
    snap = await hp.poll()
    assert conn.commands.count(owners.IDENTIFY) == 2
    assert {p.pid: p.engine for p in snap.processes} == {1024: "qwen2.5-coder-3090", 2001: "embeddings"}
    assert set(hp.identities) == {1024, 2001}  # 1051 forgotten
    fixed = {PROBE, owners.IDENTIFY}
    assert all(c in fixed or c.startswith("nvidia-smi --query-gpu=") for c in conn.commands), conn.commands


async def test_failed_identification_keeps_the_poll_and_is_not_retried_each_second() -> None:
    conn = host(SSHFailure(HostState.UNREACHABLE, "command timed out"))
    hp = poller(rig3090(), "rig3090", conn)
    snap = await hp.poll()
    assert snap.state is HostState.OK and len(snap.gpus) == 1
    assert [p.engine for p in snap.processes] == [None, None]
    assert any("could not read the cgroups" in n for n in snap.notes)
    await hp.poll()
    assert conn.commands.count(owners.IDENTIFY) == 1


async def test_one_engine_per_gpu_needs_no_evidence() -> None:
    toml = (
        rig3090()
        .replace('gpus = [0]\ncontainer = "ollama"', 'container = "ollama"')
        .replace('kind = "ollama"', 'kind = "litellm"')
    )  # a proxy never holds a GPU: llama.cpp is the only engine that may be on GPU 0
    conn = host(None)
    snap = await poll(toml, "rig3090", conn)
    assert [p.engine for p in snap.processes] == ["qwen2.5-coder-3090", "qwen2.5-coder-3090"]
    assert owners.IDENTIFY not in conn.commands


def test_the_same_name_on_two_engines_is_no_evidence() -> None:
    config = parse_config(rig3090().replace('container = "llama-coder"', 'container = "ollama"'))
    gpus = owners.shared(config.engines, [h200()])
    assert [e.name for e in gpus[0]] == ["qwen2.5-coder-3090", "embeddings"]
    procs = nv.parse_compute_apps(two_processes())
    found = owners.parse_identities(identified(f"pid 1051 {DOCKER_CGROUP}", f"ctr {OLLAMA_ID} ollama"))
    mapped, _, notes = owners.map_processes(config.engines, [h200()], procs, found)
    assert [p.engine for p in mapped] == [None, None]  # "ollama" names both engines: neither is chosen
    assert any("cannot tell" in n for n in notes)


@pytest.mark.parametrize(
    ("cgroup", "containers", "names"),
    [
        (UNIT_CGROUP, "", {"llama-coder", "llama-coder.service"}),
        ("0::/system.slice/ollama.service", "", {"ollama", "ollama.service"}),
        (DOCKER_CGROUP, f"ctr {OLLAMA_ID} ollama", {"ollama"}),
        # cgroup v1, Docker's cgroupfs driver: one line per hierarchy, joined by the command
        (f"12:memory:/docker/{OLLAMA_ID} 1:name=systemd:/docker/{OLLAMA_ID}", f"ctr {OLLAMA_ID} ollama", {"ollama"}),
        # rootless Podman under the user manager (user@1000.service is not the engine's unit)
        (
            f"0::/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-{OLLAMA_ID}.scope/container",
            f"ctr {OLLAMA_ID} ollama",
            {"ollama"},
        ),
        # compose: the service label as well as the container's name
        (DOCKER_CGROUP, f"ctr {OLLAMA_ID} rig-ollama-1 ollama", {"rig-ollama-1", "ollama"}),
        ("0::/user.slice/user-1000.slice/session-3.scope", "", set()),  # started by hand in a login session
        ("", "", set()),  # unreadable
    ],
)
def test_cgroup_names(cgroup: str, containers: str, names: set[str]) -> None:
    text = identified(f"pid 1051 {cgroup} ", containers) if containers else identified(f"pid 1051 {cgroup} ")
    assert owners.parse_identities(text) == {1051: frozenset(names)}


def test_identify_runs_as_a_shell_command_on_this_machine(tmp_path: Path) -> None:
    """The fixed command in a real shell: a stand-in nvidia-smi lists this test's PID, a sentinel and an
    empty line; a stand-in docker records the arguments it got. The cgroup read is this machine's own."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    pid = os.getpid()
    argv = tmp_path / "docker-argv"

    def tool(name: str, body: str) -> None:
        path = bin_dir / name
        path.write_text(f"#!/bin/sh\n{body}\n")
        path.chmod(path.stat().st_mode | stat.S_IXUSR)

    tool("nvidia-smi", f"printf '{pid}\\n[N/A]\\n\\n'")
    tool("docker", f'for a in "$@"; do printf "%s\\n" "$a"; done > {argv}; echo "ctr {OLLAMA_ID} ollama"')
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    result = subprocess.run(["sh", "-c", owners.IDENTIFY], capture_output=True, text=True, env=env, timeout=30)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"pid {pid} ") and len([ln for ln in lines if ln.startswith("pid ")]) == 1
    own = " ".join(Path(f"/proc/{pid}/cgroup").read_text().split())
    assert " ".join(lines[0].split()[2:]) == own
    assert f"ctr {OLLAMA_ID} ollama" in lines
    assert argv.read_text().splitlines() == [
        "ps",
        "--no-trunc",
        "--format",
        'ctr {{.ID}} {{.Names}} {{.Label "com.docker.compose.service"}}',
    ]
    assert pid in owners.parse_identities(result.stdout)
