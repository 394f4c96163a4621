"""Smoke accuracy and overhead benchmark (issue 6), run by hand: `python benchmarks/smoke_bench.py`.

A server with known timing (first token X ms after the request arrives, then one token every Y ms;
tests/helpers/paced.py) runs in a child process; the smoke client (poolconsole.ops.smoke.stream on the
timed httpx client) measures it at rising concurrency on one event loop, one core. Printed side by side:

- against the nominal truth (X, 1000/Y): the target is within 3 % at 1 and 64 streams;
- against what happened on the wire, per request: the server writes its own clock (the monotonic clock
  this process shares) into each stream, so the first token's real delay after the client sent the
  request and the real decode rate are known even when the server itself falls behind. The client's
  ceiling is the most streams at which its figures stay within 3 % of these (target >= 256).

Each level runs twice: "plain" is httpx's own transport with events stamped when the read loop gets to
them (how the client worked before), "timed" is the smoke client (arrival stamped at the socket).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import statistics
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


from poolconsole.collect.tls import default_tls  # noqa: E402
from poolconsole.ops.smoke.checks import STARTING_AT_ONCE, STREAMS_PER_CLIENT, stream_client  # noqa: E402
from poolconsole.ops.smoke.stream import StreamResult, level_stats, stream_chat  # noqa: E402
from tests.helpers.paced import serve_forever  # noqa: E402

FIRST_S, EVERY_S, TOKENS = 0.200, 0.020, 50
LEVELS = [int(x) for x in os.environ.get("LEVELS", "1,64,128,256,384,512").split(",")]
TOLERANCE = 0.03


def pct(measured: float, truth: float) -> float:
    return (measured / truth - 1) * 100


def plain_client(total_s: float) -> httpx.AsyncClient:
    """httpx's own transport: events stamped when the read loop gets them (the comparison)."""
    limits = httpx.Limits(max_connections=STREAMS_PER_CLIENT, max_keepalive_connections=STREAMS_PER_CLIENT)
    return httpx.AsyncClient(
        timeout=httpx.Timeout(total_s, connect=10.0), trust_env=False, limits=limits, verify=default_tls()
    )


async def measure(url: str, concurrency: int, timed: bool) -> bool:
    """Warm: the connections are open first (a smoke run's client reuses them after its models check),
    so TTFT is the request's own time. True when the client's figures are within 3 % of the wire."""
    make = stream_client if timed else plain_client
    clients = [make(120) for _ in range(max(1, -(-concurrency // STREAMS_PER_CLIENT)))]
    body = {"model": "m", "messages": [{"role": "user", "content": "x"}], "stream": True}
    ping = url.replace("/v1/chat/completions", "/ping")
    await asyncio.gather(*(clients[i % len(clients)].get(ping) for i in range(concurrency)))
    try:
        starting = asyncio.Semaphore(STARTING_AT_ONCE) if timed else None
        started, cpu = time.perf_counter(), time.process_time()
        results: list[StreamResult] = list(
            await asyncio.gather(
                *(stream_chat(clients[i % len(clients)], url, body, {}, 30, 120, starting) for i in range(concurrency))
            )
        )
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    finally:
        for client in clients:
            await client.aclose()
    stats = level_stats(results, wall)
    good = [r for r in results if r.ok and r.last_event and "server" in r.last_event and r.ttft is not None]
    ttft = (stats.ttft or {}).get("mean") or float("nan")
    tps = (stats.tokens_per_s or {}).get("per_stream") or float("nan")
    aggregate = (stats.tokens_per_s or {}).get("aggregate") or float("nan")
    clock = [r.last_event["server"] for r in good if r.last_event]
    # TTFT counts from the request's start (its connect, when it opens one: none here, they are warm)
    wire_ttft = statistics.fmean(c["first"] - r.started_at for c, r in zip(clock, good, strict=True))
    intake = statistics.fmean(c["arrived"] - r.sent_at for c, r in zip(clock, good, strict=True))
    wire_tps = statistics.median((TOKENS - 1) / (c["last"] - c["first"]) for c in clock)
    stamp_lag = statistics.fmean(r.token_times[0] - c["first"] for c, r in zip(clock, good, strict=True))
    within = abs(pct(ttft, wire_ttft)) <= TOLERANCE * 100 and abs(pct(tps, wire_tps)) <= TOLERANCE * 100
    print(
        f"c={concurrency:4d} {'timed' if timed else 'plain'}: {len(good)}/{concurrency} ok, "
        f"client CPU {cpu / wall * 100:3.0f}% of one core, "
        f"aggregate {aggregate:7.0f} tok/s\n"
        f"   nominal: TTFT {ttft * 1000:6.1f} ms vs {FIRST_S * 1000:.0f} ({pct(ttft, FIRST_S):+5.1f}%), "
        f"per-stream {tps:5.2f} tok/s vs {1 / EVERY_S:.2f} ({pct(tps, 1 / EVERY_S):+5.1f}%)\n"
        f"   wire:    TTFT {ttft * 1000:6.1f} ms vs {wire_ttft * 1000:6.1f} ({pct(ttft, wire_ttft):+5.1f}%), "
        f"per-stream {tps:5.2f} tok/s vs {wire_tps:5.2f} ({pct(tps, wire_tps):+5.1f}%)  "
        f"{'within 3 %' if within else 'DISTORTED'}\n"
        f"   (server took the request {intake * 1000:.1f} ms after it was sent; the first token was stamped "
        f"{stamp_lag * 1000:+.2f} ms after the server wrote it)"
    )
    return within


async def main() -> None:
    parent, child = multiprocessing.Pipe()
    proc = multiprocessing.Process(target=serve_forever, args=(FIRST_S, EVERY_S, TOKENS, child), daemon=True)
    proc.start()
    url = f"http://127.0.0.1:{parent.recv()}/v1/chat/completions"
    print(
        f"server: first token {FIRST_S * 1000:.0f} ms after the request, then one every {EVERY_S * 1000:.0f} ms, "
        f"{TOKENS} tokens; {os.cpu_count()} cores shared by client and server"
    )
    ceiling = 0
    try:
        for level in LEVELS:
            await measure(url, level, timed=False)
            if await measure(url, level, timed=True):
                ceiling = max(ceiling, level)
    finally:
        proc.kill()
        proc.join(5)
    print(
        f"timed client ceiling on one event loop: {ceiling} concurrent streams within 3 % of the wire (target >= 256)"
    )


if __name__ == "__main__":
    asyncio.run(main())
