"""Where each host is read from, chosen once for every reader: a host with `read = "prometheus"` from its
exporters' series in `[prometheus]`, one declared `local = true` through NVML without SSH (over SSH to this
machine where NVML is absent), any other over SSH. The address never decides: 127.0.0.1:PORT is as likely an
SSH tunnel or a simulated host as this machine.

`host_pollers` is the hosts' factory, as `engine_pollers` (collect.engine_sources) is the engines': the live
pool's loops (runtime.live, with streamed telemetry), the bounded sampling run of `status` (runtime.sampling)
and the fit check's one poll (`sample_hosts`, ops.planning) all read through it."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from poolconsole.collect.hosts.nvml import NvmlUnavailable, read_nvml
from poolconsole.collect.hosts.poll import HostPoller
from poolconsole.collect.hosts.systems import parse_meminfo
from poolconsole.collect.prom import ParseError
from poolconsole.collect.ssh import SSHPool
from poolconsole.config.models import Engine, Host, PoolConfig
from poolconsole.model.hosts import HostSnapshot, HostState, SystemMemory

if TYPE_CHECKING:
    from poolconsole.collect.prometheus.source import PrometheusAPI


class HostSource(Protocol):
    """One host's reader: the next snapshot on each `poll` (it never raises), `aclose` once at the end."""

    host: Host

    @property
    def shared(self) -> object | None:
        """The batch its reading comes from, which others share (a query API's hosts), or None (as
        EngineSource.shared)."""

    async def poll(self) -> HostSnapshot: ...

    async def aclose(self) -> None: ...


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


class SshHostSource:
    """A host over its SSH connection (collect.hosts.poll): with `interval_s`, a remote loop streaming a sample
    every interval; without it, one exec per poll."""

    def __init__(self, poller: HostPoller) -> None:
        self.host = poller.host
        self.poller = poller

    @property
    def shared(self) -> None:
        return None

    async def poll(self) -> HostSnapshot:
        return await self.poller.poll()

    async def aclose(self) -> None:
        await self.poller.close()


class LocalHostSource:
    """This machine through NVML in a thread; where NVML is absent, over SSH to it from then on."""

    def __init__(
        self,
        host: Host,
        ssh: SSHPool,
        engines: Sequence[Engine],
        interval_s: float | None,
        wakers: set[asyncio.Future[None]] | None,
    ) -> None:
        self.host = host
        self.ssh = ssh
        self.engines = list(engines)
        self.interval_s = interval_s
        self.wakers = wakers
        self.fallback: HostPoller | None = None

    @property
    def shared(self) -> None:
        return None

    async def poll(self) -> HostSnapshot:
        if self.fallback is None:
            snapshot = await asyncio.to_thread(local_snapshot, self.host)
            if snapshot is not None:
                return snapshot
            conn = self.ssh.connections.get(self.host.name) or self.ssh.add(self.host)
            self.fallback = HostPoller(self.host, conn, self.engines, self.interval_s, self.wakers)
        return await self.fallback.poll()

    async def aclose(self) -> None:
        if self.fallback is not None:
            await self.fallback.close()


def host_pollers(
    config: PoolConfig,
    ssh: SSHPool,
    *,
    interval_s: float | None = None,
    wakers: set[asyncio.Future[None]] | None = None,
) -> list[HostSource]:
    """A reader per host of the config, in its order. `ssh`: the pool the SSH readers take their connections
    from (a host missing there is added). `interval_s` and `wakers`: a live pool's streamed telemetry and the
    waits that `r` releases (collect.hosts.poll); None: one exec per poll. The readers of `[prometheus]` share
    one client, closed when the last of them is; every one is made before the first poll, so that they read
    in one batch."""
    api: PrometheusAPI | None = None
    if config.prometheus is not None and any(h.read == "prometheus" for h in config.hosts):
        from poolconsole.collect.prometheus.source import PrometheusAPI  # only for a pool that reads one

        api = PrometheusAPI(config.prometheus, config.settings)
    out: list[HostSource] = []
    for host in config.hosts:
        if host.read == "prometheus" and api is not None:  # telemetry there, actions still over SSH
            from poolconsole.collect.prometheus.hosts import PrometheusHostPoller

            out.append(PrometheusHostPoller(host, api, config.engines))
        elif host.local:
            out.append(LocalHostSource(host, ssh, config.engines, interval_s, wakers))
        else:
            conn = ssh.connections.get(host.name) or ssh.add(host)
            out.append(SshHostSource(HostPoller(host, conn, config.engines, interval_s, wakers)))
    return out


async def sample_hosts(config: PoolConfig) -> list[HostSnapshot]:
    """One poll of every host of the config, concurrently, in its order (the fit check, a smoke run's
    conditions): a dead host only delays itself."""
    remote = [h for h in config.hosts if not h.local]
    pool = SSHPool(remote, config.settings.ssh_timeout_s, config.settings.ssh_concurrency)
    sources = host_pollers(config, pool)
    try:
        return list(await asyncio.gather(*(s.poll() for s in sources)))
    finally:
        for source in sources:
            await source.aclose()
        await pool.close()
