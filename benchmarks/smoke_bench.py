"""Smoke accuracy and overhead benchmark (issue 6), run by hand: `python benchmarks/smoke_bench.py`.

A server with known timing (first token X ms after the request, then one token every Y ms) runs in a
child process; the smoke client measures it at several concurrency levels. Printed side by side:
measured TTFT and per-stream tok/s against the truth (target: within 3 % at 1 and 64), and how far the
client can go on one core before its own parsing distorts the timings (target >= 256 streams).
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import statistics
import sys
import time
from multiprocessing.connection import Connection
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


from poolconsole.ops.smoke.checks import STREAMS_PER_CLIENT, stream_client  # noqa: E402
from poolconsole.ops.smoke.stream import level_stats, stream_chat  # noqa: E402

FIRST_MS, EVERY_MS, TOKENS = 200.0, 20.0, 50


def serve(conn: Connection) -> None:
    from aiohttp import web

    async def chat(request: web.Request) -> web.StreamResponse:
        start = time.perf_counter()
        await request.read()
        first_sent: float | None = None
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for i in range(TOKENS):
            due = start + (FIRST_MS + i * EVERY_MS) / 1000
            await asyncio.sleep(max(0.0, due - time.perf_counter()))
            chunk = {"choices": [{"index": 0, "delta": {"content": f" t{i}"}, "finish_reason": None}]}
            await response.write(f"data: {json.dumps(chunk)}\n\n".encode())
            if first_sent is None:
                first_sent = time.perf_counter()
        last_sent = time.perf_counter()
        assert first_sent is not None
        usage = {"choices": [], "usage": {"prompt_tokens": 8, "completion_tokens": TOKENS, "total_tokens": 58},
                 "server": {"ttft_s": first_sent - start, "tps": (TOKENS - 1) / (last_sent - first_sent)}}
        await response.write(f"data: {json.dumps(usage)}\n\ndata: [DONE]\n\n".encode())
        return response

    async def main() -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", chat)

        async def ping(request: web.Request) -> web.Response:
            return web.Response(text="ok")

        app.router.add_get("/ping", ping)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, backlog=2048)
        await site.start()
        conn.send(runner.addresses[0][1])
        await asyncio.get_running_loop().run_in_executor(None, conn.recv)

    asyncio.run(main())


async def measure(url: str, concurrency: int) -> None:
    """Warm: the connections are open first (a smoke run's client reuses them after its models check),
    so TTFT is the request's own time; the cold figure adds the TCP connects of `concurrency` streams."""
    clients = [stream_client(120) for _ in range(max(1, -(-concurrency // STREAMS_PER_CLIENT)))]
    body = {"model": "m", "messages": [{"role": "user", "content": "x"}], "stream": True}
    ping = url.replace("/v1/chat/completions", "/ping")
    await asyncio.gather(*(clients[i % len(clients)].get(ping) for i in range(concurrency)))
    try:
        started = time.perf_counter()
        results = await asyncio.gather(
            *(stream_chat(clients[i % len(clients)], url, body, {}, 30, 120) for i in range(concurrency))
        )
        wall = time.perf_counter() - started
    finally:
        for client in clients:
            await client.aclose()
    stats = level_stats(list(results), wall)
    ok = sum(r.ok for r in results)
    true_ttft = FIRST_MS / 1000
    true_tps = 1000 / EVERY_MS
    ttft = stats.ttft["mean"] if stats.ttft else float("nan")
    tps = stats.tokens_per_s["per_stream"] if stats.tokens_per_s else float("nan")
    aggregate = (stats.tokens_per_s or {}).get("aggregate") or 0.0
    served = [r.last_event["server"] for r in results if r.ok and r.last_event and "server" in r.last_event]
    server_ttft = statistics.fmean(s["ttft_s"] for s in served) if served else float("nan")
    server_tps = statistics.median(s["tps"] for s in served) if served else float("nan")
    print(
        f"c={concurrency:4d}: {ok}/{concurrency} ok; TTFT mean {ttft * 1000:7.1f} ms vs {FIRST_MS:.0f} "
        f"({(ttft / true_ttft - 1) * 100:+5.1f}%); per-stream {tps:6.2f} tok/s vs {true_tps:.2f} "
        f"({(tps / true_tps - 1) * 100:+5.1f}%); aggregate {aggregate:7.1f} tok/s\n"
        f"        against what the server actually did (its own clock): TTFT {server_ttft * 1000:7.1f} ms "
        f"({(ttft / server_ttft - 1) * 100:+5.1f}%), per-stream {server_tps:6.2f} tok/s "
        f"({(tps / server_tps - 1) * 100:+5.1f}%)"
    )


async def main() -> None:
    parent, child = multiprocessing.Pipe()
    proc = multiprocessing.Process(target=serve, args=(child,), daemon=True)
    proc.start()
    url = f"http://127.0.0.1:{parent.recv()}/v1/chat/completions"
    print(f"server: first token after {FIRST_MS:.0f} ms, then one every {EVERY_MS:.0f} ms, {TOKENS} tokens")
    try:
        for level in (1, 64, 128, 256, 512):
            await measure(url, level)
    finally:
        parent.send("stop")
        proc.join(5)


if __name__ == "__main__":
    asyncio.run(main())
