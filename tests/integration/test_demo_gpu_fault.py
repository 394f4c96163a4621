"""`--scenario gpu-fault` (issue 37): the demo's FAULT_HOST logs an Xid for GPU FAULT_GPU in its kernel log and
holds that GPU's clocks down (hardware and thermal slowdown); the host poll reads both over SSH (the
nvidia-smi query's clock-event reasons, the journal's `NVRM: Xid` lines) and the runtime, as `watch` runs it,
fires gpu_xid and gpu_throttle for that GPU only, with the labels a receiver gets; once the fault is gone
both clear (after gpu_throttle_clear_s)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from poolconsole.config import parse_config
from poolconsole.model.alerts import AlertEvent
from poolconsole.model.notify import labels_for
from poolconsole.runtime.live import LivePool, Update
from poolconsole.sim.demo import FAULT_GPU, FAULT_HOST, SCENARIOS, SimPool
from tests.helpers.receivers import until
from tests.helpers.simpools import answering

XID = f"gpu_xid_gpu{FAULT_GPU}"
THROTTLE = f"gpu_throttle_gpu{FAULT_GPU}"


@pytest.fixture
async def faulty(tmp_path: Path) -> AsyncIterator[SimPool]:
    pool = SimPool("gpu-fault", seed=6)
    pool.gpu_fault_after_s = 1.0
    async with answering(pool, tmp_path / "keys"):
        yield pool


async def test_watch_fires_gpu_xid_and_gpu_throttle_for_the_faulty_gpu_and_clears_them(faulty: SimPool) -> None:
    assert "gpu-fault" in SCENARIOS
    text = faulty.config_toml().replace("poll_interval_s = 1.0", "poll_interval_s = 0.5")
    alerts = "\n[alerts]\ngpu_throttle_for_s = 1\ngpu_throttle_clear_s = 1\n"
    config = parse_config(text + alerts, "hosts.toml")
    live = LivePool(config)
    heard: list[AlertEvent] = []

    def listen(update: Update) -> None:
        heard.extend(e for e in update.events if e.rule.startswith("gpu_"))

    live.subscribe(listen)
    live.start(settle_gc=False)
    try:
        await until(lambda: {XID, THROTTLE} <= {e.rule for e in heard if e.fired}, 60, "gpu_xid and gpu_throttle")
        fired = {e.rule: e for e in heard if e.fired}
        assert {e.target for e in heard} == {FAULT_HOST} and set(fired) == {XID, THROTTLE}, heard
        assert fired[XID].message.startswith(f"GPU {FAULT_GPU}: Xid 31 (GPU memory page fault)")
        assert fired[THROTTLE].message == (
            f"GPU {FAULT_GPU}: clocks held down: hardware slowdown, hardware thermal slowdown"
        )
        gpu = live.state.hosts[FAULT_HOST].snapshot
        assert gpu is not None
        readings = {g.index: g for g in gpu.gpus}
        assert readings[FAULT_GPU].xids == (31,) and readings[0].xids == ()  # read, and empty for the others
        engines = {e.name: e.host for e in config.engines}
        assert labels_for(XID, FAULT_HOST, engines, [h.name for h in config.hosts]) == {
            "alertname": "gpu_xid", "severity": "critical", "host": FAULT_HOST, "gpu": str(FAULT_GPU),
        }  # fmt: skip

        faulty.sim_hosts[FAULT_HOST].fault = None  # the Xid leaves the window, the clocks are released
        await until(lambda: {XID, THROTTLE} <= {e.rule for e in heard if not e.fired}, 60, "both to clear")
        assert not [k for k in live.alerts.active if k[1].startswith("gpu_")]
    finally:
        await live.stop()
