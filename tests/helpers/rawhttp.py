"""A tiny HTTP/1.1 server on loopback that serves canned responses, including broken ones.

Real engines are used wherever they run here; this server exists for what they cannot be made to do
on demand: hang, cut a body short, answer HTML, serve a held-back capture byte for byte.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Self


@dataclass
class Reply:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    mode: str = "normal"  # normal | hang | truncate | close | stall (half the body, then silence)

    @classmethod
    def file(
        cls,
        path: Path,
        content_type: str = "text/plain; version=0.0.4",
        *,
        status: int = 200,
        headers: dict[str, str] | None = None,
        delay_s: float = 0.0,
        mode: str = "normal",
    ) -> Reply:
        return cls(status, path.read_bytes(), {"Content-Type": content_type, **(headers or {})}, delay_s, mode)

    @classmethod
    def json(cls, text: str | bytes, status: int = 200) -> Reply:
        body = text.encode() if isinstance(text, str) else text
        return cls(status=status, body=body, headers={"Content-Type": "application/json"})


REASONS = {
    200: "OK",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
}


class RawHTTPServer:
    def __init__(self, routes: dict[str, Reply] | None = None) -> None:
        self.routes: dict[str, Reply] = dict(routes or {})
        self.server: asyncio.base_events.Server | None = None
        self.port = 0
        self.hits: dict[str, int] = {}

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> Self:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.server.wait_closed(), 1)

    def reply(self, path: str) -> Reply:
        """The reply to a request for `path` (a subclass can build it per request)."""
        return self.routes.get(path, Reply(404, b'{"error":"not found"}'))

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                request = await reader.readuntil(b"\r\n\r\n")
                path = request.split(b" ", 2)[1].decode().split("?")[0]
                length = 0
                for line in request.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                body = await reader.readexactly(length) if length else b""
                self.hits[path] = self.hits.get(path, 0) + 1
                if b'"stream":true' in body.replace(b" ", b"") and path + "#stream" in self.routes:
                    path += "#stream"  # a streaming request gets the streaming reply
                reply = self.reply(path)
                if reply.delay_s:
                    await asyncio.sleep(reply.delay_s)
                if reply.mode == "hang":
                    await asyncio.sleep(3600)
                if reply.mode == "close":
                    writer.close()
                    return
                length = len(reply.body)
                body = reply.body[: length // 2] if reply.mode in ("truncate", "stall") else reply.body
                head = [f"HTTP/1.1 {reply.status} {REASONS.get(reply.status, 'X')}", f"Content-Length: {length}"]
                head += [f"{k}: {v}" for k, v in reply.headers.items()]
                writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + body)
                await writer.drain()
                if reply.mode == "stall":
                    await asyncio.sleep(3600)
                if reply.mode == "truncate":
                    writer.close()
                    return
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            with contextlib.suppress(Exception):
                writer.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
