"""Host rows read through a real Prometheus (Debian's package) scraping replayed exporter pages on loopback
(tests/fixtures/exporters/README.md says where each page comes from): node_exporter, NVIDIA's DCGM exporter
and nvidia_gpu_exporter, each target given the instance label it would have on its host (dgx-a:9100, ...).
`status --json` on `[[hosts]]` with `read = "prometheus"` gives the pages' own memory and per-GPU figures;
a GB10 whose GPU exporter reports no memory keeps the unified reading (MemTotal - MemAvailable); a stopped
exporter reads as stale with Prometheus' scrape error, never as 0; an unknown host and a refused query
keep their reasons; and `--prometheus URL` alone discovers the hosts, grouped by instance host."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from poolconsole.collect.prometheus.batch import REUSE_S
from poolconsole.collect.prometheus.host_queries import host_scrape_times, host_selection, recent_exporters
from poolconsole.collect.prometheus.hosts import PrometheusHostPoller, host_reads
from poolconsole.collect.prometheus.source import PrometheusAPI
from poolconsole.config import load_config
from poolconsole.config.models import Host, PrometheusSource
from poolconsole.model.hosts import HostSnapshot, HostState
from poolconsole.runtime.live import LivePool
from tests.helpers.exporter_pages import (
    DCGM_PAGE,
    GB10,
    MIB,
    RTX4080,
    gb10_node_page,
    node_page,
    nvidia_smi_page,
    page_value,
    query_gpu,
)
from tests.helpers.prometheus import Prometheus, eventually, running_prometheus
from tests.helpers.prometheus import status_json as status
from tests.helpers.rawhttp import RawHTTPServer, Reply


class Exporter(RawHTTPServer):
    """One replayed exporter: its page at /metrics; `kill` drops every connection and stops listening."""

    def __init__(self, job: str, instance: str, page: bytes) -> None:
        super().__init__({"/metrics": Reply(200, page, {"Content-Type": "text/plain; version=0.0.4"})})
        self.job, self.instance, self.page = job, instance, page
        self.writers: set[asyncio.StreamWriter] = set()

    async def kill(self) -> None:
        for writer in list(self.writers):
            writer.close()
        await self.stop()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.writers.add(writer)
        try:
            await super()._handle(reader, writer)
        finally:
            self.writers.discard(writer)


def exporters() -> dict[str, Exporter]:
    node = node_page()
    return {
        "dgx-a node": Exporter("node", "dgx-a:9100", node),
        "dgx-a dcgm": Exporter("dcgm", "dgx-a:9400", DCGM_PAGE.read_bytes()),
        "rtx-b node": Exporter("node", "rtx-b:9100", node),
        "rtx-b smi": Exporter("nvidia_gpu", "rtx-b:9835", nvidia_smi_page(query_gpu(RTX4080))),
        "spark node": Exporter("node", "spark:9100", gb10_node_page()),
        "spark smi": Exporter("nvidia_gpu", "spark:9835", nvidia_smi_page(query_gpu(GB10), name="NVIDIA GB10")),
    }


@dataclass
class Pool:
    exporters: dict[str, Exporter]
    prom: Prometheus
    directory: Path

    def config_file(self) -> Path:
        text = f'[prometheus]\nurl = "{self.prom.url}"\n'
        for host in ("dgx-a", "rtx-b", "spark"):
            # SSH settings stay (they serve the host's actions); the telemetry comes from Prometheus
            text += f'[[hosts]]\nname = "{host}"\naddress = "{host}"\nuser = "ops"\nport = 2222\nread = "prometheus"\n'
        path = self.directory / "hosts.toml"
        path.write_text(text)
        return path

    def page(self, key: str) -> bytes:
        return self.exporters[key].page


@pytest.fixture
async def pool(tmp_path: Path) -> AsyncIterator[Pool]:
    servers = exporters()
    for server in servers.values():
        await server.start()
    jobs: dict[str, list[Exporter]] = {}
    for server in servers.values():
        jobs.setdefault(server.job, []).append(server)
    scrape = "".join(
        f"  - job_name: {job}\n    static_configs:\n"
        + "".join(
            f"      - targets: ['127.0.0.1:{s.port}']\n        labels: {{instance: '{s.instance}'}}\n" for s in members
        )
        for job, members in jobs.items()
    )

    async def all_up() -> bool:
        got = await prom.query("count_over_time(up[1m]) and (up == 1)")
        return len(got) == len(servers) and all(float(r["value"][1]) >= 2 for r in got)

    try:
        async with running_prometheus(tmp_path, scrape, "1s") as prom:
            await eventually(all_up, 60, "two scrapes of every replayed exporter")
            yield Pool(servers, prom, tmp_path)
    finally:
        for server in servers.values():
            await server.kill()


def check_memory(host: dict[str, Any], page: bytes) -> None:
    """System memory and swap are the node_exporter page's own figures."""
    memory = host["system_memory"]
    assert memory["total_bytes"] == page_value(page, "node_memory_MemTotal_bytes")
    assert memory["available_bytes"] == page_value(page, "node_memory_MemAvailable_bytes")
    swap_total = page_value(page, "node_memory_SwapTotal_bytes")
    assert memory["swap_total_bytes"] == swap_total
    assert memory["swap_used_bytes"] == swap_total - page_value(page, "node_memory_SwapFree_bytes")


async def test_host_rows_through_prometheus_are_the_pages_figures(pool: Pool) -> None:
    doc = await status("--config", str(pool.config_file()))
    hosts = {h["name"]: h for h in doc["hosts"]}
    assert set(hosts) == {"dgx-a", "rtx-b", "spark"}
    for name, host in hosts.items():
        assert host["state"] == "ok", (name, host["error"])
        assert host["source"].startswith("prometheus 127.0.0.1:"), host["source"]
        assert host["address"] == name
    for name in ("dgx-a", "rtx-b", "spark"):
        check_memory(hosts[name], pool.page(f"{name} node"))

    # DCGM exporter: the `gpu` label is the index; MiB -> bytes; the MIG instance has no GPU_UTIL: unknown
    dcgm = pool.page("dgx-a dcgm")
    dgx = hosts["dgx-a"]
    assert dgx["memory_kind"] == "dedicated"
    assert [g["index"] for g in dgx["gpus"]] == [1, 2]
    for gpu, label in zip(dgx["gpus"], ('gpu="1"', 'gpu="2"'), strict=True):
        used = page_value(dcgm, "DCGM_FI_DEV_FB_USED", label) * MIB
        free = page_value(dcgm, "DCGM_FI_DEV_FB_FREE", label) * MIB
        assert (gpu["memory_used_bytes"], gpu["memory_free_bytes"]) == (used, free)
        assert gpu["memory_total_bytes"] == used + free
        assert gpu["temperature_c"] == page_value(dcgm, "DCGM_FI_DEV_GPU_TEMP", label)
        assert gpu["power_w"] == page_value(dcgm, "DCGM_FI_DEV_POWER_USAGE", label)
        assert gpu["memory_source"] == "device"
    assert dgx["gpus"][0]["utilization_pct"] == page_value(dcgm, "DCGM_FI_DEV_GPU_UTIL", 'gpu="1"')
    assert dgx["gpus"][0]["name"] == "NVIDIA RTX 2000 Ada Generation"
    assert dgx["gpus"][0]["uuid"] == "GPU-fc60126e-514d-3522-2828-c5daa8e99d85"
    assert dgx["gpus"][1]["utilization_pct"] is None  # not exported for the MIG instance: n/a, never 0

    # nvidia_gpu_exporter on the RTX 4080 SUPER: the figures of the real nvidia-smi capture it exports
    csv = query_gpu(RTX4080)
    [gpu] = hosts["rtx-b"]["gpus"]
    assert hosts["rtx-b"]["memory_kind"] == "dedicated"
    assert (gpu["index"], gpu["name"]) == (0, "NVIDIA GeForce RTX 4080 SUPER")
    assert gpu["uuid"] == csv.row["uuid"]
    assert gpu["memory_used_bytes"] == csv.number("memory.used") * MIB == 1474 * MIB  # type: ignore[operator]
    assert gpu["memory_total_bytes"] == csv.number("memory.total") * MIB == 16376 * MIB  # type: ignore[operator]
    assert gpu["memory_free_bytes"] == csv.number("memory.free") * MIB  # type: ignore[operator]
    assert gpu["utilization_pct"] == csv.number("utilization.gpu") == 7
    assert gpu["power_w"] == csv.number("power.draw") == 84.24
    assert gpu["temperature_c"] == csv.number("temperature.gpu") == 46
    assert gpu["power_limit_w"] == csv.number("power.limit")
    assert hosts["rtx-b"]["driver"] == "595.71.05"

    # GB10: the exporter drops nvidia-smi's [N/A] memory, so the GPU's memory is the system's
    spark = hosts["spark"]
    node = pool.page("spark node")
    total = page_value(node, "node_memory_MemTotal_bytes")
    available = page_value(node, "node_memory_MemAvailable_bytes")
    assert spark["memory_kind"] == "unified"
    [gb10] = spark["gpus"]
    assert gb10["memory_source"] == "system"
    assert gb10["memory_total_bytes"] == total == 127600748 * 1024
    assert gb10["memory_used_bytes"] == total - available == (127600748 - 118566368) * 1024
    assert (gb10["utilization_pct"], gb10["power_w"], gb10["temperature_c"]) == (0, 11.17, 35)
    assert any("swap in use on a unified-memory host" in n for n in spark["notes"])


def reader(pool: Pool, name: str, **host: Any) -> PrometheusHostPoller:
    api = PrometheusAPI(PrometheusSource(url=pool.prom.url))
    return PrometheusHostPoller(Host(name=name, address=name, read="prometheus", **host), api)


async def until(poller: PrometheusHostPoller, done: Any, what: str) -> HostSnapshot:
    deadline = time.monotonic() + 30
    while not done(snap := await poller.poll()):
        assert time.monotonic() < deadline, f"{what}: last {snap.state} {snap.error}"
        await asyncio.sleep(0.3)
    return snap


async def test_a_stopped_exporter_reads_stale_with_the_reason(pool: Pool) -> None:
    host = reader(pool, "dgx-a")
    try:
        ok = await host.poll()
        assert ok.state is HostState.OK and len(ok.gpus) == 2, ok.error
        await pool.exporters["dgx-a dcgm"].kill()
        snap = await until(host, lambda s: s.state is not HostState.OK, "the DCGM exporter marked down")
        assert snap.state is HostState.DEGRADED
        assert snap.error is not None
        assert "DCGM exporter (dcgm dgx-a:9400) stale in Prometheus" in snap.error and "up == 0" in snap.error
        assert "connection refused" in snap.error, snap.error  # Prometheus' own scrape error
        assert snap.gpus == ()  # no GPU figures at all, rather than zeros
        assert snap.system_memory == ok.system_memory  # node_exporter still answers
        await pool.exporters["dgx-a node"].kill()
        gone = await until(host, lambda s: s.state is not HostState.DEGRADED, "node_exporter marked down")
        assert gone.state is HostState.UNREACHABLE and gone.system_memory is None and gone.gpus == ()
        assert gone.error is not None and "node_exporter (node dgx-a:9100) stale" in gone.error
        assert "DCGM exporter (dcgm dgx-a:9400) stale" in gone.error
    finally:
        await host.aclose()


async def test_unknown_keeps_its_reason(pool: Pool) -> None:
    nowhere = reader(pool, "nowhere")
    refused = reader(pool, "rtx-b", selector='{instance=~"rtx-b:(98"}')  # RE2 rejects it, Prometheus says so
    try:
        snap = await nowhere.poll()
        assert snap.state is HostState.UNREACHABLE and snap.gpus == () and snap.system_memory is None
        assert snap.error is not None and "no node_exporter, DCGM exporter or nvidia_gpu_exporter series" in snap.error
        bad = await refused.poll()
        assert bad.state is HostState.DEGRADED and bad.system_memory is None
        assert bad.error is not None and bad.error.startswith("query error: bad_data"), bad.error
    finally:
        await nowhere.aclose()
        await refused.aclose()


async def test_prometheus_alone_discovers_the_hosts(pool: Pool) -> None:
    doc = await status("--prometheus", pool.prom.url)
    hosts = {h["name"]: h for h in doc["hosts"]}
    assert set(hosts) == {"dgx-a", "rtx-b", "spark"}  # grouped by instance host: two exporters each
    assert all(h["state"] == "ok" and h["source"].startswith("prometheus ") for h in hosts.values())
    assert [g["index"] for g in hosts["dgx-a"]["gpus"]] == [1, 2]
    assert hosts["spark"]["memory_kind"] == "unified"
    check_memory(hosts["rtx-b"], pool.page("rtx-b node"))


async def test_the_runtime_reads_telemetry_from_prometheus_and_keeps_ssh_for_actions(pool: Pool) -> None:
    live = LivePool(load_config(pool.config_file()))
    live.start(settle_gc=False)

    async def all_read() -> bool:
        return all(t.snapshot is not None for t in live.state.hosts.values())

    try:
        await eventually(all_read, 20, "a poll of every host")
        assert live.ssh is not None
        connections = live.ssh.connections
        assert set(connections) == {"dgx-a", "rtx-b", "spark"}  # SSH stays there for the hosts' actions
        assert all(c.host.port == 2222 and c.host.user == "ops" for c in connections.values())
    finally:
        await live.stop()
    snaps = {name: t.snapshot for name, t in live.state.hosts.items()}
    assert all(s is not None and s.state is HostState.OK for s in snaps.values()), snaps
    spark = snaps["spark"]
    assert spark is not None and spark.source is not None and spark.source.startswith("prometheus ")
    assert spark.memory_kind == "unified" and spark.gpus[0].memory_source == "system"


def several_hosts() -> list[Host]:
    """The three replayed hosts by address, rtx-b again by a selector, a host Prometheus has no series of, and
    one whose selector Prometheus refuses (an RE2 parse error): one batch, three queries (18 one by one)."""
    return [
        *(Host(name=n, address=n, read="prometheus") for n in ("dgx-a", "rtx-b", "spark")),
        Host(
            name="rtx-b-by-job",
            address="rtx-b",
            read="prometheus",
            selector='{job=~"node|nvidia_gpu", instance=~"rtx-b:.*"}',
        ),
        Host(name="nowhere", address="nowhere", read="prometheus"),
        Host(name="bad-regex", address="rtx-b", read="prometheus", selector='{instance=~"rtx-b:(98"}'),
    ]


async def host_one_by_one(reader: PrometheusHostPoller) -> HostSnapshot:
    """The host read as before batching: its own three instant queries."""
    api, host = reader.api, reader.host
    answers = await asyncio.gather(
        api.query(host_selection(host)), api.query(host_scrape_times(host)), api.query(recent_exporters(host))
    )
    return await reader._snapshot(*answers)


def same_reading(snap: HostSnapshot) -> HostSnapshot:
    """The snapshot without what the time of the query moves: the round trip, the poll's time, the sample's age."""
    notes = tuple(n for n in snap.notes if not n.startswith("sample age "))
    return replace(snap, rtt_ms=None, fetched_at=0.0, notes=notes)


async def test_one_batch_reads_every_host_as_its_own_queries_did(pool: Pool) -> None:
    api = PrometheusAPI(PrometheusSource(url=pool.prom.url))
    readers = [PrometheusHostPoller(host, api) for host in several_hosts()]
    try:
        reads = host_reads(api)
        sent = reads.queries
        batched = list(await asyncio.gather(*(r.poll() for r in readers)))
        assert reads.queries - sent == 3  # by address; each selector on its own (18 one by one)
        alone = list(await asyncio.gather(*(host_one_by_one(r) for r in readers)))
        assert reads.queries - sent == 3
        for reader, one, own in zip(readers, batched, alone, strict=True):
            assert same_reading(one) == same_reading(own), reader.host.name
        snaps = {r.host.name: s for r, s in zip(readers, batched, strict=True)}
        for name in ("dgx-a", "rtx-b", "spark", "rtx-b-by-job"):
            assert snaps[name].state is HostState.OK, (name, snaps[name].error)
            assert any(n.startswith("sample age ") for n in snaps[name].notes)
        assert [g.index for g in snaps["dgx-a"].gpus] == [1, 2]
        assert snaps["rtx-b-by-job"].gpus == snaps["rtx-b"].gpus and len(snaps["rtx-b"].gpus) == 1
        spark = snaps["spark"]  # unified: the GPU's memory is MemTotal - MemAvailable
        node = pool.page("spark node")
        total = page_value(node, "node_memory_MemTotal_bytes")
        assert spark.memory_kind == "unified" and spark.gpus[0].memory_total_bytes == total
        assert spark.gpus[0].memory_used_bytes == total - page_value(node, "node_memory_MemAvailable_bytes")
        assert snaps["nowhere"].state is HostState.UNREACHABLE and "no node_exporter, DCGM exporter" in (
            snaps["nowhere"].error or ""
        )
        refused = snaps["bad-regex"]
        assert refused.state is HostState.DEGRADED and (refused.error or "").startswith("query error: bad_data")
    finally:
        for reader in readers:
            await reader.aclose()


async def test_in_one_batch_a_stopped_exporter_gives_only_its_host_its_reason(pool: Pool) -> None:
    api = PrometheusAPI(PrometheusSource(url=pool.prom.url))
    readers = {h.name: PrometheusHostPoller(h, api) for h in several_hosts()}
    reads = host_reads(api)
    try:
        first = dict(zip(readers, await asyncio.gather(*(r.poll() for r in readers.values())), strict=True))
        assert first["rtx-b"].state is HostState.OK, first["rtx-b"].error
        await pool.exporters["rtx-b smi"].kill()
        deadline = time.monotonic() + 30
        while True:
            await asyncio.sleep(max(2 * REUSE_S, api.reuse_s))  # a new batch, not the reading just taken
            sent = reads.queries
            snaps = dict(zip(readers, await asyncio.gather(*(r.poll() for r in readers.values())), strict=True))
            assert reads.queries - sent == 3  # still one batch
            if snaps["rtx-b"].state is not HostState.OK:
                break
            assert time.monotonic() < deadline, "Prometheus never marked the exporter down"
        for name in ("rtx-b", "rtx-b-by-job"):  # both read that exporter: each says so, node_exporter still read
            stale = snaps[name]
            assert stale.state is HostState.DEGRADED and stale.error is not None, name
            assert "nvidia_gpu_exporter (nvidia_gpu rtx-b:9835) stale in Prometheus" in stale.error, stale.error
            assert "connection refused" in stale.error, stale.error  # Prometheus' own scrape error
            assert stale.gpus == () and stale.system_memory == first[name].system_memory
        for name in ("dgx-a", "spark"):  # the same batch: the others read as ever
            assert snaps[name].state is HostState.OK and snaps[name].error is None, (name, snaps[name].error)
            assert snaps[name].gpus == first[name].gpus and snaps[name].gpus
        assert snaps["nowhere"].state is HostState.UNREACHABLE and "no node_exporter" in (snaps["nowhere"].error or "")
        assert (snaps["bad-regex"].error or "").startswith("query error: bad_data")
    finally:
        for reader in readers.values():
            await reader.aclose()


async def test_a_host_behind_an_aggregating_exporter_is_told_by_its_series_scrape_time(tmp_path: Path) -> None:
    """A host whose node_exporter series come through another exporter (`honor_labels`: no `up` of its own)
    has a scrape time all the same, its series': the batch holds its reading and, between two scrapes, asks
    only for the scrape times."""
    lines = [f'node_memory_{f}_bytes{{instance="agg:9100",job="node"}} {v}' for f, v in (
        ("MemTotal", 64e9), ("MemAvailable", 32e9), ("SwapTotal", 0), ("SwapFree", 0))]  # fmt: skip
    server = Exporter("aggregate", "aggregator", ("\n".join(lines) + "\n").encode())
    await server.start()
    scrape = "  - job_name: aggregate\n    honor_labels: true\n    static_configs:\n"
    scrape += f"      - targets: ['127.0.0.1:{server.port}']\n"
    try:
        async with running_prometheus(tmp_path, scrape, "10s") as prom:

            async def scraped() -> bool:
                return bool(await prom.query('node_memory_MemTotal_bytes{instance="agg:9100"}'))

            await eventually(scraped, 60, "a scrape of the aggregating exporter")
            api = PrometheusAPI(PrometheusSource(url=prom.url))
            host = Host(name="agg", address="agg", read="prometheus")
            times = await api.query(host_scrape_times(host))
            assert times.ok and [s.labels for s in times.series] == [{"instance": "agg:9100", "job": "node"}]
            assert abs(times.series[0].value - time.time()) < 30
            assert not await prom.query('up{instance="agg:9100"}')  # no `up` of its own
            reader = PrometheusHostPoller(host, api)
            try:
                reads = host_reads(api)
                first = await reader.poll()
                assert first.state is HostState.OK and first.fetched_at == pytest.approx(
                    times.series[0].value, abs=0.01
                )
                sent = reads.queries
                await asyncio.sleep(max(2 * REUSE_S, api.reuse_s))  # a new batch, not the reading just taken
                again = await reader.poll()  # within the same scrape (every 10 s): its scrape time alone
                assert reads.queries - sent == 1 and again.fetched_at == first.fetched_at
                assert again.system_memory is first.system_memory
            finally:
                await reader.aclose()
    finally:
        await server.kill()
