"""Which hosts are read through this machine's NVML: only those declared `local = true`, never one
chosen by its address. Every demo host and any SSH tunnel sits at 127.0.0.1:PORT; reading those
through local NVML would show this machine's GPU under every simulated host (issue 13, item 13).

NVML is made to "load" by replacing the reader with one that returns a GPU no capture has, so a
snapshot says by its GPU name which path produced it, on machines with and without a GPU."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from poolconsole.collect.hosts import sampling
from poolconsole.collect.hosts.nvml import NvmlUnavailable
from poolconsole.collect.hosts.sampling import sample_hosts
from poolconsole.config import parse_config
from poolconsole.config.schema import json_schema
from poolconsole.model.hosts import GpuProcess, GpuReading, HostState
from poolconsole.ui.app import PoolApp
from tests.conftest import REAL
from tests.helpers.sshd import Lab, h200_catalog

H200 = REAL / "gpu" / "nvidia-h200"
FAKE_NVML_GPU = "NVML-READ-THIS-MACHINE"
ELSEWHERE = "this-machine.invalid"
"""An address that is not loopback and resolves nowhere: `local = true` alone must decide."""
NvmlResult = tuple[tuple[GpuReading, ...], tuple[GpuProcess, ...], str | None, bool]


def fake_nvml() -> NvmlResult:
    gpu = GpuReading(0, FAKE_NVML_GPU, "GPU-local-nvml", 80 * 2**30, 2**30, 7.0, 40.0, 100.0, 400.0)
    return (gpu,), (), "999.99", False


def nvml_absent() -> NvmlResult:
    raise NvmlUnavailable("NVML did not load: test")


@pytest.fixture
def nvml_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """NVML "loads" on this machine (whatever the machine has); the list counts the reads."""
    calls: list[int] = []

    def reader() -> NvmlResult:
        calls.append(1)
        return fake_nvml()

    monkeypatch.setattr(sampling, "read_nvml", reader)
    return calls


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    """One real sshd on 127.0.0.1:PORT answering nvidia-smi from the H200 idle capture."""
    lab = Lab(tmp_path / "lab")
    lab.add(
        "tunnel",
        {"nvidia": {"gpus": h200_catalog(H200 / "query-gpu.all-fields.idle.csv"), "apps": []}},
        ("nvidia-smi",),
    )
    yield lab
    lab.stop()


def test_local_is_a_documented_config_field() -> None:
    assert parse_config('[[hosts]]\nname = "a"\naddress = "127.0.0.1"\n').hosts[0].local is False
    assert parse_config('[[hosts]]\nname = "a"\naddress = "x"\nlocal = true\n').hosts[0].local is True
    schema = json_schema()
    assert '"local"' in schema and "without SSH" in schema


async def test_loopback_host_with_a_port_is_read_over_ssh_even_when_nvml_loads(lab: Lab, nvml_calls: list[int]) -> None:
    (snap,) = await sample_hosts(parse_config(lab.toml()))
    assert snap.state is HostState.OK, snap.error
    assert snap.address == "127.0.0.1" and snap.source == "nvidia-smi"
    assert [g.name for g in snap.gpus] == ["NVIDIA H200"]
    assert nvml_calls == []  # never even asked


async def test_declared_local_host_is_read_through_nvml_whatever_its_address(nvml_calls: list[int]) -> None:
    config = parse_config(f'[[hosts]]\nname = "me"\naddress = "{ELSEWHERE}"\nlocal = true\n')
    (snap,) = await sample_hosts(config)
    assert snap.state is HostState.OK and snap.source == "nvml" and snap.driver == "999.99"
    assert [g.name for g in snap.gpus] == [FAKE_NVML_GPU]
    assert nvml_calls == [1]


async def test_declared_local_host_without_nvml_falls_back_to_ssh(lab: Lab, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sampling, "read_nvml", nvml_absent)
    (snap,) = await sample_hosts(parse_config(lab.toml(tunnel="local = true")))
    assert snap.state is HostState.OK and snap.source == "nvidia-smi"
    assert [g.name for g in snap.gpus] == ["NVIDIA H200"]


async def test_console_reads_only_declared_local_hosts_through_nvml(
    lab: Lab, nvml_calls: list[int], tmp_path: Path
) -> None:
    """The console's poll loops make the same choice: the tunnel over SSH, the declared host via NVML
    (its address resolves nowhere, so an SSH attempt could not read a GPU)."""
    toml = lab.toml() + f'\n[[hosts]]\nname = "me"\naddress = "{ELSEWHERE}"\nlocal = true\n'
    toml = toml.replace("ssh_timeout_s = 3.0", "ssh_timeout_s = 3.0\npoll_interval_s = 0.5")
    app = PoolApp(parse_config(toml), theme_state=tmp_path / "ui.json")
    async with app.run_test(size=(120, 30)):
        for _ in range(100):
            snaps = {name: app.state.hosts[name].snapshot for name in ("tunnel", "me")}
            if all(s is not None for s in snaps.values()):
                break
            await asyncio.sleep(0.1)
        tunnel, me = snaps["tunnel"], snaps["me"]
        assert tunnel is not None and me is not None
        assert tunnel.source == "nvidia-smi" and [g.name for g in tunnel.gpus] == ["NVIDIA H200"], tunnel.error
        assert me.source == "nvml" and [g.name for g in me.gpus] == [FAKE_NVML_GPU]
        assert app.ssh is not None and "me" not in app.ssh.connections
