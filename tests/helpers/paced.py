"""An OpenAI-style streaming server with known timing, for the smoke accuracy test and benchmark.

Each streamed chat request gets its first token `first_s` after the request arrived, then one every `every_s`,
then a usage event and [DONE]. It is a bare asyncio protocol (HTTP/1.1, keep-alive, chunked bodies)
so that hundreds of streams cost it little and its own queue does not blur the truth it stands for;
every stream's last event carries the server's clock (time.perf_counter, the system-wide monotonic
clock on Linux, so a client in another process can compare): when the request arrived, when the first
and the last token were written. It also lists its one model and answers chat and completions
without streaming, so that a whole `poolconsole smoke` run can be pointed at it."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import ssl
import threading
import time
from collections.abc import Iterator
from typing import Any

MODEL = "paced"

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
PONG = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok"
MISSING = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"


def _chunk(payload: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(payload), payload)


class PacedProtocol(asyncio.Protocol):
    def __init__(self, first_s: float, every_s: float, tokens: int) -> None:
        self.first_s, self.every_s, self.tokens = first_s, every_s, tokens
        self.buffer = b""
        self.transport: asyncio.Transport | None = None
        self.busy = False
        self.count = tokens

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        arrived = time.perf_counter()
        self.buffer += data
        while not self.busy:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buffer[:end].decode("latin-1").split("\r\n")
            length = 0
            for line in head[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            if len(self.buffer) < end + 4 + length:
                return
            body = self.buffer[end + 4 : end + 4 + length]
            self.buffer = self.buffer[end + 4 + length :]
            method, path, _ = head[0].split(" ", 2)
            self._answer(method, path, json.loads(body) if body else {}, arrived)

    def _answer(self, method: str, path: str, request: dict[str, Any], arrived: float) -> None:
        assert self.transport is not None
        if method == "GET" and path == "/ping":
            self.transport.write(PONG)
        elif method == "GET" and path == "/v1/models":
            self._json(
                {"object": "list", "data": [{"id": MODEL, "object": "model", "created": 0, "owned_by": "paced"}]}
            )
        elif method == "POST" and path == "/v1/chat/completions" and request.get("stream"):
            self.busy = True
            self.count = min(self.tokens, int(request.get("max_tokens") or self.tokens))
            self.transport.write(HEAD)
            self._later(0, arrived, None)
        elif method == "POST" and path in ("/v1/chat/completions", "/v1/completions"):
            count = min(self.tokens, int(request.get("max_tokens") or self.tokens))
            text = "".join(f" t{i}" for i in range(count))
            choice: dict[str, Any] = {"index": 0, "finish_reason": "length"}
            if path.endswith("chat/completions"):
                choice["message"] = {"role": "assistant", "content": text}
            else:
                choice["text"] = text
            usage = {"prompt_tokens": 8, "completion_tokens": count, "total_tokens": 8 + count}
            kind = "chat.completion" if "message" in choice else "text_completion"
            self._json(
                {"id": "paced", "object": kind, "created": 0, "model": MODEL, "choices": [choice], "usage": usage}
            )
        else:
            self.transport.write(MISSING)

    def _json(self, document: dict[str, Any]) -> None:
        assert self.transport is not None
        body = json.dumps(document).encode()
        head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)
        self.transport.write(head + body)

    def _token(self, index: int, arrived: float, first: float | None) -> None:
        if self.transport is None or self.transport.is_closing():
            return
        event = {"choices": [{"index": 0, "delta": {"content": f" t{index}"}, "finish_reason": None}]}
        self.transport.write(_chunk(b"data: " + json.dumps(event).encode() + b"\n\n"))
        now = time.perf_counter()
        first = now if first is None else first
        if index + 1 < self.count:
            self._later(index + 1, arrived, first)
            return
        clock = {"arrived": arrived, "first": first, "last": now}
        usage = {
            "choices": [],
            "usage": {"prompt_tokens": 8, "completion_tokens": self.count, "total_tokens": 8 + self.count},
            "server": clock,
        }
        self.transport.write(_chunk(b"data: " + json.dumps(usage).encode() + b"\n\ndata: [DONE]\n\n") + b"0\r\n\r\n")
        self.busy = False
        if self.buffer:
            self.data_received(b"")

    def _later(self, index: int, arrived: float, first: float | None) -> None:
        """Token `index` at its due time, counted from the request's arrival (lateness does not add up)."""
        loop = asyncio.get_running_loop()
        due = arrived + self.first_s + index * self.every_s
        loop.call_at(loop.time() + max(0.0, due - time.perf_counter()), self._token, index, arrived, first)

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None


async def start_paced(
    first_s: float, every_s: float, tokens: int, port: int = 0, ssl_context: ssl.SSLContext | None = None
) -> asyncio.Server:
    """Listening on 127.0.0.1 (`server.sockets[0].getsockname()[1]` is the port), over TLS if given a context."""
    loop = asyncio.get_running_loop()
    return await loop.create_server(
        lambda: PacedProtocol(first_s, every_s, tokens), "127.0.0.1", port, backlog=4096, ssl=ssl_context
    )


def serve_forever(first_s: float, every_s: float, tokens: int, ready: object) -> None:
    """For a child process: serves until killed, sending its port down the `ready` connection."""

    async def main() -> None:
        server = await start_paced(first_s, every_s, tokens)
        ready.send(server.sockets[0].getsockname()[1])  # type: ignore[attr-defined]
        await asyncio.Event().wait()

    asyncio.run(main())


@contextlib.contextmanager
def paced_in_thread(first_s: float, every_s: float, tokens: int) -> Iterator[int]:
    """The server on its own event loop in a thread (so that blocking the test's loop does not stop it);
    yields the port."""
    loop = asyncio.new_event_loop()
    started: concurrent.futures.Future[asyncio.Server] = concurrent.futures.Future()

    def run() -> None:
        asyncio.set_event_loop(loop)
        server = loop.run_until_complete(start_paced(first_s, every_s, tokens))
        started.set_result(server)
        loop.run_forever()
        server.close()
        loop.run_until_complete(server.wait_closed())
        loop.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield started.result(10).sockets[0].getsockname()[1]
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
