"""A poll between two scrapes reads the same samples again: the engine's snapshot is the last one with new
stamps (its latency and the sample's age), the mapping is not run again; a new scrape, or the same scrape
time with another value, is mapped afresh (issue 39: the repeats were most of the mapping's CPU at 1,000
engines read through Prometheus)."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from types import MappingProxyType
from typing import Any

import pytest

from poolconsole.collect.engines import mapping
from poolconsole.collect.prometheus import batch as batch_module
from poolconsole.collect.prometheus import layout as layout_module
from poolconsole.collect.prometheus.api import Answer, Series
from poolconsole.collect.prometheus.hosts import PrometheusHostPoller
from poolconsole.collect.prometheus.queries import SCRAPE_OF
from poolconsole.collect.prometheus.source import PrometheusAPI, PrometheusEnginePoller
from poolconsole.config import parse_config
from poolconsole.model.snapshots import EngineState

CONFIG = (
    '[prometheus]\nurl = "http://127.0.0.1:9"\n'
    '[[engines]]\nname = "qwen"\nkind = "vllm"\nurl = "http://127.0.0.1:8000"\nread = "prometheus"\n'
)
LABELS = {"instance": "127.0.0.1:8000", "job": "vllm", "model_name": "tiny"}


def answers(at: float, tokens: float) -> tuple[Answer, Answer]:
    values = [
        Series.of({"__name__": "up", **LABELS}, 1.0, at + 1),
        Series.of({"__name__": "vllm:num_requests_running", **LABELS}, 3.0, at + 1),
        Series.of({"__name__": "vllm:kv_cache_usage_perc", **LABELS}, 0.25, at + 1),
        Series.of({"__name__": "vllm:generation_tokens_total", **LABELS}, tokens, at + 1),
    ]
    return Answer(tuple(values), elapsed_s=0.01), Answer((Series.of({}, at, at + 1),), elapsed_s=0.02)


def counted(monkeypatch: pytest.MonkeyPatch, module: object, name: str, real: Any) -> list[int]:
    """`module.name` replaced by `real` counting its calls: the list grows by one a call."""
    calls: list[int] = []

    def counting(*args: Any) -> Any:
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(module, name, counting)
    return calls


def one_poller() -> PrometheusEnginePoller:
    config = parse_config(CONFIG)
    return PrometheusEnginePoller(config.engines[0], PrometheusAPI(config.prometheus))  # type: ignore[arg-type]


async def test_a_repeated_scrape_is_not_mapped_again(monkeypatch: pytest.MonkeyPatch) -> None:
    mapped = counted(monkeypatch, mapping.Plan, "apply", mapping.Plan.apply)
    poller = one_poller()
    batch: Any = None  # only a stale target (up == 0) asks the batch for its scrape error
    try:
        at = 1_000_000.0
        first = await poller._snapshot(*answers(at, 100.0), batch)
        again = await poller._snapshot(*answers(at, 100.0), batch)
        assert first.state is EngineState.OK and first.metrics is not None
        assert len(mapped) == 1
        assert again.metrics is first.metrics and again.monotonic == first.monotonic
        assert again.latency_s == 0.02 and again.extra["scraped_at"] == at
        empty: MappingProxyType[str, Any] = MappingProxyType({})
        assert replace(again, fetched_at=0.0, extra=empty) == replace(first, fetched_at=0.0, extra=empty)

        moved = await poller._snapshot(*answers(at, 150.0), batch)  # same time, another value: mapped
        assert len(mapped) == 2 and moved.metrics is not None
        assert moved.metrics.values["generation_tokens_total"] == 150.0
        later = await poller._snapshot(*answers(at + 5, 150.0), batch)  # the next scrape
        assert len(mapped) == 3 and later.monotonic != first.monotonic
    finally:
        await poller.aclose()


THREE = '[prometheus]\nurl = "http://127.0.0.1:9"\n' + "".join(
    f'[[engines]]\nname = "e{port}"\nkind = "vllm"\nurl = "http://127.0.0.1:{port}"\nread = "prometheus"\n'
    for port in (8001, 8002, 8003)
)


async def test_a_batch_reads_the_series_only_of_the_engines_scraped_since_their_last_reading(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The scrape times first; then the series of the engines scraped since the reading their poller holds
    (issue 39: at a 5 s scrape and a 2 s poll, 60 % of a tick's engines were read and decoded for nothing).
    The others' snapshots are their last ones with new stamps."""
    config = parse_config(THREE)
    api = PrometheusAPI(config.prometheus)  # type: ignore[arg-type]
    monkeypatch.setattr(batch_module, "REUSE_S", -1.0)  # every gather below is a batch of its own
    api.engine_reads.reuse_s = 0.0
    scraped = {8001: 1_000_000.0, 8002: 1_000_000.0, 8003: 1_000_000.0}
    asked: list[str] = []

    async def query(expr: str) -> Answer:
        asked.append("times" if expr.startswith("label_replace(timestamp(") else "series")
        out = []
        for port, at in scraped.items():
            labels = {**LABELS, "instance": f"127.0.0.1:{port}"}
            if asked[-1] == "times" or f":{port}" in expr:
                out.append(Series.of({SCRAPE_OF: "up", **labels}, at, at + 1))
            if asked[-1] == "series" and f":{port}" in expr:
                out.append(Series.of({"__name__": "up", **labels}, 1.0, at + 1))
                out.append(Series.of({"__name__": "vllm:generation_tokens_total", **labels}, at / 1e4, at + 1))
                out.append(Series.of({"__name__": "vllm:num_requests_running", **labels}, 2.0, at + 1))
        return Answer(tuple(out), elapsed_s=0.01)

    monkeypatch.setattr(api, "query", query)
    pollers = [PrometheusEnginePoller(engine, api) for engine in config.engines]
    try:
        first = await asyncio.gather(*(p.poll() for p in pollers))
        assert asked == ["series"] and all(s.state is EngineState.OK for s in first), first  # nothing held
        scraped[8002] += 5  # one engine scraped again
        asked.clear()
        second = await asyncio.gather(*(p.poll() for p in pollers))
        assert asked == ["times", "series"]
        assert [s.metrics is f.metrics for s, f in zip(second, first, strict=True)] == [True, False, True]
        assert second[0].monotonic == first[0].monotonic and second[1].monotonic != first[1].monotonic
        assert second[1].metrics is not None and second[1].metrics.values["generation_tokens_total"] == 100.0005
        asked.clear()
        third = await asyncio.gather(*(p.poll() for p in pollers))  # nobody scraped since
        assert asked == ["times"] and [s.metrics for s in third] == [s.metrics for s in second]
        assert third[2].extra["scraped_at"] == 1_000_000.0 and third[2].latency_s == 0.01
    finally:
        for poller in pollers:
            await poller.aclose()


async def test_a_batch_keeps_no_series_once_handed_and_a_poll_now_reads_the_same_scrape(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Once an engine's poller took its reading, the batch keeps only its scrape time (the decoded series
    were most of the console's peak memory at 1,000 engines); a poll now of the same batch reads the
    reading the poller holds, with no query."""
    config = parse_config(THREE)
    api = PrometheusAPI(config.prometheus)  # type: ignore[arg-type]
    api.engine_reads.reuse_s = 60.0  # every ask below reads the first batch
    asked: list[str] = []

    async def query(expr: str) -> Answer:
        asked.append(expr)
        out = []
        for port in (8001, 8002, 8003):
            labels = {**LABELS, "instance": f"127.0.0.1:{port}"}
            out.append(Series.of({SCRAPE_OF: "up", **labels}, 1_000_000.0, 1_000_001.0))
            out.append(Series.of({"__name__": "up", **labels}, 1.0, 1_000_001.0))
            out.append(Series.of({"__name__": "vllm:num_requests_running", **labels}, float(port), 1_000_001.0))
        return Answer(tuple(out), elapsed_s=0.01)

    monkeypatch.setattr(api, "query", query)
    pollers = [PrometheusEnginePoller(engine, api) for engine in config.engines]
    try:
        first = await asyncio.gather(*(p.poll() for p in pollers))
        batch = api.engine_reads.latest
        assert batch is not None and len(asked) == 1
        kept = [batch.tasks[id(p)].result()[id(p)] for p in pollers]
        assert all(values.same_scrape and not values.series for values, _ in kept), kept
        assert [stamps.series[0].value for _, stamps in kept] == [1_000_000.0] * 3
        again = await asyncio.gather(*(p.poll() for p in pollers))  # a poll now, within the same batch
        assert api.engine_reads.latest is batch and len(asked) == 1
        assert [a.metrics for a in again] == [f.metrics for f in first]
        assert [a.metrics.values["requests_running"] for a in again if a.metrics] == [8001.0, 8002.0, 8003.0]
    finally:
        for poller in pollers:
            await poller.aclose()


HOSTS = '[prometheus]\nurl = "http://127.0.0.1:9"\n' + "".join(
    f'[[hosts]]\nname = "{name}"\naddress = "{name}"\nread = "prometheus"\n' for name in ("h1", "h2")
)


async def test_a_host_batch_reads_the_series_only_of_the_hosts_scraped_since_their_last_reading(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As the engines' batch: once the hosts hold readings, their targets' scrape times first, then the
    series of the hosts with a target scraped since. A repeat keeps its time, so the runtime neither alerts
    on it again nor records it."""
    config = parse_config(HOSTS)
    api = PrometheusAPI(config.prometheus)  # type: ignore[arg-type]
    monkeypatch.setattr(batch_module, "REUSE_S", -1.0)
    api.reuse_s = 0.0
    scraped = {"h1": 1_000_000.0, "h2": 1_000_000.0}
    asked: list[str] = []
    with_up = [True]

    async def query(expr: str) -> Answer:
        asked.append("times" if expr.startswith("label_replace(max by (job, instance) (timestamp(up") else "series")
        out = []
        for name, at in scraped.items():
            if name not in expr:
                continue
            target = {"instance": f"{name}:9100", "job": "node"}
            if with_up[0]:
                out.append(Series.of({SCRAPE_OF: "up", **target}, at, at + 1))
            if asked[-1] == "series":
                out.append(Series.of({"__name__": "up", **target}, 1.0, at + 1))
                for family, value in (("MemTotal", 64e9), ("MemAvailable", at * 1e3), ("SwapTotal", 0.0)):
                    out.append(Series.of({"__name__": f"node_memory_{family}_bytes", **target}, value, at + 1))
                out.append(Series.of({"__name__": "node_memory_SwapFree_bytes", **target}, 0.0, at + 1))
        return Answer(tuple(out), elapsed_s=0.01)

    monkeypatch.setattr(api, "query", query)
    pollers = [PrometheusHostPoller(host, api) for host in config.hosts]
    try:
        first = await asyncio.gather(*(p.poll() for p in pollers))
        assert asked == ["series"] and all(s.system_memory is not None for s in first), first
        scraped["h2"] += 5
        asked.clear()
        second = await asyncio.gather(*(p.poll() for p in pollers))
        assert asked == ["times", "series"]
        assert second[0].fetched_at == first[0].fetched_at and second[1].fetched_at == pytest.approx(
            first[1].fetched_at + 5
        )
        assert second[0].system_memory is first[0].system_memory and second[0].rtt_ms == 10.0
        assert second[1].system_memory != first[1].system_memory
        asked.clear()
        third = await asyncio.gather(*(p.poll() for p in pollers))
        assert asked == ["times"] and [s.system_memory for s in third] == [s.system_memory for s in second]
        with_up[0] = False  # targets with no scrape time in Prometheus (no `up`, no exporter series of theirs)
        for _ in range(2):
            asked.clear()
            await asyncio.gather(*(p.poll() for p in pollers))
        assert asked == ["series"]  # read whole, by the one query, not the scrape times first for nothing
    finally:
        for poller in pollers:
            await poller.aclose()


async def test_a_new_scrape_laid_out_as_the_last_is_mapped_by_the_same_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    """An engine read from Prometheus gives the same series scrape after scrape: its plan is built once and
    applied to each scrape's values; a series more (another layout) builds it again."""
    built = counted(monkeypatch, layout_module, "build_plan", mapping.build_plan)
    poller = one_poller()
    batch: Any = None
    try:
        at = 1_000_000.0
        first = await poller._snapshot(*answers(at, 100.0), batch)
        later = await poller._snapshot(*answers(at + 5, 160.0), batch)
        assert len(built) == 1 and later.metrics is not None and first.metrics is not None
        assert later.metrics.values["generation_tokens_total"] == 160.0
        assert first.metrics.values["generation_tokens_total"] == 100.0  # the plan holds no values
        values, stamps = answers(at + 10, 170.0)
        extra = Series.of({"__name__": "vllm:num_requests_waiting", **LABELS}, 4.0, at + 11)
        moved = await poller._snapshot(replace(values, series=(*values.series, extra)), stamps, batch)
        assert len(built) == 2 and moved.metrics is not None and moved.metrics.values["requests_waiting"] == 4.0
    finally:
        await poller.aclose()
