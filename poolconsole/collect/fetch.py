"""HTTP GET that never raises: every failure comes back as data with a reason in words."""

from __future__ import annotations

import asyncio
import errno
import socket
import time
from dataclasses import dataclass, field
from enum import StrEnum
from urllib.parse import urlsplit

from poolconsole.collect.poll_client import PollClient, PollError


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
        if exc.kind == "refused":
            return done(None, b"", {}, Failure.REFUSED, connect_reason(exc.cause or exc, address_of(url)))
        return done(None, b"", {}, Failure(exc.kind), str(exc))
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
