"""The hand-written poll client that poolconsole used until issue 14 (keep-alive HTTP/1.1 GETs on asyncio
protocols, parsed by httptools), kept here only as the reference that benchmarks/collect_bench.py measures
the aiohttp poll client against, side by side. Not part of the package."""

from __future__ import annotations

import asyncio
import ssl
import time
import zlib
from collections import deque
from dataclasses import dataclass
from typing import cast
from urllib.parse import urlsplit

import httptools

from poolconsole.collect.smoke_transport import open_tcp
from poolconsole.collect.tls import default_tls

USER_AGENT = "poolconsole"
IDLE_KEPT = 4
"""Idle connections kept per origin (a poll asks at most a few paths of one engine at once)."""


class PollError(Exception):
    """A GET that produced no usable response. `kind` is a collect.http.Failure value."""

    def __init__(self, kind: str, message: str, cause: BaseException | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.cause = cause


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    headers: dict[str, str]
    """Lower-case names; a repeated header keeps its last value."""
    body: bytes
    received: float
    """time.monotonic() when the response's last byte arrived, taken in the protocol before the event loop
    resumes the GET's caller: a sample's time for rates, which a busy loop does not push back."""


@dataclass(frozen=True, slots=True)
class _Target:
    scheme: str
    host: str
    port: int
    request: bytes


class _Connection(asyncio.Protocol):
    """One keep-alive connection; one request at a time."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.done: asyncio.Future[Response] | None = None
        self.parser: httptools.HttpResponseParser | None = None
        self.headers: dict[str, str] = {}
        self.chunks: list[bytes] = []
        self.size = 0
        self.max_bytes = 0
        self.received = False
        self.keep_alive = False
        self.headers_done = False
        self.framed = False
        """The response says where its body ends (Content-Length or chunked): EOF before that is a cut."""

    # -- asyncio.Protocol ------------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's transports are not subclasses

    def data_received(self, data: bytes) -> None:
        if self.parser is None or self.done is None or self.done.done():
            self.close()  # bytes nobody asked for, on an idle connection: it cannot be reused
            return
        self.received = True
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(PollError("protocol", f"not a valid HTTP response ({exc})", exc))
            self.close()  # also after a complete response followed by junk: the stream is out of step

    def eof_received(self) -> bool | None:
        return None  # close the transport: connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.done is None or self.done.done():
            return
        if self.parser is not None and self.headers_done and not self.framed:
            self._complete()  # no Content-Length, not chunked: the body ends where the connection does
            return
        if not self.received:
            reason = f"{type(exc).__name__}: {exc}" if exc else "the server closed the connection"
            self._fail(PollError("truncated", f"connection closed before any response ({reason})", exc))
        else:
            self._fail(PollError("truncated", f"connection closed mid-response after {self.size} body bytes", exc))

    # -- httptools callbacks --------------------------------------------------------------------------
    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def on_headers_complete(self) -> None:
        self.headers_done = True
        self.framed = "content-length" in self.headers or "chunked" in self.headers.get("transfer-encoding", "")

    def on_body(self, data: bytes) -> None:
        self.size += len(data)
        if self.size > self.max_bytes:
            self._fail(PollError("too_large", f"response body is larger than the {self.max_bytes}-byte cap"))
            self.close()
            return
        self.chunks.append(data)

    def on_message_complete(self) -> None:
        assert self.parser is not None
        self.keep_alive = self.parser.should_keep_alive()  # llhttp forgets it once the message is done
        self._complete()

    # -- requests -------------------------------------------------------------------------------------
    def send(self, request: bytes, max_bytes: int) -> asyncio.Future[Response]:
        assert self.transport is not None
        self.parser = httptools.HttpResponseParser(self)
        self.headers = {}
        self.chunks = []
        self.size = 0
        self.max_bytes = max_bytes
        self.received = False
        self.framed = False
        self.headers_done = False
        self.keep_alive = False
        self.done = asyncio.get_running_loop().create_future()
        self.transport.write(request)
        return self.done

    @property
    def reusable(self) -> bool:
        return (
            not self.closed
            and self.parser is not None
            and self.done is not None
            and self.done.done()
            and not self.done.cancelled()
            and self.done.exception() is None
            and self.keep_alive
        )

    def _complete(self) -> None:
        if self.done is None or self.done.done() or self.parser is None:
            return
        received = time.monotonic()  # before the decode, as the bytes are complete
        body = b"".join(self.chunks)
        try:
            body = _decode(body, self.headers.get("content-encoding", ""), self.max_bytes)
        except PollError as exc:
            self.done.set_exception(exc)
            return
        self.done.set_result(Response(self.parser.get_status_code(), self.headers, body, received))

    def _fail(self, error: PollError) -> None:
        if self.done is not None and not self.done.done():
            self.done.set_exception(error)

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


def _decode(body: bytes, encoding: str, max_bytes: int) -> bytes:
    """We ask for identity; a body compressed anyway (gzip, deflate) is decoded, within the same cap."""
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        return body
    if encoding not in ("gzip", "x-gzip", "deflate"):
        raise PollError("protocol", f"the server sent Content-Encoding {encoding!r}, which this client cannot read")
    wbits = 47 if encoding != "deflate" else 15  # gzip or zlib header, detected
    try:
        inflater = zlib.decompressobj(wbits)
        out = inflater.decompress(body, max_bytes + 1)
    except zlib.error as exc:
        raise PollError("protocol", f"the {encoding} body could not be decoded ({exc})", exc) from None
    if len(out) > max_bytes:
        raise PollError("too_large", f"response body is larger than the {max_bytes}-byte cap (decompressed)")
    return out


def _header_value(value: str) -> str:
    if "\r" in value or "\n" in value:
        raise ValueError("a header value contains a line break")
    return value


class PollClient:
    """GETs with keep-alive connections per origin. One per engine, closed with `aclose`."""

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self.tls = tls
        self.idle: dict[tuple[str, str, int], deque[_Connection]] = {}
        self.targets: dict[tuple[str, tuple[tuple[str, str], ...]], _Target] = {}
        self.active: set[_Connection] = set()
        self.is_closed = False

    def _target(self, url: str, headers: dict[str, str] | None) -> _Target:
        key = (url, tuple(headers.items()) if headers else ())
        target = self.targets.get(key)
        if target is not None:
            return target
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise PollError("protocol", f"not an http(s) URL: {url!r}")
        port = parts.port or (443 if parts.scheme == "https" else 80)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        lines = [
            f"GET {_header_value(path)} HTTP/1.1",
            f"Host: {_header_value(parts.netloc.rpartition('@')[2])}",
            f"User-Agent: {USER_AGENT}",
            "Accept: */*",
            # identity: prometheus_client gzips /metrics when asked (SGLang, older vLLM), costing the
            # engine and this console CPU every poll for bytes that cross a LAN.
            "Accept-Encoding: identity",
        ]
        lines += [f"{_header_value(k)}: {_header_value(v)}" for k, v in (headers or {}).items()]
        target = _Target(parts.scheme, parts.hostname, port, ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        if len(self.targets) > 256:
            self.targets.clear()
        self.targets[key] = target
        return target

    async def _connect(self, target: _Target) -> _Connection:
        loop = asyncio.get_running_loop()
        tls = (self.tls or default_tls()) if target.scheme == "https" else None
        try:
            sock = await open_tcp(target.host, target.port)
            _, conn = await loop.create_connection(
                _Connection, sock=sock, ssl=tls, server_hostname=target.host if tls else None
            )
        except ssl.SSLError as exc:
            raise PollError("protocol", f"TLS failed: {exc}", exc) from None
        except OSError as exc:
            raise PollError("refused", str(exc), exc) from None
        return conn

    async def get(self, url: str, headers: dict[str, str] | None, max_bytes: int) -> Response:
        """One GET. The caller bounds the time (a cancelled GET closes its connection)."""
        if self.is_closed:
            raise PollError("protocol", "the client is closed")
        target = self._target(url, headers)
        origin = (target.scheme, target.host, target.port)
        idle = self.idle.get(origin)
        while idle:
            conn = idle.pop()
            if conn.closed:
                continue
            try:
                return await self._exchange(conn, target, origin, max_bytes)
            except PollError as exc:
                # A kept-alive connection the server closed meanwhile: retry once on a new one, as
                # browsers and httpx do. Anything that got an answer is not retried.
                if exc.kind != "truncated" or conn.received:
                    raise
        return await self._exchange(await self._connect(target), target, origin, max_bytes)

    async def _exchange(
        self, conn: _Connection, target: _Target, origin: tuple[str, str, int], max_bytes: int
    ) -> Response:
        self.active.add(conn)
        try:
            response = await conn.send(target.request, max_bytes)
        except BaseException:
            conn.close()
            raise
        finally:
            self.active.discard(conn)
        if conn.reusable and not self.is_closed:
            kept = self.idle.setdefault(origin, deque())
            kept.append(conn)
            while len(kept) > IDLE_KEPT:
                kept.popleft().close()
        else:
            conn.close()
        return response

    async def aclose(self) -> None:
        self.is_closed = True
        for kept in self.idle.values():
            for conn in kept:
                conn.close()
        self.idle.clear()
        for conn in list(self.active):
            conn.close()
