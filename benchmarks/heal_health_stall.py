"""Does a real llama-server answer /health while generation stalls for a caller? (issue 38)

Run by hand: `python benchmarks/heal_health_stall.py [tokens, default 450]`.

One slot (`-np 1`, one thread) and the tests' 100 MB random model (about 20-200 tokens/s here): request A
generates `tokens` tokens; request B, sent 1 s later, waits behind it. Every 2 s: /health (status, time),
/slots?fail_on_no_slot=1, and /metrics' requests_processing, requests_deferred and tokens_predicted_total.
B's first token comes only when A ends, while /health answers 200 throughout; and tokens_predicted_total
does not move until a request ends, so to the `stalled` rule a long generation reads as no progress.
(`kill -STOP` is the other wedge: it stops the HTTP threads too, so /health does not answer at all.)
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.helpers.engines import llama_server_binary, model_path  # noqa: E402
from tests.helpers.rawhttp import free_port  # noqa: E402

SERIES = ("requests_processing", "requests_deferred", "tokens_predicted_total")


async def probe(url: str, tokens: int) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=600, trust_env=False) as c:
        for _ in range(300):
            try:
                if (await c.get("/health")).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            await asyncio.sleep(0.2)
        t0 = time.monotonic()
        body = {"prompt": "hello", "n_predict": tokens, "ignore_eos": True}
        long = asyncio.create_task(c.post("/completion", json=body))
        await asyncio.sleep(1.0)
        first: list[float] = []

        async def queued() -> None:
            async with c.stream("POST", "/completion", json={"prompt": "hi", "n_predict": 8, "stream": True}) as r:
                async for line in r.aiter_lines():
                    if line.startswith("data:") and not first:
                        first.append(time.monotonic() - t0)

        behind = asyncio.create_task(queued())
        while not long.done():
            sent = time.monotonic()
            health = await c.get("/health")
            took = (time.monotonic() - sent) * 1000
            page = (await c.get("/metrics")).text
            slots = await c.get("/slots", params={"fail_on_no_slot": 1})
            found = {k: re.search(rf"^llamacpp:{k} (\S+)", page, re.M) for k in SERIES}
            read = {k: m.group(1) if m else "n/a" for k, m in found.items()}
            print(
                f"{time.monotonic() - t0:5.1f} s  /health {health.status_code} in {took:.0f} ms; "
                f"/slots?fail_on_no_slot=1 {slots.status_code}; {read}; B's first token: "
                f"{'not yet' if not first else f'{first[0]:.1f} s'}",
                flush=True,
            )
            await asyncio.sleep(2.0)
        speed = (await long).json()["timings"]["predicted_per_second"]
        await behind
        print(f"A ended at {time.monotonic() - t0:.1f} s ({speed:.0f} tokens/s); B's first token at {first[0]:.1f} s")


def main() -> None:
    tokens = int(sys.argv[1]) if len(sys.argv) > 1 else 450
    medium = model_path("medium", ctx=4096, embd=512, ff=1376, heads=8, kv_heads=8, layers=8)
    port = free_port()
    log = Path(tempfile.mkdtemp(prefix="pc-health-stall-")) / "llama-server.log"
    cmd = [llama_server_binary(), "-m", str(medium), "--host", "127.0.0.1", "--port", str(port), "--metrics"]
    cmd += ["-np", "1", "-c", "4096", "-t", "1"]
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        asyncio.run(probe(f"http://127.0.0.1:{port}", tokens))
    finally:
        proc.terminate()
        proc.wait(30)


if __name__ == "__main__":
    main()
