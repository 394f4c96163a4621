"""`poolconsole plan` and the fit check behind `rollover`: the memory each host has now (a poll of the
host, and the engines' own KV figures), or with `--offline` what the config says, summing each host's
engines on the GPUs they share."""

from __future__ import annotations

import asyncio
import time

from poolconsole.collect.hosts.sampling import sample_hosts
from poolconsole.config.models import Engine, Host, PoolConfig, Profile
from poolconsole.model import units
from poolconsole.model.hosts import HostSnapshot
from poolconsole.ops.capacity import engine_kv
from poolconsole.ops.fit import KvCapacity, LiveMemory, fit, kv_gib, live_memory, weights_gib


def active_profile(engine: Engine, active: str | None = None) -> Profile | None:
    name = active or engine.profile
    return next((p for p in engine.profiles if p.name == name), None)


async def poll_hosts(config: PoolConfig, names: set[str]) -> dict[str, HostSnapshot]:
    hosts = [h for h in config.hosts if h.name in names]
    if not hosts:
        return {}
    snapshots = await sample_hosts(config.model_copy(update={"hosts": hosts}))
    return {s.name: s for s in snapshots}


async def read_kv(engines: list[Engine], config: PoolConfig) -> dict[str, KvCapacity | None]:
    found = await asyncio.gather(*(engine_kv(e, config.settings) for e in engines))
    return {e.name: kv for e, kv in zip(engines, found, strict=True)}


def _shard_need(profile: Profile) -> float | None:
    """What an engine's active profile holds per GPU, from the config (weights and KV per shard + overhead)."""
    w = weights_gib(profile)
    if w is None:
        return None
    return (w + (kv_gib(profile) or 0.0)) / profile.tp_size + profile.overhead_gib


def config_memory(config: PoolConfig, host: Host, engine: Engine) -> LiveMemory | None:
    """--offline: the host's configured GPU sizes, and on each GPU the other engines' active profiles."""
    if not host.gpu_memory_gib:
        return None
    totals = dict(enumerate(host.gpu_memory_gib))
    others: dict[int, float] = {}
    for other in config.engines:
        if other.name == engine.name or other.host != host.name:
            continue
        profile = active_profile(other)
        need = _shard_need(profile) if profile else None
        if need is None:
            continue
        for index in other.gpus or list(range(profile.tp_size if profile else 1)):
            others[index] = others.get(index, 0.0) + need
    return LiveMemory(totals, others, None, True, "from the config (--offline)")


def plan_lines(
    config: PoolConfig,
    snapshots: dict[str, HostSnapshot],
    kv: dict[str, KvCapacity | None],
    active: dict[str, str],
    offline: bool,
    now: float | None = None,
) -> list[str]:
    """The instance map: each host, what it holds now, and each engine's profiles through the fit check."""
    now = time.time() if now is None else now
    out: list[str] = []
    for host in config.hosts:
        engines = [e for e in config.engines if e.host == host.name]
        snap = snapshots.get(host.name)
        out.append(f"{host.name} ({host.description or host.address}): {_host_memory(host, snap, offline)}")
        for engine in engines:
            current = active.get(engine.name) or engine.profile
            if not engine.profiles:
                out.append(f"  {engine.name}: {engine.kind.value}, {engine.model or ''} (no profile to check)")
                continue
            live = (
                config_memory(config, host, engine)
                if offline
                else live_memory(snap, engine, now - snap.fetched_at if snap else None)
            )
            for profile in engine.profiles:
                is_active = profile.name == current
                report = fit(engine, profile, host, live, kv.get(engine.name), active=is_active)
                lines = report.lines()
                lines[0] += "  [active]" if is_active else ""
                out += ["  " + line for line in lines]
    return out


def _host_memory(host: Host, snap: HostSnapshot | None, offline: bool) -> str:
    if not offline and snap is not None and snap.state.answering:
        mem = snap.system_memory
        if snap.memory_kind == "unified" and mem is not None and mem.total_bytes:
            total, available = units.gib(mem.total_bytes, 0), units.gib(mem.available_bytes, 0)
            return f"{total} GiB unified, {available} GiB available now (polled)"
        cards = [f"{units.gib(g.memory_used_bytes, 1)}/{units.gib(g.memory_total_bytes, 0)}" for g in snap.gpus]
        shown = " ".join(cards)
        return f"{len(cards)} GPU(s), GiB used/total {shown} (polled)" if cards else "no GPU reported (polled)"
    poll = "not polled (--offline)" if offline or snap is None else f"not polled: {snap.state}: {snap.error}"
    gpus = host.gpu_memory_gib
    configured = (
        f"{len(gpus)} GPU(s) {'/'.join(f'{g:g}' for g in gpus)} GiB (config)"
        if gpus
        else (f"{host.memory_gib:g} GiB unified (config)" if host.memory_gib else "GPU memory not configured")
    )
    return f"{configured}; {poll}"
