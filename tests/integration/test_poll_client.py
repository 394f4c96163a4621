"""The poll client (collect.http, on aiohttp) against loopback servers that frame responses every legal way and
break them in the ways engines and proxies do. Status-code meanings are tested through the engine
poller (test_engine_http.py); here: framing, keep-alive, limits and the errors it raises."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import gzip
import os
import ssl
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from poolconsole.collect import tls
from poolconsole.collect.http import Failure, PollClient, PollError, fetch
from tests.helpers.certs import self_signed


class Server:
    """Counts connections and requests; `answer` writes the raw response bytes for each request."""

    def __init__(self, answer: Callable[[int], bytes], close_after: bool = False) -> None:
        self.answer = answer
        self.close_after = close_after
        self.connections = 0
        self.requests: list[bytes] = []
        self.writers: list[asyncio.StreamWriter] = []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.writers.append(writer)
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            while True:
                self.requests.append(await reader.readuntil(b"\r\n\r\n"))
                writer.write(self.answer(len(self.requests)))
                await writer.drain()
                if self.close_after:
                    break
        writer.close()

    def drop_idle(self) -> None:
        """The server forgets its keep-alive connections (an engine restart, a proxy's idle timeout)."""
        for writer in self.writers:
            writer.close()


@contextlib.asynccontextmanager
async def serving(server: Server) -> AsyncIterator[str]:
    srv = await asyncio.start_server(server.handle, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{srv.sockets[0].getsockname()[1]}"
    finally:
        srv.close()


def sized(body: bytes, extra: str = "") -> bytes:
    return f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n{extra}\r\n".encode() + body


@pytest.fixture
async def client() -> AsyncIterator[PollClient]:
    c = PollClient()
    yield c
    await c.aclose()


async def test_keep_alive_one_connection_for_many_gets(client: PollClient) -> None:
    server = Server(lambda n: sized(f"poll {n}".encode()))
    async with serving(server) as url:
        bodies = [(await client.get(url + "/metrics", None, 1000)).body for _ in range(5)]
    assert bodies == [f"poll {n}".encode() for n in range(1, 6)]
    assert server.connections == 1
    first = server.requests[0].decode()
    assert first.startswith("GET /metrics HTTP/1.1\r\n") and "Accept-Encoding: identity" in first


async def test_a_connection_the_server_dropped_is_replaced(client: PollClient) -> None:
    server = Server(lambda n: sized(b"ok"))
    async with serving(server) as url:
        assert (await client.get(url + "/", None, 100)).body == b"ok"
        server.drop_idle()
        await asyncio.sleep(0.05)
        assert (await client.get(url + "/", None, 100)).body == b"ok"
        assert server.connections == 2


async def test_connection_close_is_honoured(client: PollClient) -> None:
    server = Server(lambda n: sized(b"bye", "Connection: close\r\n"), close_after=True)
    async with serving(server) as url:
        for _ in range(3):
            assert (await client.get(url + "/", None, 100)).body == b"bye"
    assert server.connections == 3


async def test_chunked_and_eof_framed_bodies(client: PollClient) -> None:
    chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
    server = Server(lambda n: chunked)
    async with serving(server) as url:
        assert (await client.get(url + "/", None, 100)).body == b"hello world"
        assert (await client.get(url + "/", None, 100)).body == b"hello world"
    assert server.connections == 1
    until_eof = Server(lambda n: b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nall of it", close_after=True)
    async with serving(until_eof) as url:
        response = await client.get(url + "/", None, 100)
    assert response.body == b"all of it" and response.headers["content-type"] == "text/plain"


async def test_junk_after_a_response_retires_the_connection(client: PollClient) -> None:
    """Bytes after a response on the same connection: aiohttp reads them as the next response's status
    line and refuses the exchange. The poll says so in words, and the connection is not used again."""
    server = Server(lambda n: sized(f"poll {n}".encode()) + (b"junk\r\n\r\n" if n == 1 else b""))
    async with serving(server) as url:
        junk = await fetch(client, url + "/", timeout_s=2, max_bytes=100)
        assert junk.failure is Failure.PROTOCOL and "not a valid HTTP response" in (junk.error or "")
        assert (await client.get(url + "/", None, 100)).body == b"poll 2"
    assert server.connections == 2


async def test_cut_body_and_garbage_are_errors_with_kinds(client: PollClient) -> None:
    cut = Server(lambda n: b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly part", close_after=True)
    async with serving(cut) as url:
        with pytest.raises(PollError) as raised:
            await client.get(url + "/", None, 1000)
    assert raised.value.kind == "truncated" and "received 9 of 100 bytes" in str(raised.value)
    garbage = Server(lambda n: b"SSH-2.0-OpenSSH_9.2\r\n\r\n", close_after=True)
    async with serving(garbage) as url:
        got = await fetch(client, url + "/metrics", timeout_s=2, max_bytes=1000)
    assert got.failure is Failure.PROTOCOL and "not a valid HTTP response" in (got.error or "")


PAGE = (Path(__file__).parents[1] / "fixtures" / "real" / "vllm-0.32.0-cpu" / "metrics.load.txt").read_bytes()
AT_A_LINE = PAGE[: PAGE.index(b"\n", len(PAGE) // 2) + 1]
"""A real /metrics page cut after a whole line: its last line parses, so only the framing can tell."""


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


@pytest.mark.parametrize(
    "answer",
    [
        b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(PAGE), AT_A_LINE),
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunk(AT_A_LINE),  # no last chunk
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s" % (len(PAGE), AT_A_LINE),  # mid-chunk
    ],
    ids=["content-length", "chunked-no-last-chunk", "chunked-mid-chunk"],
)
async def test_a_page_cut_where_its_last_line_parses_is_a_failed_poll(client: PollClient, answer: bytes) -> None:
    """Issue 35: a cut /metrics page whose last line parses had read ok. A body shorter than its
    Content-Length, or a chunked body that ends before its last chunk, is a truncated GET."""
    async with serving(Server(lambda n: answer, close_after=True)) as url:
        for _ in range(20):  # every time, not most times
            got = await fetch(client, url + "/metrics", timeout_s=2, max_bytes=1 << 20)
            assert got.failure is Failure.TRUNCATED and got.body == b"", got.error
            assert (got.error or "").startswith("connection closed mid-response (Not enough data to satisfy")


async def test_body_cap_holds_for_compressed_bodies_too(client: PollClient) -> None:
    bomb = gzip.compress(b"0" * 1_000_000)  # ~1 KB on the wire
    server = Server(
        lambda n: (
            sized(bomb, "Content-Encoding: gzip\r\n")
            if n == 1
            else sized(gzip.compress(b"x 1\n"), "Content-Encoding: gzip\r\n")
        )
    )
    async with serving(server) as url:
        capped = await fetch(client, url + "/", timeout_s=2, max_bytes=64_000)
        fine = await fetch(client, url + "/", timeout_s=2, max_bytes=64_000)
    assert capped.failure is Failure.TOO_LARGE and "decompressed" in (capped.error or "")
    assert fine.ok and fine.body == b"x 1\n"


async def test_header_values_cannot_inject_lines(client: PollClient) -> None:
    server = Server(lambda n: sized(b"ok"))
    async with serving(server) as url:
        got = await fetch(
            client, url + "/", timeout_s=2, max_bytes=100, headers={"Authorization": "Bearer x\r\nX-Evil: 1"}
        )
    assert got.failure is Failure.PROTOCOL and "line break" in (got.error or "")
    assert server.requests == []


async def test_a_slow_answer_times_out_and_its_connection_is_not_reused(client: PollClient) -> None:
    release = asyncio.Event()
    connections: list[int] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        me = len(connections) + 1
        connections.append(me)
        await reader.readuntil(b"\r\n\r\n")
        await release.wait()
        writer.write(sized(b"answer on connection %d" % me))
        with contextlib.suppress(ConnectionError):
            await writer.drain()
        writer.close()

    srv = await asyncio.start_server(handle, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{srv.sockets[0].getsockname()[1]}/"
    try:
        got = await fetch(client, url, timeout_s=0.2, max_bytes=100)
        assert got.failure is Failure.TIMEOUT
        release.set()
        await asyncio.sleep(0.05)  # the late answer reaches the abandoned connection, if it were kept
        again = await fetch(client, url, timeout_s=2, max_bytes=100)
        assert again.ok and again.body == b"answer on connection 2"  # never the timed-out GET's answer
        assert connections == [1, 2]
    finally:
        release.set()
        srv.close()


SYSTEM_STORE_GET = """
import asyncio, ssl, sys
from poolconsole.collect.http import PollClient, fetch  # the first import of aiohttp, through collect.tls
import aiohttp.connector

async def main() -> None:
    client = PollClient()
    got = await fetch(client, sys.argv[1], timeout_s=5, max_bytes=1000)
    await client.aclose()
    print("aiohttp's defaults hold", aiohttp.connector._SSL_CONTEXT_VERIFIED.cert_store_stats()["x509"], "certificates")
    print("ssl's own method back:", "set_default_verify_paths" not in vars(ssl.SSLContext))
    print("GET:", got.ok, got.body, got.error)

asyncio.run(main())
"""


async def tls_engine(tmp_path: Path) -> tuple[Path, Server, asyncio.Server, str]:
    """An engine on 127.0.0.1 over TLS with a self-signed certificate: the certificate, server and /metrics URL."""
    cert, key = self_signed(tmp_path)
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(cert, key)
    server = Server(lambda n: sized(b"vllm:num_requests_running 1\n"))
    srv = await asyncio.start_server(server.handle, "127.0.0.1", 0, ssl=server_ctx)
    return cert, server, srv, f"https://127.0.0.1:{srv.sockets[0].getsockname()[1]}/metrics"


async def test_https_is_verified_against_the_system_store_with_aiohttps_defaults_unloaded(tmp_path: Path) -> None:
    """aiohttp is imported without loading the CA store into its two default contexts (collect.tls, 14 % of
    the console's start-up); an https engine is still verified against the system's store (here a store of
    one self-signed certificate, named by SSL_CERT_FILE as OpenSSL reads it), through default_tls()."""
    cert, _, srv, url = await tls_engine(tmp_path)
    (tmp_path / "no-certs").mkdir()
    env = {**os.environ, "SSL_CERT_FILE": str(cert), "SSL_CERT_DIR": str(tmp_path / "no-certs")}
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        SYSTEM_STORE_GET,
        url,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:
        out, _ = await asyncio.wait_for(child.communicate(), 60)
    finally:
        if child.returncode is None:
            child.kill()
        srv.close()
    said = out.decode()
    assert "aiohttp's defaults hold 0 certificates" in said, said  # skipped: those contexts would trust nothing
    assert "ssl's own method back: True" in said, said
    assert "GET: True b'vllm:num_requests_running 1\\n' None" in said, said


async def test_tls_verified_and_refused_with_the_reason(tmp_path: Path) -> None:
    cert, server, srv, url = await tls_engine(tmp_path)
    trusting = PollClient(tls=ssl.create_default_context(cafile=str(cert)))
    untrusting = PollClient()  # the system's CAs: a self-signed engine is not trusted
    try:
        for _ in range(2):
            got = await fetch(trusting, url, timeout_s=5, max_bytes=1000)
            assert got.ok and got.body == b"vllm:num_requests_running 1\n"
        assert server.connections == 1  # kept alive over TLS too
        refused = await fetch(untrusting, url, timeout_s=5, max_bytes=1000)
        assert refused.failure is Failure.PROTOCOL and "CERTIFICATE_VERIFY_FAILED" in (refused.error or "")
    finally:
        await trusting.aclose()
        await untrusting.aclose()
        srv.close()


def test_the_system_store_is_loaded_once_however_many_engines_ask_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every https engine's first GET asks for default_tls() from a thread at the same moment: one load."""
    loads: list[int] = []

    def slow_load() -> ssl.SSLContext:
        loads.append(1)
        time.sleep(0.05)  # the CA store, being read
        return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)

    monkeypatch.setattr(tls, "_default", None)
    monkeypatch.setattr(tls.ssl, "create_default_context", slow_load)  # type: ignore[attr-defined]
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        contexts = list(pool.map(lambda _: tls.default_tls(), range(16)))
    assert len(loads) == 1 and all(c is contexts[0] for c in contexts)


def test_aiohttp_is_imported_as_it_is_while_another_thread_runs(tmp_path: Path) -> None:
    """The stand-in for ssl's CA load is process-wide while aiohttp imports: with another thread running
    (one that could build a context meanwhile) aiohttp is imported as it is, its defaults loaded."""
    cert, _ = self_signed(tmp_path)
    code = (
        "import threading, time\n"
        "threading.Thread(target=time.sleep, args=(2,), daemon=True).start()\n"
        "import poolconsole.collect.http, aiohttp.connector as c\n"
        "print(c._SSL_CONTEXT_VERIFIED.cert_store_stats()['x509'])\n"
    )
    env = {**os.environ, "SSL_CERT_FILE": str(cert), "SSL_CERT_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "1", done.stdout + done.stderr
