"""Smoke timing against a server with known timing (tests/helpers/paced.py): the arrival of each event is
stamped at the socket, not when a busy client loop gets to it; TLS goes through the same client; and
`poolconsole smoke --json` reports what the server did."""

from __future__ import annotations

import asyncio
import json
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from poolconsole.collect import wire
from poolconsole.ops.smoke.stream import StreamResult, stream_chat
from tests.helpers.certs import self_signed
from tests.helpers.paced import paced_in_thread, start_paced

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


@pytest.mark.skipif(not wire._KERNEL_STAMPS, reason="kernel receive timestamps are read on Linux only")
async def test_arrival_is_stamped_by_the_kernel_not_by_a_busy_loop(paced: str) -> None:
    async with wire.timed_client(10, 4) as timed:
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
        async with wire.timed_client(10, 4, verify=ssl.create_default_context(cafile=str(cert))) as client:
            pong = await client.get(url + "/ping")
            assert pong.text == "ok"
            assert isinstance(pong.extensions["network_stream"], wire.TlsStream)
            assert pong.extensions["network_stream"].get_extra_info("ssl_object") is not None
            results = await asyncio.gather(
                *(stream_chat(client, url + "/v1/chat/completions", BODY, {}, 5, 10) for _ in range(6))
            )
        for result in results:
            assert result.ok, result.reason
            assert result.content == " t0 t1 t2 t3 t4" and result.usage_tokens == 5
            assert result.ttft is not None and result.ttft >= 0.05
        # a client that does not trust the certificate is refused, with the reason
        async with wire.timed_client(10, 4) as untrusting:
            refused = await stream_chat(untrusting, url + "/v1/chat/completions", BODY, {}, 5, 10)
        assert not refused.ok and refused.reason and "CERTIFICATE_VERIFY_FAILED" in refused.reason
    finally:
        server.close()


async def test_refused_and_closed_connections_are_reasons() -> None:
    server = await start_paced(first_s=0.05, every_s=0.01, tokens=2)
    port = server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()
    async with wire.timed_client(5, 4) as client:
        result = await stream_chat(client, f"http://127.0.0.1:{port}/v1/chat/completions", BODY, {}, 2, 5)
    assert not result.ok and result.reason and result.reason.startswith("ConnectError")


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
    for level in streams.values():
        assert level["passed"] and level["requests"] == 16
        assert 0.150 <= level["ttft_s"]["p50"] <= level["ttft_s"]["p95"] < 0.45
        assert 0.0095 <= level["itl_s"]["mean"] < 0.03
        assert 50 < level["output_tokens_per_s"]["per_stream"] <= 101
