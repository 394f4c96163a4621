"""Rates that stay right on a busy console (issue 13): a sample is stamped when its /metrics request
went out (as Prometheus stamps a scrape by its start), so a poll that resumes late (a busy event loop, a
slow parse) or that also waits for /v1/models and /version does not skew tok/s.

A loopback server serves a vLLM capture whose generation counter grows at RATE per second of the
server's clock, and records when it sent each page; the truth is the counter's growth over the time
between those sends. The client's stamp can only lie between the moment the test started the poll and
the page's send (the request must go out before the server answers it): the rate is asserted inside the
bounds that follow. They hold however loaded the machine is (causality, not a wall-clock budget); on an
idle machine they are ~0.2 % wide. A stamp taken after the 0.3 s block falls far outside them.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from aiohttp.client_proto import ResponseHandler

from poolconsole.collect.engines import mapping
from poolconsole.collect.engines.kinds import metrics_engine
from poolconsole.collect.engines.poll import EnginePoller
from poolconsole.collect.http import PollClient
from poolconsole.config.models import Engine, EngineKind, Settings
from poolconsole.model.snapshots import EngineSnapshot
from poolconsole.model.view import engine_view
from tests.conftest import REAL
from tests.helpers.rawhttp import RawHTTPServer

VLLM = REAL / "vllm-0.32.0-cpu"
COUNTER = b'vllm:generation_tokens_total{engine="0",model_name="tiny"} '
RATE = 911.0
"""Generation tokens per second of the server's clock: the truth."""
BLOCK_S = 0.3
BETWEEN_S = 0.5
T0 = 1_796_000_000.0
"""The injected wall clock: the snapshots' times are on it."""


class CounterServer(RawHTTPServer):
    """vLLM's /metrics with a counter that grows at RATE, /v1/models and /version (held back `version_delay_s`)."""

    def __init__(self, version_delay_s: float = 0.0) -> None:
        super().__init__()
        page = (VLLM / "metrics.load.txt").read_bytes()
        at = page.index(COUNTER) + len(COUNTER)
        self.head, self.tail = page[:at], page[page.index(b"\n", at) :]
        self.version_delay_s = version_delay_s
        self.sent: list[float] = []
        """time.monotonic() just before each /metrics page was written."""
        self.values: list[float] = []

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                path = (await reader.readuntil(b"\r\n\r\n")).split(b" ", 2)[1]
                if path == b"/metrics":
                    sent = time.monotonic()
                    value = RATE * sent
                    body = self.head + repr(value).encode() + self.tail
                    self.sent.append(sent)
                    self.values.append(value)
                elif path == b"/version":
                    await asyncio.sleep(self.version_delay_s)
                    body = (VLLM / "version.json").read_bytes()
                elif path == b"/v1/models":
                    body = (VLLM / "v1_models.json").read_bytes()
                else:
                    writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
                    continue
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


class Watch:
    """Blocks the event loop BLOCK_S right after a /metrics page's bytes reached aiohttp's protocol
    (before the awaiting poll resumes), as a busy console's other callbacks do; and notes when each
    poll was started (the earliest a stamp may be)."""

    def __init__(self) -> None:
        self.started: list[float] = []
        self.block_next = False

    def wrap(self, original: Callable[[ResponseHandler, bytes], None]) -> Callable[[ResponseHandler, bytes], None]:
        def data_received(proto: ResponseHandler, data: bytes) -> None:
            original(proto, data)
            if self.block_next and COUNTER in data:
                self.block_next = False
                time.sleep(BLOCK_S)

        return data_received


@pytest.fixture
def watch(monkeypatch: pytest.MonkeyPatch) -> Watch:
    w = Watch()
    monkeypatch.setattr(ResponseHandler, "data_received", w.wrap(ResponseHandler.data_received))
    return w


@pytest.fixture
async def client() -> AsyncIterator[PollClient]:
    c = PollClient()
    yield c
    await c.aclose()


async def two_polls(
    server: CounterServer, client: PollClient, watch: Watch, before_second: Callable[[], None]
) -> tuple[EngineSnapshot, EngineSnapshot]:
    engine = Engine(name="e", kind=EngineKind.VLLM, url=server.url)
    poller = EnginePoller(engine, client, Settings(http_timeout_s=3.0), clock=lambda: T0)
    watch.started.append(time.monotonic())
    first = await poller.poll()  # the first poll: /metrics, /v1/models and /version together
    await asyncio.sleep(BETWEEN_S)
    before_second()
    watch.started.append(time.monotonic())
    second = await poller.poll()
    return first, second


def assert_rate_true(server: CounterServer, watch: Watch, first: EngineSnapshot, second: EngineSnapshot) -> None:
    view = engine_view([first, second])
    assert view.state == "ok", view.error
    assert len(server.sent) == len(watch.started) == 2
    (sent1, sent2), (started1, started2) = server.sent, watch.started
    grown = server.values[1] - server.values[0]
    truth = grown / (sent2 - sent1)
    lower, upper = grown / (sent2 - started1), grown / (started2 - sent1)  # each stamp in [started, sent]
    rate = view.generation_tokens_per_s
    assert rate is not None
    assert lower <= rate <= upper, f"{rate:.1f} tok/s, truth {truth:.1f}, possible {lower:.1f}..{upper:.1f}"
    assert rate == pytest.approx(truth, rel=max(0.01, (upper - lower) / truth))  # within 1 % (idle: ~0.1 %)


@pytest.fixture
async def server() -> AsyncIterator[CounterServer]:
    srv = await CounterServer().start()
    yield srv
    await srv.stop()


async def test_a_busy_loop_between_arrival_and_resumption(
    server: CounterServer, client: PollClient, watch: Watch
) -> None:
    """The second page arrives, then the loop is busy 0.3 s before the poll resumes (32 engines alerting)."""

    def block() -> None:
        watch.block_next = True

    first, second = await two_polls(server, client, watch, block)
    assert_rate_true(server, watch, first, second)
    assert T0 - second.fetched_at >= BLOCK_S - 1e-6  # the wall time is the arrival's too, on the injected clock


async def test_a_slow_parse(
    server: CounterServer, client: PollClient, watch: Watch, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The poll's own work after the page came (the parse here) does not count in its time step."""
    parse = mapping.parse_metrics
    slow = [False]

    def slow_parse(*args: Any) -> Any:
        if slow[0]:
            slow[0] = False
            time.sleep(BLOCK_S)
        return parse(*args)

    monkeypatch.setattr(metrics_engine, "parse_metrics", slow_parse)
    first, second = await two_polls(server, client, watch, lambda: slow.__setitem__(0, True))
    assert_rate_true(server, watch, first, second)
    assert T0 - second.fetched_at >= BLOCK_S - 1e-6


async def test_the_first_poll_waits_for_version_but_is_stamped_by_metrics(client: PollClient, watch: Watch) -> None:
    """The first poll also GETs /v1/models and /version; a slow /version must not move its stamp."""
    server = await CounterServer(version_delay_s=BLOCK_S).start()
    try:
        first, second = await two_polls(server, client, watch, lambda: None)
    finally:
        await server.stop()
    assert first.version == "0.32.0"  # it did wait for /version
    assert_rate_true(server, watch, first, second)
