"""A vLLM engine's HTTP face as its own process, for tests that stop and start "the engine": /health, /metrics
(the real vLLM 0.32 CPU capture, idle), /v1/models and /version, on 127.0.0.1 at the port given.

    python -m tests.helpers.tiny_engine PORT"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx
from aiohttp import web

VLLM = Path(__file__).resolve().parents[1] / "fixtures" / "real" / "vllm-0.32.0-cpu"


def app() -> web.Application:
    metrics = (VLLM / "metrics.idle.txt").read_bytes()
    models = (VLLM / "v1_models.json").read_bytes()
    version = (VLLM / "version.json").read_bytes()

    async def health(_: web.Request) -> web.Response:
        return web.Response(body=b"")

    def serve(body: bytes, content_type: str) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def handler(_: web.Request) -> web.Response:
            return web.Response(body=body, content_type=content_type)

        return handler

    application = web.Application()
    application.router.add_get("/health", health)
    application.router.add_get("/metrics", serve(metrics, "text/plain"))
    application.router.add_get("/v1/models", serve(models, "application/json"))
    application.router.add_get("/version", serve(version, "application/json"))
    return application


class TinyEngine:
    """The process, started and stopped by the test; always on the same port."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        root = Path(__file__).resolve().parents[2]
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.helpers.tiny_engine", str(self.port)], cwd=root)
        deadline = time.monotonic() + 60
        while True:
            assert self.proc.poll() is None, "the tiny engine exited"
            try:
                if httpx.get(f"{self.url}/health", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "the tiny engine did not answer in 60 s"
            time.sleep(0.1)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(30)
        self.proc = None


if __name__ == "__main__":
    web.run_app(app(), host="127.0.0.1", port=int(sys.argv[1]), print=None, access_log=None)
