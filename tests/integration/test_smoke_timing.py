"""Smoke timing against a server with known timing (tests/helpers/paced.py): the arrival of each event is
stamped at the socket, not when a busy client loop gets to it; TLS goes through the same client; TTFT
counts from the request's start, its connect included, and the connect is its own figure; and
`poolconsole smoke --json` reports what the server did, saying on stderr what it is doing."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from poolconsole.collect import smoke_transport
from poolconsole.collect.http import PollClient, fetch
from poolconsole.config import parse_config
from poolconsole.ops.smoke import stream as smoke_stream
from poolconsole.ops.smoke.checks import Checker, Prompts, Target
from poolconsole.ops.smoke.stream import StreamResult, stream_chat
from tests.helpers.certs import self_signed
from tests.helpers.paced import PacedProtocol, paced_in_thread, start_paced

BODY = {"model": "paced", "messages": [{"role": "user", "content": "x"}], "stream": True}


@pytest.fixture
def paced() -> Iterator[str]:
    with paced_in_thread(first_s=0.05, every_s=0.02, tokens=1) as port:
        yield f"http://127.0.0.1:{port}"


async def stream_while_the_loop_is_blocked(client: httpx.AsyncClient, url: str) -> tuple[StreamResult, float, float]:
    """One stream whose first token (50 ms after the request) is written while this loop is blocked for
    300 ms, as a client busy parsing hundreds of other streams would be. Returns the result, when the
    server wrote the first token and when the block ended (one clock: time.perf_counter); on a machine
    so loaded that the token was not written inside the block, the scenario is run again."""
    loop = asyncio.get_running_loop()
    for _ in range(5):
        began = ended = 0.0

        def block() -> None:
            nonlocal began, ended
            began = time.perf_counter()
            time.sleep(0.3)
            ended = time.perf_counter()

        loop.call_later(0.02, block)
        result = await stream_chat(client, url + "/v1/chat/completions", BODY, {}, 5, 10)
        assert result.ok, result.reason
        assert result.last_event is not None
        written = result.last_event["server"]["first"]
        if began < written < ended - 0.1:
            return result, written, ended
    raise AssertionError("the first token never arrived while the loop was blocked")


@pytest.mark.skipif(not smoke_transport._KERNEL_STAMPS, reason="kernel receive timestamps are read on Linux only")
async def test_arrival_is_stamped_by_the_kernel_not_by_a_busy_loop(paced: str) -> None:
    async with smoke_transport.timed_client(10, 4) as timed:
        result, written, ended = await stream_while_the_loop_is_blocked(timed, paced)
    lag = result.token_times[0] - written
    assert lag < 0.02, f"first token stamped {lag * 1000:.1f} ms after the server wrote it"
    assert result.ttft is not None and result.ttft >= 0.05
    # the same stream through httpx's own transport is stamped when the blocked loop gets to it
    async with httpx.AsyncClient(trust_env=False) as plain:
        result, written, ended = await stream_while_the_loop_is_blocked(plain, paced)
    assert result.token_times[0] >= ended > written + 0.1


async def test_tls_streams_through_the_timed_client(tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path)
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(cert, key)
    server = await start_paced(first_s=0.05, every_s=0.01, tokens=5, ssl_context=server_ctx)
    url = f"https://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    try:
        async with smoke_transport.timed_client(10, 4, verify=ssl.create_default_context(cafile=str(cert))) as client:
            pong = await client.get(url + "/ping")
            assert pong.text == "ok"
            assert isinstance(pong.extensions["network_stream"], smoke_transport.TlsStream)
            assert pong.extensions["network_stream"].get_extra_info("ssl_object") is not None
            results = await asyncio.gather(
                *(stream_chat(client, url + "/v1/chat/completions", BODY, {}, 5, 10) for _ in range(6))
            )
        for result in results:
            assert result.ok, result.reason
            assert result.content == " t0 t1 t2 t3 t4" and result.usage_tokens == 5
            assert result.ttft is not None and result.ttft >= 0.05
        # a client that does not trust the certificate is refused, with the reason
        async with smoke_transport.timed_client(10, 4) as untrusting:
            refused = await stream_chat(untrusting, url + "/v1/chat/completions", BODY, {}, 5, 10)
        assert not refused.ok and refused.reason and "CERTIFICATE_VERIFY_FAILED" in refused.reason
    finally:
        server.close()


async def test_a_refused_connection_names_the_url_in_the_words_of_status() -> None:
    server = await start_paced(first_s=0.05, every_s=0.01, tokens=2)
    port = server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()
    url = f"http://127.0.0.1:{port}/v1/chat/completions"
    async with smoke_transport.timed_client(5, 4) as client:
        result = await stream_chat(client, url, BODY, {}, 2, 5)
    poll = PollClient()
    try:
        status = await fetch(poll, url, timeout_s=5, max_bytes=1024)  # what `poolconsole status` says
    finally:
        await poll.aclose()
    assert status.error and "connection refused" in status.error
    assert not result.ok and result.reason == f"{url}: {status.error}"


HOLD_S = 0.5


@contextlib.asynccontextmanager
async def slow_to_connect(hold_s: float, first_s: float = 0.05) -> AsyncIterator[str]:
    """A paced server whose listen backlog is full for `hold_s`: a socket listening with backlog 0 and one
    connection nobody accepts, so that Linux drops the next SYN (the client sends it again after its
    1 s initial retransmission timeout). Then it serves; yields its URL."""
    loop = asyncio.get_running_loop()
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    listener.setblocking(False)
    port = listener.getsockname()[1]
    filler = socket.create_connection(("127.0.0.1", port), timeout=5)  # fills the accept queue
    servers: list[asyncio.Server] = []

    async def serve_later() -> None:
        await asyncio.sleep(hold_s)
        servers.append(await loop.create_server(lambda: PacedProtocol(first_s, 0.01, 3), sock=listener))

    serving = asyncio.create_task(serve_later())
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await serving
        filler.close()
        for server in servers:
            server.close()
            await server.wait_closed()


@pytest.mark.skipif(sys.platform != "linux", reason="a full listen backlog drops SYNs on Linux")
async def test_ttft_counts_from_the_request_start_its_connect_included() -> None:
    async with slow_to_connect(HOLD_S) as url, smoke_transport.timed_client(10, 4) as client:
        slow = await stream_chat(client, url + "/v1/chat/completions", BODY, {}, 5, 10)
        kept = await stream_chat(client, url + "/v1/chat/completions", BODY, {}, 5, 10)
    assert slow.ok, slow.reason
    # no connection before the backlog had room: the connect took at least the hold
    assert slow.connect_s is not None and slow.connect_s >= HOLD_S
    assert slow.sent_at - slow.started_at == pytest.approx(slow.connect_s)
    # the first token is written 50 ms after the server has the request, sent after the connect
    assert slow.ttft is not None and slow.ttft >= slow.connect_s + 0.045
    # the next request goes out on the same connection: no connect, TTFT from its send
    assert kept.ok, kept.reason
    assert kept.connect_s is None and kept.started_at == kept.sent_at
    assert kept.ttft is not None and kept.ttft >= 0.045


@pytest.mark.skipif(sys.platform != "linux", reason="a full listen backlog drops SYNs on Linux")
async def test_a_level_reports_connect_s_apart_from_ttft() -> None:
    async with slow_to_connect(HOLD_S) as url:
        engine = parse_config(f'[[engines]]\nname = "paced"\nkind = "openai"\nurl = "{url}"\n').engines[0]
        checker = Checker(Target("paced", engine, url, None), Prompts(1), stall_s=5, total_s=10)
        try:
            result = await checker.chat_stream("paced", engine.smoke, 1, 1)
        finally:
            await checker.close()
    doc = result.to_json()
    assert doc["passed"], doc["reason"]
    connect = doc["connect_s"]
    assert connect["connections"] == 1 and connect["mean"] >= HOLD_S and connect["p95"] >= HOLD_S
    assert doc["ttft_s"]["p50"] >= connect["mean"] + 0.045
    assert re.search(r"connect \d+\.\d ms mean, \d+\.\d ms p95 \(1 new connection", doc["reason"]), doc["reason"]


def test_smoke_json_reports_the_known_timing(tmp_path: Path) -> None:
    """`poolconsole smoke --json` against first token 150 ms after the request, one every 10 ms.

    Bounds: no token can arrive before the server sends it (TTFT >= 150 ms, decode <= 100 tok/s
    within stamp resolution); the upper bounds are loose on purpose (shared CI machines); the accuracy
    itself is measured by benchmarks/smoke_bench.py."""
    import multiprocessing

    from tests.helpers.paced import serve_forever

    parent, child = multiprocessing.Pipe()
    proc = multiprocessing.get_context("spawn").Process(target=serve_forever, args=(0.15, 0.01, 40, child))
    proc.start()
    try:
        port = parent.recv()
        config = tmp_path / "pool.toml"
        config.write_text(f'[[engines]]\nname = "paced"\nkind = "openai"\nurl = "http://127.0.0.1:{port}"\n')
        proc_out = subprocess.run(
            [sys.executable, "-m", "poolconsole", "smoke", "paced", "--config", str(config), "--db",
             str(tmp_path / "db.sqlite3"), "--json", "--concurrency", "1,16", "--requests", "16"],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    finally:
        proc.kill()
        proc.join(5)
    assert proc_out.returncode == 0, proc_out.stdout[-2000:] + proc_out.stderr[-2000:]
    doc = json.loads(proc_out.stdout)
    streams = {r["concurrency"]: r for r in doc["results"] if r["check"] == "chat_stream"}
    assert set(streams) == {1, 16}
    # 16 requests one after another (>= 8 s) go out on one kept-alive connection
    assert streams[1]["connect_s"]["connections"] == 1 and streams[1]["connect_s"]["mean"] > 0
    # stdout is the JSON; stderr says what the run is doing once it has gone on for 3 s
    # (engine and model both "paced": the name is said once)
    assert re.search(r"^smoke: paced chat_stream c=1 \d+/16 done$", proc_out.stderr, re.M), proc_out.stderr
    for level in streams.values():
        assert level["passed"] and level["requests"] == 16
        assert 0.150 <= level["ttft_s"]["p50"] <= level["ttft_s"]["p95"] < 0.45
        assert 0.0095 <= level["itl_s"]["mean"] < 0.03
        assert 50 < level["output_tokens_per_s"]["per_stream"] <= 101


class ClosesUnanswered(PacedProtocol):
    """Answers the first `answered` requests of each connection, then closes it on the next one without a
    byte: a server letting a kept-alive connection go as the client sends on it (`answered=0`: a server
    that drops every request)."""

    def __init__(self, answered: int) -> None:
        super().__init__(0.0, 0.001, 2)
        self.left = answered

    def _answer(self, method: str, path: str, request: dict[str, Any], arrived: float) -> None:
        if self.left == 0:
            assert self.transport is not None
            self.transport.close()
            return
        self.left -= 1
        super()._answer(method, path, request, arrived)


@contextlib.asynccontextmanager
async def closing_server(answered: int) -> AsyncIterator[str]:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: ClosesUnanswered(answered), "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1/chat/completions"
    finally:
        server.close()
        await server.wait_closed()


async def test_a_request_on_a_kept_alive_connection_closed_unanswered_is_sent_again() -> None:
    async with closing_server(answered=1) as url, smoke_transport.timed_client(10, 1) as client:
        first = await stream_chat(client, url, BODY, {}, 5, 10)
        second = await stream_chat(client, url, BODY, {}, 5, 10)  # the kept-alive connection: closed on it
    assert first.ok and not first.resent, first.reason
    assert second.ok, second.reason
    assert second.resent and second.connect_s is not None  # on a new connection, its connect timed
    words = smoke_stream.level_stats([first, second], 1.0).resent_words()
    assert words == ["1 request(s) sent again on a new connection: the kept-alive one closed unanswered"]


async def test_a_request_closed_unanswered_on_its_own_connection_fails() -> None:
    async with closing_server(answered=0) as url, smoke_transport.timed_client(10, 1) as client:
        result = await stream_chat(client, url, BODY, {}, 5, 10)
    assert not result.ok and not result.resent
    assert result.reason is not None and "Server disconnected without sending a response" in result.reason
