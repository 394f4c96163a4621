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
    kinds: dict[str, str] = {}

    async def run() -> dict[str, tuple[str, int, set[tuple[str, int]]]]:
        pool = SimPool("oom", seed=3)  # keys on: the key-less Ollama serves other machines (0.0.0.0)
        await pool.start()
        try:
            kinds.update({name: e.spec.kind for name, e in pool.engines.items()})
            return {
                name: (e.listens_on, e.port, logged_addresses(e.log.select(None, None)))
                for name, e in pool.engines.items()
                if e.spec.kind in ("vllm", "llamacpp", "ollama")
            }
        finally:
            await pool.stop()

    seen = asyncio.run(run())
    assert seen[KEYLESS_ENGINE][0] == "0.0.0.0"
    assert seen[KEYLESS_ENGINE][2] == {("0.0.0.0", seen[KEYLESS_ENGINE][1])}  # OLLAMA_HOST in its server config
    logging_kinds = set()
    for name, (listens_on, port, logged) in seen.items():
        assert logged == {(listens_on, port)}, name
        logging_kinds.add(kinds[name])
    assert logging_kinds == {"vllm", "llamacpp", "ollama"}
