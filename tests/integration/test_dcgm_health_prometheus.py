"""gpu_xid and gpu_ecc from NVIDIA's DCGM exporter read through a real Prometheus (issue 37): Debian's
Prometheus scrapes an exporter page in DCGM's format (its families and label sets, the GPU line of
tests/fixtures/exporters' real sample) on loopback; a host with `read = "prometheus"` reads no Xid and no
ECC error while the page says none, then Xid 79 once the exporter's last-Xid value changes, and the
uncorrected ECC errors; the rules fire on them as on the SSH path's readings."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from aiohttp import web

from poolconsole.collect.prometheus.hosts import PrometheusHostPoller
from poolconsole.collect.prometheus.source import PrometheusAPI
from poolconsole.config.models import AlertSettings, Host, PrometheusSource
from poolconsole.model.alerts import Alerts
from poolconsole.model.hosts import GpuReading, HostSnapshot
from tests.helpers.prometheus import Prometheus, eventually, running_prometheus
from tests.helpers.rawhttp import free_port

LABELS = (
    'gpu="1",UUID="GPU-fc60126e-514d-3522-2828-c5daa8e99d85",pci_bus_id="00000000:B1:00.0",device="nvidia1",'
    'modelName="NVIDIA RTX 2000 Ada Generation",hostname="dcgm-exporter-wwwjh"'
)


class DcgmExporter:
    def __init__(self) -> None:
        self.port = free_port()
        self.xid = 0
        self.dbe = 0
        self._runner: web.AppRunner | None = None

    def page(self) -> str:
        families = [
            ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).", 11275),
            ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).", 4820),
            ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", 41),
            ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered.", self.xid),
            ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter", "Total number of double-bit volatile ECC errors.", self.dbe),
        ]
        return "".join(f"# HELP {n} {h}\n# TYPE {n} {t}\n{n}{{{LABELS}}} {v}\n" for n, t, h, v in families)

    async def _metrics(self, _: web.Request) -> web.Response:
        return web.Response(text=self.page(), content_type="text/plain")

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


@pytest.fixture
async def scraped(tmp_path: Path) -> AsyncIterator[tuple[DcgmExporter, Prometheus]]:
    exporter = DcgmExporter()
    await exporter.start()
    scrape = (
        f"  - job_name: dcgm\n    static_configs:\n      - targets: ['127.0.0.1:{exporter.port}']\n"
        "        labels: {instance: 'gpu-box:9400'}\n"
    )
    try:
        async with running_prometheus(tmp_path, scrape, "1s") as prom:

            async def up() -> bool:
                return bool(await prom.query('up{job="dcgm"} == 1'))

            await eventually(up, 60, "the exporter scraped")
            yield exporter, prom
    finally:
        await exporter.stop()


async def poll_until(poller: PrometheusHostPoller, done: Callable[[GpuReading], bool], what: str) -> HostSnapshot:
    deadline = time.monotonic() + 60
    while True:
        snap = await poller.poll()
        gpu = snap.gpus[0] if snap.gpus else None
        if gpu is not None and done(gpu):
            return snap
        assert time.monotonic() < deadline, f"{what}: last {snap.state} {snap.error} {snap.gpus}"
        await asyncio.sleep(0.5)


async def test_dcgm_xid_and_ecc_through_prometheus_fire_gpu_xid_and_gpu_ecc(
    scraped: tuple[DcgmExporter, Prometheus],
) -> None:
    exporter, prom = scraped
    poller = PrometheusHostPoller(
        Host(name="gpu-box", address="gpu-box", read="prometheus"), PrometheusAPI(PrometheusSource(url=prom.url))
    )
    alerts = Alerts(AlertSettings())
    try:
        quiet = await poll_until(poller, lambda g: g.xids is not None, "the Xid read")
        gpu = quiet.gpus[0]
        assert (gpu.index, gpu.xids, gpu.ecc_uncorrected) == (1, (), 0)
        assert not [e for e in alerts.host(quiet, time.time()) if e.rule.startswith(("gpu_xid", "gpu_ecc"))]

        exporter.xid, exporter.dbe = 79, 2
        fault = await poll_until(poller, lambda g: g.xids == (79,) and g.ecc_uncorrected == 2, "Xid 79 and ECC")
        fired = {(e.rule, e.fired) for e in alerts.host(fault, time.time())}
        assert {("gpu_xid_gpu1", True), ("gpu_ecc_gpu1", True)} <= fired, fired
    finally:
        await poller.aclose()
