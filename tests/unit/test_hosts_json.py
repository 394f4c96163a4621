"""HostSnapshot.to_json reads its readings' fields without dataclasses.asdict (model.hosts._flat): the same
dict asdict gives, as long as every field of a reading is a scalar or a tuple of ints."""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import replace
from typing import Any

import pytest

from poolconsole.model.hosts import GpuProcess, GpuReading, HostSnapshot, HostState, SystemMemory, host_from_json
from tests.unit.test_gpu_health import parsed

SCALARS = {int, float, str, bool, type(None)}


def _flat_type(hint: Any) -> bool:
    if hint in SCALARS:
        return True
    if typing.get_origin(hint) in (types.UnionType, typing.Union):
        return all(_flat_type(arm) for arm in typing.get_args(hint))
    if typing.get_origin(hint) is tuple:
        return typing.get_args(hint) == (int, ...)
    return False


@pytest.mark.parametrize("cls", [GpuReading, GpuProcess, SystemMemory])
def test_every_field_of_a_reading_is_flat(cls: type[Any]) -> None:
    """What lets to_json skip asdict's deep copy: a nested dataclass, list or dict field would be shared, not
    copied (and a nested dataclass would stay an object JSON cannot write)."""
    hints = typing.get_type_hints(cls)
    nested = [f.name for f in dataclasses.fields(cls) if not _flat_type(hints[f.name])]
    assert nested == [], f"{cls.__name__}: {nested} are not scalars; HostSnapshot.to_json needs asdict for them"


def _full_host() -> HostSnapshot:
    """A host of four real H200 readings (the all-fields capture, every field known), one with Xids."""
    gpu = parsed("query-gpu.all-fields.load.csv")
    gpus = tuple(replace(gpu, index=i, uuid=f"GPU-{i}", xids=(79, 48) if i == 0 else ()) for i in range(4))
    processes = tuple(GpuProcess(4000 + i, "python3", f"GPU-{i}", 20 << 30, engine="vllm-a") for i in range(4))
    return HostSnapshot(
        "rig",
        "10.0.0.7",
        HostState.DEGRADED,
        error="xid 79",
        source="nvidia-smi",
        memory_kind="dedicated",
        gpus=gpus,
        processes=processes,
        system_memory=SystemMemory(1 << 37, 1 << 36, 1 << 20, 1 << 33, "normal"),
        rtt_ms=1.5,
        fetched_at=1765090000.25,
        driver="580.95.05",
        notes=("one note",),
        engine_gpus={"vllm-a": [0, 1, 2, 3]},
    )


def test_to_json_is_what_asdict_gives() -> None:
    host = _full_host()
    doc = host.to_json()
    assert doc["gpus"] == [dataclasses.asdict(g) for g in host.gpus]
    assert doc["processes"] == [dataclasses.asdict(p) for p in host.processes]
    assert host.system_memory is not None
    assert doc["system_memory"] == dataclasses.asdict(host.system_memory)
    assert doc["gpus"][0]["xids"] == (79, 48)
    assert host_from_json(doc) == host  # and it reads back whole


def gpu_name() -> str | None:
    return parsed("query-gpu.all-fields.load.csv").name


def test_to_json_copies_what_it_returns() -> None:
    """A caller that edits the document (export adds fields) leaves the snapshot as it was."""
    host = _full_host()
    doc = host.to_json()
    doc["gpus"][0]["name"] = "changed"
    doc["processes"].clear()
    assert host.gpus[0].name == gpu_name()
    assert host.to_json()["processes"] != []
