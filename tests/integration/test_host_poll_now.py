"""`r` reaches streamed hosts (issue 13): a host's telemetry comes from a remote loop that samples every
interval (collect.hosts.stream); releasing the console's waits makes its poller take a sample the
ordinary way at once, whether it was between polls or waiting for the loop's next sample, and the
loop goes on. Over a real OpenSSH sshd on loopback (tests/helpers/sshd.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from poolconsole.collect.hosts.poll import HostPoller
from poolconsole.collect.ssh import SSHPool
from poolconsole.config import parse_config
from poolconsole.model.hosts import HostState
from tests.conftest import REAL
from tests.helpers.sshd import Lab, h200_catalog

H200 = REAL / "gpu" / "nvidia-h200"
INTERVAL_S = 60.0
"""The remote loop's interval: no sample of its own comes during the test."""
AT_ONCE_S = 10.0
"""A generous bound for one exec over loopback SSH on a loaded machine, far below INTERVAL_S."""


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    lab = Lab(tmp_path / "lab")
    yield lab
    lab.stop()


def release(wakers: set[asyncio.Future[None]]) -> None:
    """What the console's `r` does (PoolApp.action_poll_now)."""
    for waiter in list(wakers):
        if not waiter.done():
            waiter.set_result(None)


async def test_r_samples_a_streamed_host_at_once_and_the_stream_goes_on(lab: Lab) -> None:
    idle = h200_catalog(H200 / "query-gpu.all-fields.idle.csv")
    load = h200_catalog(H200 / "query-gpu.all-fields.load.csv")
    scenario = {"nvidia": {"gpus": idle, "apps": [], "app_fields": ["gpu_uuid", "pid", "process_name", "used_memory"]}}
    lab.add("a", scenario, ("nvidia-smi",))
    config = parse_config(lab.toml())
    pool = SSHPool(config.hosts, 5.0, 8)
    wakers: set[asyncio.Future[None]] = set()
    poller = HostPoller(config.hosts[0], pool["a"], interval_s=INTERVAL_S, wakers=wakers)
    busy = float(load[0]["utilization.gpu"].split()[0])
    try:
        first = await poller.poll()
        assert first.state is HostState.OK, first.error
        stream = poller.stream
        assert stream is not None and stream.count == 1
        lab.hosts["a"].set_scenario({"nvidia": {**scenario["nvidia"], "gpus": load}})

        # `r` while the poller waits for the loop's next sample (the console's steady state)
        waiting = asyncio.create_task(poller.poll())
        await asyncio.sleep(0.5)
        assert not waiting.done()  # it waits for the loop, which samples once a minute
        release(wakers)
        now = await asyncio.wait_for(waiting, AT_ONCE_S)
        assert now.state is HostState.OK, now.error
        assert now.gpus[0].utilization_pct == busy  # a fresh sample, not the loop's last one

        # `r` between two polls (the console's loop sleeping): the next poll does not wait for the loop
        lab.hosts["a"].set_scenario(scenario)
        release(wakers)
        between = await asyncio.wait_for(poller.poll(), AT_ONCE_S)
        assert between.state is HostState.OK and between.gpus[0].utilization_pct != busy

        # the remote loop was neither dropped nor restarted, and without `r` a poll waits for it again
        assert poller.stream is stream and not stream.closed and stream.count == 1
        assert pool["a"].connects == 1
        assert len(wakers) == 1 and not any(w.done() for w in wakers)
        later = asyncio.create_task(poller.poll())
        await asyncio.sleep(0.5)
        assert not later.done()
        later.cancel()
        with pytest.raises(asyncio.CancelledError):
            await later
    finally:
        await poller.close()
        await pool.close()
