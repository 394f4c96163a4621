"""Engines read through a real Prometheus (Debian's package) scraping replayed real captures of vLLM,
SGLang and llama.cpp on loopback, against the same engines polled directly: `status --json` agrees on
running, waiting and KV, tok/s matches the counters' true growth both ways; a counter reset reads as a
restart, never a negative rate; a target that goes down reads as stale with Prometheus' scrape error; and
`--prometheus URL` alone discovers the engines (and opens the console read-only)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from poolconsole import cli
from poolconsole.collect.prometheus.queries import scrape_time, selection
from poolconsole.collect.prometheus.source import (
    REUSE_S,
    Batch,
    PrometheusAPI,
    PrometheusEnginePoller,
)
from poolconsole.commands import launch
from poolconsole.config import PoolConfig, parse_config
from poolconsole.config.models import Engine, EngineKind, PrometheusSource
from poolconsole.model.pool_state import PoolState
from poolconsole.model.snapshots import EngineSnapshot
from poolconsole.model.view import engine_view
from tests.conftest import REAL
from tests.helpers.prometheus import Prometheus, eventually, running_prometheus
from tests.helpers.prometheus import status_json as status
from tests.helpers.rawhttp import RawHTTPServer, Reply

VLLM = REAL / "vllm-0.32.0-cpu"
LLAMACPP = REAL / "llamacpp-b1-0c1e570"
SGLANG = REAL / "issue-samples" / "sglang-metrics-v0.5.1-issue13485.txt"
RATE = 250.0
"""Generation tokens per second of wall time that every replayed engine's counter grows by: the truth."""
SCRAPE_S = 1.0
SGLANG_LABELS = 'engine_type="unified",model_name="Qwen-32B"'


def sglang_page() -> bytes:
    """The SGLang 0.5.1 capture's complete lines (the issue cut the page short), with the queue gauge and the
    generation counter in the capture's own label style."""
    kept = [
        line
        for line in SGLANG.read_text().splitlines()
        if line.startswith(("sglang:", "# HELP sglang:", "# TYPE sglang:")) and "[...]" not in line
    ]
    kept += [
        "# TYPE sglang:num_queue_reqs gauge",
        f'sglang:num_queue_reqs{{{SGLANG_LABELS},pp_rank="0",tp_rank="0"}} 3.0',
        "# TYPE sglang:generation_tokens_total counter",
        f"sglang:generation_tokens_total{{{SGLANG_LABELS}}} 1000.0",
    ]
    return ("\n".join(kept) + "\n").encode()


class ReplayedEngine(RawHTTPServer):
    """A real /metrics capture whose generation counter grows at RATE per second; `restart` sets it back
    to zero (as a restarted engine does), `kill` drops every connection and stops listening."""

    def __init__(self, kind: EngineKind, page: bytes, counter: bytes, routes: dict[str, Reply]) -> None:
        super().__init__(routes)
        self.kind = kind
        at = page.index(b"\n" + counter) + 1 + len(counter)  # the sample line, not its HELP
        self.head, self.tail = page[:at], page[page.index(b"\n", at) :]
        self.base = float(page[at : page.index(b"\n", at)])
        self.since = time.time()
        self.writers: set[asyncio.StreamWriter] = set()

    def counter(self) -> float:
        return self.base + RATE * (time.time() - self.since)

    def reply(self, path: str) -> Reply:
        if path == "/metrics":
            body = self.head + repr(self.counter()).encode() + self.tail
            return Reply(200, body, {"Content-Type": "text/plain; version=0.0.4"})
        return super().reply(path)

    def restart(self) -> None:
        self.base, self.since = 0.0, time.time()

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


def replayed() -> dict[str, ReplayedEngine]:
    sglang_models = Reply.json('{"object":"list","data":[{"id":"Qwen-32B","object":"model"}]}')
    return {
        "vllm": ReplayedEngine(
            EngineKind.VLLM,
            (VLLM / "metrics.load.txt").read_bytes(),
            b'vllm:generation_tokens_total{engine="0",model_name="tiny"} ',
            {"/v1/models": Reply.file(VLLM / "v1_models.json", "application/json")},
        ),
        "sglang": ReplayedEngine(
            EngineKind.SGLANG,
            sglang_page(),
            f"sglang:generation_tokens_total{{{SGLANG_LABELS}}} ".encode(),
            {"/v1/models": sglang_models},
        ),
        "llamacpp": ReplayedEngine(
            EngineKind.LLAMACPP,
            (LLAMACPP / "metrics-after-requests.txt").read_bytes(),
            b"llamacpp:tokens_predicted_total ",
            {
                "/v1/models": Reply.file(LLAMACPP / "v1-models.json", "application/json"),
                "/slots": Reply.file(LLAMACPP / "slots-after-requests.json", "application/json"),
            },
        ),
    }


@dataclass
class Pool:
    engines: dict[str, ReplayedEngine]
    prom: Prometheus
    directory: Path

    def config(self, read: str) -> str:
        text = f'[prometheus]\nurl = "{self.prom.url}"\n' if read == "prometheus" else ""
        for name, engine in self.engines.items():
            text += f'[[engines]]\nname = "{name}"\nkind = "{engine.kind}"\nurl = "{engine.url}"\nread = "{read}"\n'
        return text

    def config_file(self, read: str) -> Path:
        path = self.directory / f"{read}.toml"
        path.write_text(self.config(read))
        return path


async def scraped(prom: Prometheus, count: int) -> bool:
    """Every target is up and Prometheus holds `count` scrapes of each."""
    got = await prom.query("count_over_time(up[1m]) and on (instance) (up == 1)")
    return len(got) == 3 and all(float(r["value"][1]) >= count for r in got)


@pytest.fixture
async def pool(tmp_path: Path) -> AsyncIterator[Pool]:
    engines = replayed()
    for engine in engines.values():
        await engine.start()
    jobs = "".join(
        f"  - job_name: {name}\n    static_configs: [{{targets: ['127.0.0.1:{engine.port}']}}]\n"
        for name, engine in engines.items()
    )
    try:
        async with running_prometheus(tmp_path, jobs, f"{SCRAPE_S:g}s") as prom:
            await eventually(lambda: scraped(prom, 3), 60, "three scrapes of every replayed engine")
            yield Pool(engines, prom, tmp_path)
    finally:
        for engine in engines.values():
            await engine.kill()


def by_name(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in doc["engines"]}


async def test_status_through_prometheus_equals_status_direct(pool: Pool) -> None:
    # samples 4, 1.5 s apart: the Prometheus reading spans at least two 1 s scrapes
    direct, through = await asyncio.gather(
        status("--config", str(pool.config_file("direct")), "--samples", "4", "--interval", "1.5"),
        status("--config", str(pool.config_file("prometheus")), "--samples", "4", "--interval", "1.5"),
    )
    d, p = by_name(direct), by_name(through)
    assert set(d) == set(p) == {"vllm", "sglang", "llamacpp"}
    for name in d:
        assert d[name]["state"] == p[name]["state"] == "ok", (d[name]["error"], p[name]["error"])
        assert p[name]["source"].startswith("prometheus 127.0.0.1:"), p[name]["source"]
        assert d[name]["source"].startswith("GET /metrics")
        assert p[name]["details"]["read_from"] == "prometheus"
        assert 0 <= p[name]["details"]["sample_age_s"] <= 3 * SCRAPE_S
        for field in ("requests_running", "requests_waiting"):
            assert p[name][field] == d[name][field] is not None, (name, field)
        # both read the counter's growth: RATE tok/s, to within the timing of a scrape
        for doc in (d, p):
            rate = doc[name]["generation_tokens_per_s"]
            assert rate is not None and abs(rate - RATE) <= 0.05 * RATE, (name, rate, doc is p)
        assert abs(p[name]["generation_tokens_per_s"] - d[name]["generation_tokens_per_s"]) <= 0.05 * RATE
        assert p[name]["counter_resets"] == d[name]["counter_resets"] == 0
    for name in ("vllm", "sglang"):
        assert p[name]["kv_cache_usage"] == d[name]["kv_cache_usage"] is not None, name
    assert (p["vllm"]["requests_running"], p["sglang"]["requests_waiting"]) == (8.0, 3.0)
    # llama.cpp has no KV metric: the direct poll estimates it from /slots, which Prometheus never sees
    assert d["llamacpp"]["kv_cache_usage"] is not None
    assert p["llamacpp"]["kv_cache_usage"] is None
    assert "/slots" in p["llamacpp"]["unknown"]["kv_cache_usage"]
    # and the same families underneath: prefix-cache hits from llama.cpp's cached-token counter
    assert p["llamacpp"]["prefix_cache_hit_rate"] == d["llamacpp"]["prefix_cache_hit_rate"] is not None


def poller(pool: Pool, name: str) -> PrometheusEnginePoller:
    engine = pool.engines[name]
    api = PrometheusAPI(PrometheusSource(url=pool.prom.url))
    return PrometheusEnginePoller(Engine(name=name, kind=engine.kind, url=engine.url, read="prometheus"), api)


async def next_scrape(reader: PrometheusEnginePoller, after: EngineSnapshot | None) -> EngineSnapshot:
    """The first poll that reads a scrape newer than `after`'s."""
    deadline = time.monotonic() + 30
    while True:
        snap = await reader.poll()
        if snap.metrics is not None and (after is None or snap.monotonic > after.monotonic):
            return snap
        assert time.monotonic() < deadline, f"no new scrape: {snap.error}"
        await asyncio.sleep(0.2)


async def test_a_counter_reset_is_a_restart_not_a_negative_rate(pool: Pool) -> None:
    reader = poller(pool, "llamacpp")  # no process start time on its page: only the counters tell
    config = parse_config(pool.config("prometheus"))
    state = PoolState(config)
    try:
        first = await next_scrape(reader, None)
        while (again := await reader.poll()).monotonic != first.monotonic:
            first = again  # until two polls fall between the same two scrapes
        applied = state.apply_engine(first)
        assert state.apply_engine(again) is applied  # the same sample again changes nothing
        before = first.metrics.get("generation_tokens_total") if first.metrics else None
        pool.engines["llamacpp"].restart()
        after = await next_scrape(reader, first)
        while after.metrics is not None and (after.metrics.get("generation_tokens_total") or 0) >= (before or 0):
            after = await next_scrape(reader, after)  # a scrape from before the restart, still
        view = engine_view([first, after])
        assert view.counter_resets == 1
        assert view.generation_tokens_per_s is not None and view.generation_tokens_per_s >= 0
        live = state.apply_engine(after)
        assert live.counter_resets == 1 and live.generation_tokens_per_s is not None
        assert live.generation_tokens_per_s >= 0
        assert state.engines["llamacpp"].history.restarts
    finally:
        await reader.aclose()


async def test_a_target_that_goes_down_is_stale_with_the_reason(pool: Pool) -> None:
    reader = poller(pool, "sglang")
    try:
        ok = await next_scrape(reader, None)
        assert ok.state == "ok"
        await pool.engines["sglang"].kill()
        deadline = time.monotonic() + 30
        while (snap := await reader.poll()).state == "ok":
            assert time.monotonic() < deadline, "Prometheus never marked the target down"
            await asyncio.sleep(0.3)
        assert snap.state == "down"
        assert snap.error is not None and "stale in Prometheus" in snap.error and "up == 0" in snap.error
        assert "connection refused" in snap.error, snap.error  # Prometheus' own scrape error
        view = engine_view([ok, snap])
        assert view.requests_running is None and "up == 0" in view.unknown["requests_running"]
        assert view.last_ok_at == ok.fetched_at and view.polled_at is not None and view.polled_at > ok.fetched_at
    finally:
        await reader.aclose()


async def test_prometheus_alone_discovers_the_replayed_engines(pool: Pool, monkeypatch: pytest.MonkeyPatch) -> None:
    doc = await status("--prometheus", pool.prom.url, "--samples", "2", "--interval", "1.5")
    found = {e["kind"]: e for e in doc["engines"]}
    assert set(found) == {"vllm", "sglang", "llamacpp"}
    for kind, engine in pool.engines.items():
        assert found[kind]["name"] == f"127.0.0.1-{engine.port}"
        assert found[kind]["state"] == "ok", found[kind]["error"]
        assert found[kind]["source"].startswith("prometheus ")
    assert (found["vllm"]["requests_running"], found["sglang"]["requests_waiting"]) == (8.0, 3.0)

    opened: list[tuple[PoolConfig, bool]] = []

    def console(config: PoolConfig, read_only: bool, subtitle: str, *args: Any, **kwargs: Any) -> int:
        opened.append((config, read_only))
        return 0

    monkeypatch.setattr(launch, "open_console", console)
    assert await asyncio.to_thread(cli.main, ["--prometheus", pool.prom.url]) == 0
    [(config, read_only)] = opened
    assert read_only
    assert {e.kind.value for e in config.engines} == {"vllm", "sglang", "llamacpp"}
    assert all(e.read == "prometheus" and e.control is None for e in config.engines)


def several(pool: Pool) -> list[Engine]:
    """The three replayed engines by instance, the vLLM one again by a selector, an engine Prometheus does not
    scrape, and one whose selector Prometheus refuses (an RE2 parse error): one batch, three queries."""
    by_instance = [Engine(name=n, kind=e.kind, url=e.url, read="prometheus") for n, e in pool.engines.items()]
    url = pool.engines["vllm"].url
    return [
        *by_instance,
        Engine(name="vllm-by-job", kind=EngineKind.VLLM, url=url, read="prometheus", selector='{job="vllm"}'),
        Engine(name="absent", kind=EngineKind.SGLANG, url="http://127.0.0.1:9", read="prometheus"),
        Engine(name="bad-regex", kind=EngineKind.VLLM, url=url, read="prometheus", selector='{job=~"("}'),
    ]


async def one_by_one(reader: PrometheusEnginePoller) -> EngineSnapshot:
    """The engine read as before batching: its own two instant queries."""
    engine, api = reader.engine, reader.api
    values, stamps = await asyncio.gather(api.query(selection(engine)), api.query(scrape_time(engine)))
    return await reader._snapshot(values, stamps, Batch(api, {}))


def comparable(view: dict[str, Any]) -> dict[str, Any]:
    """A view's JSON without what the time of the query moves (latency, the sample's age, and the poll's
    time when no scrape dated it), floats rounded."""
    if "scraped_at" not in view["details"]:
        view = {k: v for k, v in view.items() if k != "polled_at"}

    def rounded(value: Any) -> Any:
        if isinstance(value, float):
            return round(value, 4)
        if isinstance(value, dict):
            return {k: rounded(v) for k, v in value.items() if k not in ("latency_ms", "sample_age_s")}
        if isinstance(value, list):
            return [rounded(v) for v in value]
        return value

    return dict(rounded(view))


async def test_one_batch_reads_every_engine_as_its_own_queries_did(pool: Pool) -> None:
    api = PrometheusAPI(PrometheusSource(url=pool.prom.url))
    readers = [PrometheusEnginePoller(engine, api) for engine in several(pool)]
    try:
        rounds: list[tuple[list[EngineSnapshot], list[EngineSnapshot]]] = []
        deadline = time.monotonic() + 30
        while len(rounds) < 2:
            assert time.monotonic() < deadline, "the batch and the per-engine queries never agreed on the scrapes read"
            sent = api.engine_reads.queries
            batched = list(await asyncio.gather(*(r.poll() for r in readers)))
            assert api.engine_reads.queries - sent == 3  # by instance; each selector on its own (12 before)
            alone = list(await asyncio.gather(*(one_by_one(r) for r in readers)))
            if [b.extra.get("scraped_at") for b in batched] == [a.extra.get("scraped_at") for a in alone]:
                rounds.append((batched, alone))  # both read the same scrape of every target
                await asyncio.sleep(1.2 * SCRAPE_S)
            else:
                await asyncio.sleep(max(2 * REUSE_S, api.reuse_s))  # a new batch, not the reading just taken
        for i, reader in enumerate(readers):
            batched_view = engine_view([rounds[0][0][i], rounds[1][0][i]]).to_json()
            alone_view = engine_view([rounds[0][1][i], rounds[1][1][i]]).to_json()
            assert comparable(batched_view) == comparable(alone_view), reader.engine.name
        states = {r.engine.name: (v.state, v.error) for r, v in zip(readers, rounds[1][0], strict=True)}
        for name in ("vllm", "sglang", "llamacpp", "vllm-by-job"):
            assert states[name] == ("ok", None), states[name]
        views = {r.engine.name: engine_view([rounds[0][0][i], rounds[1][0][i]]) for i, r in enumerate(readers)}
        assert views["vllm-by-job"].requests_running == views["vllm"].requests_running == 8.0
        assert (views["vllm"].generation_tokens_per_s or 0) > 0.5 * RATE
        assert states["absent"][0] == "down" and "no series in Prometheus" in (states["absent"][1] or "")
        assert states["bad-regex"][0] == "degraded" and (states["bad-regex"][1] or "").startswith("query error: ")
    finally:
        for reader in readers:
            await reader.aclose()


async def test_in_one_batch_each_engine_keeps_its_own_reason(pool: Pool) -> None:
    api = PrometheusAPI(PrometheusSource(url=pool.prom.url))
    readers = {e.name: PrometheusEnginePoller(e, api) for e in several(pool)}
    try:
        await pool.engines["sglang"].kill()
        deadline = time.monotonic() + 30
        while True:
            snaps = dict(zip(readers, await asyncio.gather(*(r.poll() for r in readers.values())), strict=True))
            if snaps["sglang"].state != "ok":
                break
            assert time.monotonic() < deadline, "Prometheus never marked the target down"
            await asyncio.sleep(0.3)
        stale = snaps["sglang"]
        assert stale.state == "down" and stale.error is not None
        assert "stale in Prometheus" in stale.error and "connection refused" in stale.error, stale.error
        for name in ("vllm", "llamacpp", "vllm-by-job"):  # the same batch: the others read as ever
            assert snaps[name].state == "ok" and snaps[name].metrics is not None, (name, snaps[name].error)
        assert snaps["absent"].state == "down" and "no series in Prometheus for {instance=" in (
            snaps["absent"].error or ""
        )
        refused = snaps["bad-regex"]
        assert refused.state == "degraded" and refused.error is not None and refused.error.startswith("query error: ")
        assert "error parsing regexp" in refused.error, refused.error  # Prometheus' own words
        assert refused.missing["requests_running"] == refused.error
    finally:
        for reader in readers.values():
            await reader.aclose()
