"""Which configured engine a GPU compute process belongs to.

A GPU configured for one engine: its processes are that engine's (the config says so). A GPU that
several engines may use (each lists it in `gpus`, or an engine of the host lists no GPUs at all): a
process is attributed only on evidence, the systemd unit or container its cgroup names matched
against the engine's `container` and `control.name`; without it the process stays unattributed, with a
note saying the GPU is shared and by whom, never given to whichever engine came last.

The evidence is read by one fixed command (`IDENTIFY`: nothing from the config or the network in it),
only when a process not seen before appears on a shared GPU; the poll itself stays what it was.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

from poolconsole.collect.engines.kinds import adapters
from poolconsole.config.models import Engine
from poolconsole.model.hosts import GpuProcess, GpuReading

IDENTIFY = (
    "for p in $(nvidia-smi --query-compute-apps=pid --format=csv,noheader,nounits 2>/dev/null); do "
    'case "$p" in ""|*[!0-9]*) continue;; esac; '
    'printf "pid %s " "$p"; tr "\\n" " " < "/proc/$p/cgroup" 2>/dev/null; echo; done; '
    "timeout 3 docker ps --no-trunc --format 'ctr {{.ID}} {{.Names}} {{.Label \"com.docker.compose.service\"}}' "
    "2>/dev/null; timeout 3 podman ps --no-trunc --format 'ctr {{.ID}} {{.Names}}' 2>/dev/null; true"
)
"""Each compute process's cgroup (`pid PID LINE LINE...`), then the running containers' full ids with
their names and compose service (`ctr ID NAME [SERVICE]`; docker and podman, whichever answers, each
given 3 s: a wedged daemon must not hold the poll)."""

UNIT = re.compile(r"(?<![^/\s:])([^/\s:]+)\.service(?=[/\s]|$)")
"""A systemd unit in a cgroup path: /system.slice/ollama.service, .../app.slice/llama-coder.service."""
CONTAINER = re.compile(r"(?:docker|libpod)[-/]([0-9a-f]{12,64})(?:\.scope)?(?=[/\s]|$)")
"""A container's id in a cgroup path: /system.slice/docker-ID.scope, /docker/ID, libpod-ID.scope."""
NO_GPU = frozenset(a.kind for a in adapters() if a.is_gateway)
"""Kinds that never hold a GPU (a gateway, LiteLLM): never a candidate for a GPU's processes."""


def parse_identities(text: str) -> dict[int, frozenset[str]]:
    """`IDENTIFY`'s output: for each PID listed, the unit and container names its cgroup leads to (an
    empty set when the cgroup was unreadable or names neither)."""
    containers: dict[str, set[str]] = {}
    cgroups: dict[int, str] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0] == "pid" and parts[1].isdigit():
            cgroups[int(parts[1])] = " ".join(parts[2:])
        elif len(parts) >= 3 and parts[0] == "ctr":
            containers[parts[1]] = {n for part in parts[2:] for n in part.split(",") if n}
    out: dict[int, frozenset[str]] = {}
    for pid, cgroup in cgroups.items():
        names: set[str] = set()
        for unit in UNIT.findall(cgroup):
            if not unit.startswith("user@"):  # the user manager, not the engine's unit
                names |= {unit, f"{unit}.service"}
        for cid in CONTAINER.findall(cgroup):
            for full, known in containers.items():
                if full.startswith(cid) or cid.startswith(full):
                    names |= known
        out[pid] = frozenset(names)
    return out


def engine_names(engine: Engine) -> frozenset[str]:
    """What a unit or container of this engine may be called: `container` and `control.name`."""
    names = {n for n in (engine.container, engine.control.name if engine.control else None) if n}
    return frozenset(names | {n.removesuffix(".service") for n in names})


def candidates(engines: Sequence[Engine], indices: Iterable[int]) -> dict[int, list[Engine]]:
    """For each GPU index, the engines that may have processes on it: those that list it, and those
    that list no GPUs (they could be on any)."""
    floating = [e for e in engines if e.gpus is None and e.kind not in NO_GPU]
    out: dict[int, list[Engine]] = {}
    for index in indices:
        out[index] = [e for e in engines if e.gpus and index in e.gpus] + floating
    return out


def shared(engines: Sequence[Engine], gpus: Sequence[GpuReading]) -> dict[int, list[Engine]]:
    """The GPUs that more than one engine may use, with those engines."""
    indices = [g.index for g in gpus if g.index is not None]
    return {i: c for i, c in candidates(engines, indices).items() if len(c) > 1}


def _and(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def map_processes(
    engines: Sequence[Engine],
    gpus: Sequence[GpuReading],
    processes: Sequence[GpuProcess],
    identities: Mapping[int, frozenset[str]],
) -> tuple[tuple[GpuProcess, ...], dict[str, list[int]], list[str]]:
    """Each process with the engine it belongs to (None when that is not known), the engines' configured
    GPUs, and notes: configured GPUs missing or idle, processes of no engine, shared GPUs whose
    processes cannot be told apart."""
    by_uuid: dict[str, int] = {g.uuid: g.index for g in gpus if g.uuid and g.index is not None}
    busy = {by_uuid[p.gpu_uuid] for p in processes if p.gpu_uuid in by_uuid}
    notes: list[str] = []
    engine_gpus: dict[str, list[int]] = {}
    for engine in engines:
        if not engine.gpus:
            continue
        engine_gpus[engine.name] = list(engine.gpus)
        for index in engine.gpus:
            if index not in by_uuid.values():
                notes.append(f"engine {engine.name}: GPU {index} is configured but not on this host")
            elif index not in busy:
                notes.append(f"engine {engine.name}: no compute process on GPU {index}")
    pinned = any(e.gpus for e in engines)
    may_use = candidates(engines, sorted(set(by_uuid.values())))
    untold: dict[int, list[GpuProcess]] = {}
    mapped: list[GpuProcess] = []
    for p in processes:
        gpu = by_uuid.get(p.gpu_uuid or "")
        owner: str | None = None
        sharing = may_use[gpu] if gpu is not None else []
        if gpu is None:
            pass  # a GPU this poll did not list
        elif len(sharing) == 1 and sharing[0].gpus:
            owner = sharing[0].name  # the only engine that may be on this GPU, and it is configured there
        elif len(sharing) > 1:
            evidence = identities.get(p.pid, frozenset()) if p.pid is not None else frozenset()
            matches = [e.name for e in sharing if engine_names(e) & evidence]
            if len(matches) == 1:
                owner = matches[0]
            else:
                untold.setdefault(gpu, []).append(p)
        elif not sharing and pinned:
            notes.append(f"process {p.pid} ({p.name}) on GPU {gpu} belongs to no engine")
        mapped.append(replace(p, engine=owner))
    for gpu, procs in sorted(untold.items()):
        who = _and(sorted(e.name for e in may_use[gpu]))
        listed = ", ".join(f"{p.pid} ({p.name or '?'})" for p in procs)
        notes.append(f"GPU {gpu} is shared by {who}, cannot tell which process is whose: {listed}")
    return tuple(mapped), engine_gpus, notes
