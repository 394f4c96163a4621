"""Poll every host once, concurrently (the `status` command); a host declared `local = true` reads NVML
without SSH, one with `read = "prometheus"` its exporters' series from `[prometheus]`. The address never
decides: 127.0.0.1:PORT is as likely an SSH tunnel or a simulated host as this machine."""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path
from typing import TYPE_CHECKING

from poolconsole.collect.hosts.nvml import NvmlUnavailable, read_nvml
from poolconsole.collect.hosts.poll import HostPoller
from poolconsole.collect.hosts.systems import parse_meminfo
from poolconsole.collect.prom import ParseError
from poolconsole.collect.ssh import SSHPool
from poolconsole.config.models import Host, PoolConfig
from poolconsole.model.hosts import HostSnapshot, HostState, SystemMemory

if TYPE_CHECKING:
    from poolconsole.collect.prometheus_hosts import PrometheusHostPoller
    from poolconsole.collect.prometheus_source import PrometheusAPI


def local_snapshot(host: Host) -> HostSnapshot | None:
    """Blocking (run in a thread): NVML and /proc/meminfo of this machine, or None when NVML is absent."""
    start = time.monotonic()
    try:
        gpus, processes, driver, unsupported = read_nvml()
    except NvmlUnavailable:
        return None
    memory: SystemMemory | None = None
    with contextlib.suppress(OSError, ParseError):
        memory = parse_meminfo(Path("/proc/meminfo").read_text())
    kind = host.memory_kind if host.memory_kind != "auto" else ("unified" if unsupported else "dedicated")
    return HostSnapshot(
        host.name,
        host.address,
        HostState.OK,
        None,
        source="nvml",
        memory_kind=kind,
        gpus=gpus,
        processes=processes,
        system_memory=memory,
        rtt_ms=round((time.monotonic() - start) * 1000, 1),
        fetched_at=time.time(),
        driver=driver,
    )


async def sample_hosts(config: PoolConfig) -> list[HostSnapshot]:
    pool = SSHPool(config.hosts, config.settings.ssh_timeout_s, config.settings.ssh_concurrency)
    readers: dict[int, PrometheusHostPoller] = {}
    api: PrometheusAPI | None = None
    if config.prometheus is not None:  # its modules load only for a pool that has one
        from poolconsole.collect.prometheus_hosts import PrometheusHostPoller
        from poolconsole.collect.prometheus_source import PrometheusAPI

        api = PrometheusAPI(config.prometheus, config.settings).acquire()
        readers = {  # every one made before the first polls, so that they read in one batch
            i: PrometheusHostPoller(h, api, config.engines)
            for i, h in enumerate(config.hosts)
            if h.read == "prometheus"
        }

    async def one(i: int, host: Host) -> HostSnapshot:
        reader = readers.get(i)
        if reader is not None:
            return await reader.poll()
        if host.local:
            local = await asyncio.to_thread(local_snapshot, host)
            if local is not None:
                return local
        return await HostPoller(host, pool[host.name], config.engines).poll()

    try:
        return list(await asyncio.gather(*(one(i, h) for i, h in enumerate(config.hosts))))
    finally:
        for reader in readers.values():
            await reader.aclose()
        await pool.close()
        if api is not None:
            await api.release()
