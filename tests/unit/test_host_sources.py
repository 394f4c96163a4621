"""Where each host is read from is chosen once (collect.hosts.sampling.host_pollers), for the live pool's loops
and for `status`'s sampling run alike: [prometheus] for `read = "prometheus"`, NVML for `local = true` (over SSH
to this machine where NVML is absent), SSH for any other, never by the address."""

from __future__ import annotations

import pytest

from poolconsole.collect.hosts import sampling
from poolconsole.collect.hosts.poll import HostPoller
from poolconsole.collect.hosts.sampling import LocalHostSource, SshHostSource, host_pollers
from poolconsole.collect.prometheus.hosts import PrometheusHostPoller
from poolconsole.collect.ssh import SSHPool
from poolconsole.config import parse_config
from poolconsole.model.hosts import HostSnapshot, HostState

CONFIG = """
[prometheus]
url = "http://127.0.0.1:9"

[[hosts]]
name = "prom"
address = "127.0.0.1"
read = "prometheus"

[[hosts]]
name = "here"
address = "127.0.0.1"
local = true

[[hosts]]
name = "tunnel"
address = "127.0.0.1"
port = 2222
"""


@pytest.mark.parametrize("interval_s", [None, 1.0])
async def test_each_host_is_read_from_its_declared_source_for_the_live_pool_and_status(
    interval_s: float | None,
) -> None:
    config = parse_config(CONFIG)
    pool = SSHPool([h for h in config.hosts if not h.local], 1.0, 2)
    sources = host_pollers(config, pool, interval_s=interval_s)
    try:
        assert [s.host.name for s in sources] == ["prom", "here", "tunnel"]
        prom, here, tunnel = sources
        assert isinstance(prom, PrometheusHostPoller)
        assert isinstance(here, LocalHostSource) and "here" not in pool.connections  # no SSH while NVML reads
        assert isinstance(tunnel, SshHostSource) and tunnel.poller.interval_s == interval_s  # streamed when live
    finally:
        for source in sources:
            await source.aclose()
        await pool.close()


async def test_a_local_host_without_nvml_is_read_over_ssh_from_then_on(monkeypatch: pytest.MonkeyPatch) -> None:
    config = parse_config(CONFIG)
    host = config.hosts[1]
    pool = SSHPool([], 1.0, 2)
    tried: list[str] = []

    def no_nvml(h: object) -> None:
        tried.append("nvml")
        return None

    async def over_ssh(self: HostPoller) -> HostSnapshot:
        tried.append("ssh")
        return HostSnapshot(self.host.name, self.host.address, HostState.OK, None)

    monkeypatch.setattr(sampling, "local_snapshot", no_nvml)
    monkeypatch.setattr(HostPoller, "poll", over_ssh)
    source = LocalHostSource(host, pool, config.engines, None, None)
    assert (await source.poll()).name == "here"
    assert (await source.poll()).state is HostState.OK
    assert tried == ["nvml", "ssh", "ssh"] and "here" in pool.connections
    await source.aclose()
    await pool.close()
