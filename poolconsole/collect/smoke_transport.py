"""Arrival times taken at the socket, under httpx.

httpx parses and delivers a streamed body when the client's event loop gets to it; with hundreds of
streams on one core that queue, not the server, would show up in every timestamp. This httpcore network
backend records when the bytes arrived before any HTTP parsing, and a stream remembers when the bytes it
last handed to httpcore arrived; the smoke reader stamps each SSE event with that time.

Plain TCP on Linux reads with recvmsg and SO_TIMESTAMPNS: the kernel's own receive time of the last
packet read, so a busy client loop does not move it. TLS connections (and other systems) note the time
when the event loop hands the decrypted bytes over. Everything else (HTTP/1.1, chunked bodies, TLS,
pooling, timeouts, errors) is httpx and httpcore's own."""

from __future__ import annotations

import asyncio
import platform
import socket
import ssl
import struct
import sys
import time
from collections import deque
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import aiohappyeyeballs
import httpcore
import httpx

from poolconsole.collect.tls import default_tls

if TYPE_CHECKING:
    from httpcore._backends.base import SOCKET_OPTION

HIGH_WATER = 1 << 20
"""Bytes buffered before the socket stops being read (the kernel buffers the rest)."""
READ_SIZE = 1 << 16

# SO_TIMESTAMPNS (asm-generic value; Python's socket module does not name it), with a 64-bit timespec.
_KERNEL_STAMPS = sys.platform == "linux" and platform.machine() in {"x86_64", "aarch64", "ppc64le", "s390x", "riscv64"}
SO_TIMESTAMPNS = 35
_TIMESPEC = struct.Struct("@qq")
_CMSG_SPACE = socket.CMSG_SPACE(_TIMESPEC.size)

SocketOptions = Iterable["SOCKET_OPTION"]


class _Inbox:
    """Bytes as they arrived, each piece with its arrival time (time.perf_counter's clock)."""

    def __init__(self) -> None:
        self.pieces: deque[tuple[float, bytes]] = deque()
        self.buffered = 0
        self.closed = False
        self.error: Exception | None = None
        self.waiter: asyncio.Future[None] | None = None

    def push(self, arrived: float, data: bytes) -> None:
        self.pieces.append((arrived, data))
        self.buffered += len(data)
        self.wake()

    def close(self, error: Exception | None) -> None:
        self.closed = True
        self.error = self.error or error
        self.wake()

    def wake(self) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    async def take(self, max_bytes: int, timeout: float | None) -> tuple[float, bytes]:
        if not self.pieces and not self.closed:
            self.waiter = asyncio.get_running_loop().create_future()
            try:
                async with asyncio.timeout(timeout):
                    await self.waiter
            except TimeoutError as exc:
                raise httpcore.ReadTimeout(f"nothing received for {timeout:g} s") from exc
            finally:
                self.waiter = None
        if not self.pieces:
            if self.error is not None:
                raise httpcore.ReadError(str(self.error) or type(self.error).__name__)
            return time.perf_counter(), b""
        arrived, data = self.pieces[0]
        if len(data) > max_bytes:
            self.pieces[0] = (arrived, data[max_bytes:])
            data = data[:max_bytes]
        else:
            self.pieces.popleft()
        self.buffered -= len(data)
        return arrived, data


class TimedStream(httpcore.AsyncNetworkStream):
    """One connection; `arrived` is when the bytes it last handed to the HTTP parser reached this host."""

    def __init__(self) -> None:
        self.inbox = _Inbox()
        self.arrived = time.perf_counter()

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        self.arrived, data = await self.inbox.take(max_bytes, timeout)
        self.drained()
        return data

    def drained(self) -> None:
        """Called after each read: a stream that stopped reading at HIGH_WATER may start again."""

    def is_readable(self) -> bool:
        """An idle keep-alive connection with data or EOF waiting has been closed by the server."""
        return bool(self.inbox.pieces) or self.inbox.closed


class SocketStream(TimedStream):
    """Plain TCP read with recvmsg, each read stamped with the kernel's receive time where it gives one."""

    def __init__(self, sock: socket.socket) -> None:
        super().__init__()
        self.sock = sock
        self.loop = asyncio.get_running_loop()
        self.stamps = False
        if _KERNEL_STAMPS:
            try:
                sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
                self.stamps = True
            except OSError:
                pass
        self.reading = True
        self.loop.add_reader(sock.fileno(), self._readable)

    def _readable(self) -> None:
        try:
            data, ancillary, _, _ = self.sock.recvmsg(READ_SIZE, _CMSG_SPACE if self.stamps else 0)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._stop_reading()
            self.inbox.close(exc)
            return
        now = time.perf_counter()
        if not data:
            self._stop_reading()
            self.inbox.close(None)
            return
        arrived = now
        for level, kind, value in ancillary:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(value) >= _TIMESPEC.size:
                seconds, nanos = _TIMESPEC.unpack_from(value)
                # The kernel's clock is the wall clock; its lag behind "now" carries over to perf_counter.
                lag = time.time() - (seconds + nanos / 1e9)
                arrived = now - min(max(lag, 0.0), 60.0)
        self.inbox.push(arrived, data)
        if self.inbox.buffered > HIGH_WATER:
            self._stop_reading()

    def _stop_reading(self) -> None:
        if self.reading:
            self.loop.remove_reader(self.sock.fileno())
            self.reading = False

    def drained(self) -> None:
        if not self.reading and not self.inbox.closed and self.inbox.buffered < HIGH_WATER // 4:
            self.loop.add_reader(self.sock.fileno(), self._readable)
            self.reading = True

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        try:
            async with asyncio.timeout(timeout):
                await self.loop.sock_sendall(self.sock, buffer)
        except TimeoutError as exc:
            raise httpcore.WriteTimeout(f"could not send for {timeout:g} s") from exc
        except OSError as exc:
            raise httpcore.WriteError(str(exc) or type(exc).__name__) from exc

    async def aclose(self) -> None:
        self._stop_reading()
        self.inbox.close(None)
        self.sock.close()

    async def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.AsyncNetworkStream:
        """TLS goes through an asyncio transport; its bytes are stamped when the loop hands them over."""
        self._stop_reading()
        tls = TlsStream()
        try:
            async with asyncio.timeout(timeout):
                plain, _ = await self.loop.create_connection(lambda: _Receiver(tls), sock=self.sock)
                upgraded = await self.loop.start_tls(
                    plain, plain.get_protocol(), ssl_context, server_hostname=server_hostname
                )
        except TimeoutError as exc:
            self.sock.close()
            raise httpcore.ConnectTimeout(f"TLS handshake took over {timeout:g} s") from exc
        except (OSError, ssl.SSLError) as exc:
            self.sock.close()
            raise httpcore.ConnectError(str(exc) or type(exc).__name__) from exc
        if upgraded is None:
            raise httpcore.ConnectError("the connection closed during the TLS handshake")
        tls.transport = upgraded
        return tls

    def get_extra_info(self, info: str) -> Any:
        if info == "is_readable":
            return self.is_readable()
        return {
            "socket": lambda: self.sock,
            "client_addr": self.sock.getsockname,
            "server_addr": self.sock.getpeername,
        }.get(info, lambda: None)()


class _Receiver(asyncio.Protocol):
    def __init__(self, stream: TlsStream) -> None:
        self.stream = stream
        self.writable: asyncio.Future[None] | None = None

    def data_received(self, data: bytes) -> None:
        self.stream.inbox.push(time.perf_counter(), data)
        if self.stream.inbox.buffered > HIGH_WATER and self.stream.transport is not None:
            self.stream.transport.pause_reading()

    def eof_received(self) -> None:
        self.stream.inbox.close(None)

    def connection_lost(self, exc: Exception | None) -> None:
        self.stream.inbox.close(exc)
        self.resume_writing()

    def pause_writing(self) -> None:
        self.writable = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self.writable is not None and not self.writable.done():
            self.writable.set_result(None)
        self.writable = None


class TlsStream(TimedStream):
    def __init__(self) -> None:
        super().__init__()
        self.transport: asyncio.Transport | None = None

    def drained(self) -> None:
        if self.transport is not None and self.inbox.buffered < HIGH_WATER // 4 and not self.transport.is_reading():
            self.transport.resume_reading()

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if self.transport is None or self.inbox.closed:
            raise httpcore.WriteError("the connection is closed")
        self.transport.write(buffer)
        receiver = self.transport.get_protocol()
        waiting = receiver.writable if isinstance(receiver, _Receiver) else None
        if waiting is not None:
            try:
                async with asyncio.timeout(timeout):
                    await waiting
            except TimeoutError as exc:
                raise httpcore.WriteTimeout(f"could not send for {timeout:g} s") from exc

    async def aclose(self) -> None:
        if self.transport is not None:
            self.transport.close()

    async def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("TLS inside TLS (an HTTPS proxy) is not supported by the smoke client")

    def get_extra_info(self, info: str) -> Any:
        if info == "is_readable":
            return self.is_readable()
        names = {"client_addr": "sockname", "server_addr": "peername", "ssl_object": "ssl_object", "socket": "socket"}
        return self.transport.get_extra_info(names[info]) if self.transport is not None and info in names else None


HAPPY_EYEBALLS_S = 0.25


async def open_tcp(host: str, port: int, local_address: str | None = None) -> socket.socket:
    """A connected TCP socket with TCP_NODELAY, for the smoke client and the poll client alike. Happy
    eyeballs (RFC 8305, as anyio does under httpx; uvloop's create_connection has none): an address
    family that hangs (an IPv6 route to nowhere) costs 250 ms, not the whole connect timeout."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    local = await loop.getaddrinfo(local_address, 0, type=socket.SOCK_STREAM) if local_address else None
    sock = await aiohappyeyeballs.start_connection(
        infos, local_addr_infos=local, happy_eyeballs_delay=HAPPY_EYEBALLS_S, interleave=1
    )
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


class TimedBackend(httpcore.AsyncNetworkBackend):
    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: SocketOptions | None = None,
    ) -> httpcore.AsyncNetworkStream:
        try:
            async with asyncio.timeout(timeout):
                sock = await open_tcp(host, port, local_address)
        except TimeoutError as exc:
            raise httpcore.ConnectTimeout(f"no connection to {host}:{port} within {timeout:g} s") from exc
        except OSError as exc:
            raise httpcore.ConnectError(str(exc) or type(exc).__name__) from exc
        for option in socket_options or ():
            sock.setsockopt(*option)
        return SocketStream(sock)

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: SocketOptions | None = None
    ) -> httpcore.AsyncNetworkStream:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.setblocking(False)
        try:
            async with asyncio.timeout(timeout):
                await asyncio.get_running_loop().sock_connect(sock, path)
        except TimeoutError as exc:
            sock.close()
            raise httpcore.ConnectTimeout(f"no connection to {path} within {timeout:g} s") from exc
        except OSError as exc:
            sock.close()
            raise httpcore.ConnectError(str(exc) or type(exc).__name__) from exc
        return SocketStream(sock)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


KEEPALIVE_S = 2.0
"""How long the smoke client keeps an idle connection."""


def timed_client(total_s: float, connections: int, verify: ssl.SSLContext | None = None) -> httpx.AsyncClient:
    """An httpx client whose connections are TimedStreams (the smoke client): httpx's transport with its
    pool replaced by one with the same settings on TimedBackend (httpx's transport takes no network
    backend)."""
    tls = verify or default_tls()
    transport = httpx.AsyncHTTPTransport(verify=tls, trust_env=False)
    transport._pool = httpcore.AsyncConnectionPool(
        ssl_context=tls,
        max_connections=connections,
        max_keepalive_connections=connections,
        # Below the engines' own idle timeout (5 s in llama.cpp's httplib and in uvicorn under vLLM, SGLang
        # and LiteLLM): a connection kept as long as the server keeps it is sometimes reused just as the
        # server closes it, and that request fails with 'Server disconnected without sending a response'.
        keepalive_expiry=KEEPALIVE_S,
        network_backend=TimedBackend(),
    )
    return httpx.AsyncClient(transport=transport, timeout=httpx.Timeout(total_s, connect=10.0), trust_env=False)
