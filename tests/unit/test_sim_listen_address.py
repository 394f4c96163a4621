"""The demo's engines log the address their host's `ss -ltnH` shows them bound to: an operator reading the
vLLM log next to the exposure audit saw "serving on 0.0.0.0" for an engine the audit called loopback-only."""

from __future__ import annotations

import asyncio
import re

from poolconsole.sim.demo import KEYLESS_ENGINE, SimPool

ADDRESS = re.compile(r"(?:http://|hostname: )(\d+\.\d+\.\d+\.\d+)(?::|, port: )(\d+)")


def logged_addresses(lines: list[str]) -> set[tuple[str, int]]:
    return {(m.group(1), int(m.group(2))) for line in lines for m in ADDRESS.finditer(line)}


def test_every_engine_logs_the_address_it_listens_on() -> None:
    async def run() -> dict[str, tuple[str, int, set[tuple[str, int]]]]:
        pool = SimPool("oom", seed=3)  # keys on: the key-less Ollama serves other machines (0.0.0.0)
        await pool.start()
        try:
            return {
                name: (e.listens_on, e.port, logged_addresses(e.log.select(None, None)))
                for name, e in pool.engines.items()
                if e.spec.kind in ("vllm", "llamacpp", "ollama")
            }
        finally:
            await pool.stop()

    seen = asyncio.run(run())
    assert seen[KEYLESS_ENGINE][0] == "0.0.0.0"
    kinds_logging = 0
    for name, (listens_on, port, logged) in seen.items():
        if logged:
            kinds_logging += 1
            assert logged == {(listens_on, port)}, name
    assert kinds_logging >= 3  # vLLM, llama.cpp and Ollama each name it
