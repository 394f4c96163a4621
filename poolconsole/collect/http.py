"""HTTP on the poll path, in one module: the keep-alive client (aiohttp, the maintained asyncio HTTP client)
and `fetch`, the GET that never raises, with the failure kinds both speak.

A console polls every engine every second with the same few GETs. aiohttp does the HTTP/1.1 framing,
keep-alive, decompression and TLS; PollClient only bounds a body, stamps the sample's time and turns
aiohttp's exceptions into a PollError of one Failure; `fetch` turns that, a timeout or an HTTP status into
data with a reason in words. One client (one aiohttp session, one connection pool) per engine, created on
the first GET inside the running loop. benchmarks/collect_bench.py measures it side by side with httpx and
with the hand-written client it replaced (issue 14: 0.03 ms against aiohttp's ~0.1 ms of CPU per 56 KiB
GET did not pay for owning HTTP framing).

Smoke tests, actions and anything that streams or posts use httpx (collect.smoke_transport)."""

from __future__ import annotations

import asyncio
import errno
import socket
import ssl
import time
from dataclasses import dataclass, field
from enum import StrEnum
from urllib.parse import urlsplit

from poolconsole.collect.tls import default_tls, import_aiohttp

import_aiohttp()  # first: aiohttp without the CA loads of its two default contexts, never used here (collect.tls)
import aiohttp  # noqa: E402


class Failure(StrEnum):
    REFUSED = "refused"
    TIMEOUT = "timeout"
    AUTH = "auth"
    NOT_FOUND = "not_found"
    CLIENT_ERROR = "client_error"
    SERVER_ERROR = "server_error"
    TOO_LARGE = "too_large"
    TRUNCATED = "truncated"
    PROTOCOL = "protocol"


USER_AGENT = "poolconsole"
IDLE_KEPT = 8
"""Connections per origin: more than the paths one poll asks of an engine at once (llama.cpp's five), so no
GET waits for a connection between its stamp and its request."""
READ_CHUNK = 1 << 16


class PollError(Exception):
    """A GET that produced no usable response: its failure, its words, and the exception under it."""

    def __init__(self, kind: Failure | str, message: str, cause: BaseException | None = None) -> None:
        super().__init__(message)
        self.kind = Failure(kind)
        self.cause = cause


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    headers: dict[str, str]
    """Lower-case names; a repeated header keeps its last value."""
    body: bytes
    sampled: float
    """time.monotonic() when the request went out: the sample's time, as Prometheus stamps a scrape by its
    start. A busy event loop that resumes the caller late, a slow parse or a slower sibling GET does not
    move it."""
    completed: float
    """time.monotonic() when the whole body had been read (the GET's latency ends here)."""


def _header_value(value: str) -> str:
    if "\r" in value or "\n" in value:
        raise ValueError("a header value contains a line break")
    return value


class PollClient:
    """GETs with keep-alive connections. One per engine, closed with `aclose`."""

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self.tls = tls
        """The context https GETs are verified with; None: the system's CA store (collect.tls.default_tls),
        loaded at the first https GET. aiohttp's own defaults are never used."""
        self.session: aiohttp.ClientSession | None = None
        self.is_closed = False

    def _session(self) -> aiohttp.ClientSession:
        if self.session is None:
            connector = aiohttp.TCPConnector(
                limit=0,
                limit_per_host=IDLE_KEPT,
                enable_cleanup_closed=False,
            )
            self.session = aiohttp.ClientSession(
                connector=connector,
                headers={"User-Agent": USER_AGENT, "Accept": "*/*", "Accept-Encoding": "identity"},
                # identity: prometheus_client gzips /metrics when asked (SGLang, older vLLM), costing the
                # engine and this console CPU every poll for bytes that cross a LAN.
                skip_auto_headers=("Accept-Encoding",),
                timeout=aiohttp.ClientTimeout(total=None),  # the caller bounds the time
                trust_env=False,
                auto_decompress=True,
                raise_for_status=False,
            )
        return self.session

    async def get(self, url: str, headers: dict[str, str] | None, max_bytes: int) -> Response:
        """One GET. The caller bounds the time (a cancelled GET closes its connection)."""
        if self.is_closed:
            raise PollError(Failure.PROTOCOL, "the client is closed")
        if headers:
            headers = {_header_value(k): _header_value(v) for k, v in headers.items()}
        if url[:6].lower() == "https:" and self.tls is None:
            self.tls = await asyncio.to_thread(default_tls)  # the system's CA store, off the event loop, once
        # The sample's time. On a kept-alive connection aiohttp writes the request in this same turn of the
        # event loop (no await in between suspends), so this is when it went out; on a new connection it
        # is early by the connect's round trip, for the first poll after a reconnect only. aiohttp retries
        # a GET once itself when a kept-alive connection turns out closed.
        sampled = time.monotonic()
        try:
            tls = self.tls or True  # True: plain http, where aiohttp makes no TLS context of it
            async with self._session().get(url, headers=headers, allow_redirects=False, ssl=tls) as response:
                body = await _read(response, max_bytes)
                status, got = response.status, {k.lower(): v for k, v in response.headers.items()}
        except PollError:
            raise
        except aiohttp.InvalidURL as exc:
            raise PollError(Failure.PROTOCOL, f"not an http(s) URL: {url!r}", exc) from None
        except aiohttp.ClientConnectorCertificateError as exc:
            raise PollError(Failure.PROTOCOL, f"TLS failed: {exc.certificate_error}", exc) from None
        except aiohttp.ClientConnectorSSLError as exc:
            raise PollError(Failure.PROTOCOL, f"TLS failed: {exc.os_error}", exc) from None
        except aiohttp.ClientConnectorError as exc:
            raise PollError(Failure.REFUSED, str(exc.os_error), exc.os_error) from None
        except aiohttp.ClientResponseError as exc:  # a status line or header aiohttp cannot parse
            raise PollError(Failure.PROTOCOL, f"not a valid HTTP response ({exc.message})", exc) from None
        except aiohttp.ClientPayloadError as exc:
            raise PollError(
                Failure.TRUNCATED, f"connection closed mid-response ({_payload_reason(exc)})", exc
            ) from None
        except aiohttp.ServerDisconnectedError as exc:
            raise PollError(
                Failure.TRUNCATED, "connection closed before any response (the server closed it)", exc
            ) from None
        except aiohttp.ClientOSError as exc:
            raise PollError(Failure.TRUNCATED, f"connection lost: {exc}", exc) from None
        except aiohttp.ClientError as exc:
            raise PollError(Failure.PROTOCOL, f"{type(exc).__name__}: {exc}", exc) from None
        return Response(status, got, body, sampled, time.monotonic())

    async def aclose(self) -> None:
        self.is_closed = True
        if self.session is not None:
            await self.session.close()


async def _read(response: aiohttp.ClientResponse, max_bytes: int) -> bytes:
    """The body, at most `max_bytes` after decompression; more closes the connection."""
    declared = response.content_length
    if declared is not None and "content-encoding" not in response.headers:
        if declared > max_bytes:
            response.close()
            raise PollError(Failure.TOO_LARGE, f"response body is larger than the {max_bytes}-byte cap")
        body = await response.read()  # the common case: one read of a declared, uncompressed length
        if len(body) < declared and response.status not in (204, 304):
            # aiohttp raises first when the connection closes early; a body shorter than it said is a cut
            # page whatever the library makes of it (issue 35: a cut page whose last line parsed had read ok)
            response.close()
            raise PollError(
                Failure.TRUNCATED, f"connection closed mid-response (received {len(body)} of {declared} bytes)"
            )
        return body
    chunks: list[bytes] = []
    size = 0
    encoded = " (decompressed)" if "content-encoding" in response.headers else ""
    while chunk := await response.content.read(READ_CHUNK):
        size += len(chunk)
        if size > max_bytes:
            response.close()
            raise PollError(Failure.TOO_LARGE, f"response body is larger than the {max_bytes}-byte cap{encoded}")
        chunks.append(chunk)
    return b"".join(chunks)


def _payload_reason(exc: aiohttp.ClientPayloadError) -> str:
    """aiohttp's own words for a cut or malformed body, e.g. "Not enough data to satisfy content length
    header (received 9 of 100 bytes)", without its wrapping."""
    cause = exc.__cause__ or exc.__context__ or exc
    text = getattr(cause, "message", None) or str(cause)
    return " ".join(str(text).split()).removeprefix("400, message: ")


@dataclass(frozen=True)
class Fetched:
    """The outcome of one GET: a body, or a failure with its reason."""

    url: str
    status: int | None
    body: bytes
    elapsed_s: float
    headers: dict[str, str] = field(default_factory=dict)
    failure: Failure | None = None
    error: str | None = None
    sampled_monotonic: float | None = None
    """time.monotonic() when the request went out (None when no response came): the time of the sample it
    carries, as Prometheus stamps a scrape by its start; a busy event loop resumes the caller later."""

    @property
    def ok(self) -> bool:
        return self.failure is None


def address_of(url: str) -> str | None:
    """`host:port` of `url` (the scheme's port when it names none), for the words of a failed connect."""
    try:
        parts = urlsplit(url)
        port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    except ValueError:
        return None
    host = parts.hostname
    if not host:
        return None
    host = f"[{host}]" if ":" in host else host
    return f"{host}:{port}" if port else host


def connect_reason(exc: BaseException, address: str | None = None) -> str:
    """The root cause of a failed connect, in words (the OS error under the connect failure), naming
    `address` (host:port) when given."""
    seen: BaseException | None = exc
    to = f" to {address}" if address else ""
    while seen is not None:
        if isinstance(seen, ConnectionRefusedError) or (isinstance(seen, OSError) and seen.errno == errno.ECONNREFUSED):
            if address:
                return f"connection refused by {address} (is the engine running and listening on that port?)"
            return "connection refused (is the engine running and listening on this port?)"
        if isinstance(seen, socket.gaierror):
            host = address.rsplit(":", 1)[0] + " " if address else ""
            return f"host name {host}does not resolve ({seen.strerror})"
        if isinstance(seen, OSError) and seen.errno is not None:
            return f"cannot connect{to}: {seen.strerror or seen}"
        seen = seen.__cause__ or seen.__context__
    return f"cannot connect{to}: {exc}"


def _summarise(body: bytes, limit: int = 160) -> str:
    text = body.decode("utf-8", errors="replace").strip()
    if text.lower().startswith(("<!doctype", "<html")):
        return "an HTML page"
    text = " ".join(text.split())
    return text[:limit] + ("..." if len(text) > limit else "")


async def fetch(
    client: PollClient,
    url: str,
    *,
    timeout_s: float,
    max_bytes: int,
    headers: dict[str, str] | None = None,
) -> Fetched:
    """GET `url` with an overall deadline and a body cap. Never raises for network or HTTP problems."""
    start = time.monotonic()

    def done(
        status: int | None,
        body: bytes,
        hdrs: dict[str, str],
        failure: Failure | None,
        error: str | None,
        sampled: float | None = None,
        completed: float | None = None,
    ) -> Fetched:
        end = time.monotonic() if completed is None else completed  # latency to the whole body
        return Fetched(url, status, body, end - start, hdrs, failure, error, sampled)

    try:
        async with asyncio.timeout(timeout_s):
            response = await client.get(url, headers, max_bytes)
    except TimeoutError:
        return done(None, b"", {}, Failure.TIMEOUT, f"no answer within {timeout_s:g} s")
    except PollError as exc:
        if exc.kind is Failure.REFUSED:
            return done(None, b"", {}, Failure.REFUSED, connect_reason(exc.cause or exc, address_of(url)))
        return done(None, b"", {}, exc.kind, str(exc))
    except (OSError, ValueError) as exc:
        return done(None, b"", {}, Failure.PROTOCOL, f"{type(exc).__name__}: {exc}")
    status, body, hdrs = response.status, response.body, response.headers
    stamps = (response.sampled, response.completed)
    if status in (401, 403):
        return done(
            status,
            body,
            hdrs,
            Failure.AUTH,
            f"HTTP {status}: authentication required or refused (set api_key_env for this engine): {_summarise(body)}",
            *stamps,
        )
    if status == 404:
        return done(status, body, hdrs, Failure.NOT_FOUND, f"HTTP 404 for {urlsplit(url).path}", *stamps)
    if 400 <= status < 500:
        return done(status, body, hdrs, Failure.CLIENT_ERROR, f"HTTP {status}: {_summarise(body)}", *stamps)
    if status >= 500:
        return done(status, body, hdrs, Failure.SERVER_ERROR, f"HTTP {status}: {_summarise(body)}", *stamps)
    if not 200 <= status < 300:
        return done(status, body, hdrs, Failure.PROTOCOL, f"unexpected HTTP {status}", *stamps)
    return done(status, body, hdrs, None, None, *stamps)
