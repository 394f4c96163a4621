"""Collect benchmark (issue 2), run by hand: `python benchmarks/collect_bench.py`.

1. Parse cost per series of a large vLLM data-parallel /metrics page (a real capture replicated over
   ranks), prometheus_client's parser plus the normalisation.
2. CPU per GET of a vLLM /metrics page on a keep-alive connection: httpx (the client the smoke tests
   use), the poll client (collect.http, on aiohttp), the never-raising fetch over it, and the
   hand-written client it replaced (benchmarks/handwritten_client.py), side by side against one server.
3. One concurrent poll of 64 vLLM endpoints on loopback with injected latency, one of which never
   answers: the time for every live endpoint's poll to finish, divided by the slowest live endpoint's
   injected latency (target <= 1.2), measured side by side in one run.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import random
import statistics
import sys
import time
from multiprocessing.connection import Connection
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.handwritten_client import PollClient as HandwrittenClient  # noqa: E402
from poolconsole.collect.engines import specs  # noqa: E402
from poolconsole.collect.engines.mapping import parse_metrics  # noqa: E402
from poolconsole.collect.engines.page_memo import PageMemo  # noqa: E402
from poolconsole.collect.engines.poll import EnginePoller  # noqa: E402
from poolconsole.collect.http import PollClient, fetch  # noqa: E402
from poolconsole.collect.prom import parse_exposition  # noqa: E402
from poolconsole.config.models import Engine, EngineKind, Settings  # noqa: E402
from poolconsole.sim.vllm_dp import dp_payload  # noqa: E402
from tests.helpers.rawhttp import RawHTTPServer, Reply  # noqa: E402

CAPTURE = ROOT / "tests/fixtures/real/vllm-0.32.0-cpu"


def bench_parse(ranks: int = 16, repeat: int = 5) -> None:
    page = dp_payload((CAPTURE / "metrics.after.txt").read_text(), ranks)
    series = sum(1 for ln in page.splitlines() if ln and not ln.startswith("#"))
    times, full, fast = [], [], []
    memo = PageMemo()
    parse_metrics(page, specs.VLLM, memo)  # the first poll of an engine: the careful read
    for _ in range(repeat):
        start = time.perf_counter()
        parse_metrics(page, specs.VLLM, memo)
        fast.append(time.perf_counter() - start)
        start = time.perf_counter()
        metrics, _, _ = parse_metrics(page, specs.VLLM)
        times.append(time.perf_counter() - start)
        start = time.perf_counter()
        parse_exposition(page)
        full.append(time.perf_counter() - start)
    best, best_full = min(times), min(full)
    print(
        f"parse: {ranks} DP ranks, {series} series, {len(page) / 1024:.0f} KiB: collector "
        f"{best * 1000:.1f} ms (median {statistics.median(times) * 1000:.1f}), {best / series * 1e6:.1f} us/series; "
        f"whole page through prometheus_client {best_full * 1000:.1f} ms: selection is "
        f"{best_full / best:.1f}x cheaper (ranks seen: {len(metrics.ranks)}); the same layout again, as "
        f"an engine's next poll: {min(fast) * 1000:.2f} ms ({best / min(fast):.1f}x cheaper than the careful read)"
    )


def _serve(endpoints: int, delays: list[float], conn: Connection, dead_last: bool = True) -> None:
    """Child process: the 64 endpoints, so their CPU is not charged to the poller's event loop."""
    metrics = (CAPTURE / "metrics.load.txt").read_bytes()
    models = (CAPTURE / "v1_models.json").read_bytes()

    async def main() -> None:
        servers = []
        for i in range(endpoints):
            mode = "hang" if dead_last and i == endpoints - 1 else "normal"
            delay = delays[i]
            routes = {
                "/health": Reply(200, b"", delay_s=delay, mode=mode),
                "/metrics": Reply(200, metrics, {"Content-Type": "text/plain"}, delay_s=delay, mode=mode),
                "/v1/models": Reply(200, models, {"Content-Type": "application/json"}, delay_s=delay, mode=mode),
                "/version": Reply(200, b'{"version":"0.32.0"}', delay_s=delay, mode=mode),
            }
            servers.append(await RawHTTPServer(routes).start())
        conn.send([s.url for s in servers])
        await asyncio.get_running_loop().run_in_executor(None, conn.recv)

    asyncio.run(main())


async def bench_get(requests: int = 2000) -> None:
    """CPU per keep-alive GET of one /metrics page, the three clients side by side, interleaved twice."""
    parent, child = multiprocessing.Pipe()
    proc = multiprocessing.Process(target=_serve, args=(1, [0.0], child, False), daemon=True)
    proc.start()
    url = parent.recv()[0] + "/metrics"
    cpu: dict[str, float] = {}
    sizes: dict[str, int] = {}
    try:
        httpx_client = httpx.AsyncClient(trust_env=False, headers={"Accept-Encoding": "identity"})
        poll_client = PollClient()
        handwritten = HandwrittenClient()

        async def with_httpx() -> bytes:
            return (await httpx_client.get(url)).content

        async def with_poll_client() -> bytes:
            return (await poll_client.get(url, None, 1 << 24)).body

        async def with_fetch() -> bytes:
            return (await fetch(poll_client, url, timeout_s=5.0, max_bytes=1 << 24)).body

        async def with_handwritten() -> bytes:
            return (await handwritten.get(url, None, 1 << 24)).body

        clients = (
            ("httpx", with_httpx),
            ("poll client (aiohttp)", with_poll_client),
            ("fetch over it", with_fetch),
            ("hand-written", with_handwritten),
        )
        for label, get in clients * 2:
            await get()  # connection up
            start = time.process_time()
            for _ in range(requests):
                sizes[label] = len(await get())
            cpu[label] = (time.process_time() - start) / requests  # the second round wins: warm
        await httpx_client.aclose()
        await poll_client.aclose()
        await handwritten.aclose()
    finally:
        parent.send("stop")
        proc.join(5)
    base = cpu["poll client (aiohttp)"]
    shown = ", ".join(f"{label} {cpu[label] * 1e3:.3f} ms ({cpu[label] / base:.2f}x)" for label, _ in clients)
    print(
        f"GET /metrics ({sizes['httpx'] / 1024:.0f} KiB, keep-alive, {requests} in a row): CPU per GET {shown}; "
        f"same bytes: {len(set(sizes.values())) == 1}. At 32 engines polled each second the difference "
        f"between aiohttp and the hand-written client is "
        f"{(base - cpu['hand-written']) * 32 * 100:.2f} % of one core."
    )


async def bench_poll(endpoints: int = 64, seed: int = 7) -> None:
    rng = random.Random(seed)
    delays = [rng.uniform(0.2, 1.0) for _ in range(endpoints)]
    latencies = delays[:-1]
    parent, child = multiprocessing.Pipe()
    proc = multiprocessing.Process(target=_serve, args=(endpoints, delays, child), daemon=True)
    proc.start()
    urls = parent.recv()
    settings = Settings(http_timeout_s=3.0)
    pollers = [
        EnginePoller(Engine(name=f"e{i}", kind=EngineKind.VLLM, url=u), settings=settings) for i, u in enumerate(urls)
    ]
    try:
        for label in ("cold (new connections)", "warm (keep-alive)"):
            start = time.perf_counter()
            tasks = [asyncio.create_task(p.poll()) for p in pollers]
            live, dead = tasks[:-1], tasks[-1]
            await asyncio.gather(*live)
            live_cycle = time.perf_counter() - start
            dead_snapshot = await dead
            full_cycle = time.perf_counter() - start
            states = {t.result().state.value for t in live}
            print(
                f"poll {label}: {endpoints} endpoints, slowest live latency {max(latencies) * 1000:.0f} ms, "
                f"all live done in {live_cycle * 1000:.0f} ms -> ratio {live_cycle / max(latencies):.2f} "
                f"(target <= 1.2); live states {sorted(states)}; the dead one reported "
                f"'{dead_snapshot.state.value}' after {full_cycle:.2f} s ({dead_snapshot.error})"
            )
    finally:
        for p in pollers:
            await p.aclose()
        parent.send("stop")
        proc.join(5)


if __name__ == "__main__":
    bench_parse(1)
    bench_parse(4)
    bench_parse(16)
    bench_parse(64)
    asyncio.run(bench_get())
    asyncio.run(bench_poll())
