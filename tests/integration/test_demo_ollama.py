"""Ollama residency on the demo pool: its simulated Ollama speaks /api/ps and /api/generate load / unload in
Ollama's formats; an unloaded model leaves /api/ps, a preloaded one appears with its keep-alive; both are
audited and refused read-only; the server's OLLAMA_KEEP_ALIVE / OLLAMA_NUM_PARALLEL come from its log over
SSH; and the model a client pinned with keep_alive -1 is pointed out."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from poolconsole.collect.ollama_server import read_server_settings
from poolconsole.collect.ssh import SSHPool
from poolconsole.config import PoolConfig, parse_config
from poolconsole.model import ollama as residency
from poolconsole.ops import audit
from poolconsole.ops.lifecycle import ActionRefused
from poolconsole.ops.ollama import OllamaContext, preload, unload
from poolconsole.runtime.live import LivePool
from poolconsole.sim.demo import SimPool

ENGINE = "embeddings"
NOMIC = "nomic-embed-text:latest"
PINNED = "mxbai-embed-large:latest"
SPARE = "snowflake-arctic-embed:latest"


@pytest.fixture
async def demo(tmp_path: Path) -> AsyncIterator[tuple[SimPool, PoolConfig]]:
    pool = SimPool(seed=7)
    await pool.start(tmp_path / "keys")
    try:
        await pool.wait_ready()
        yield pool, parse_config(pool.config_toml(), "demo.toml")
    finally:
        await pool.stop()


async def ps(url: str) -> dict[str, dict[str, object]]:
    async with httpx.AsyncClient(trust_env=False, timeout=5) as client:
        doc = (await client.get(url + "/api/ps")).json()
    return {m["name"]: m for m in doc["models"]}


async def test_unload_leaves_api_ps_and_preload_joins_it_audited(
    demo: tuple[SimPool, PoolConfig], tmp_path: Path
) -> None:
    _, config = demo
    engine = next(e for e in config.engines if e.name == ENGINE)
    before = await ps(engine.url)
    assert NOMIC in before and SPARE not in before
    first = before[NOMIC]
    assert set(first) >= {"name", "model", "size", "digest", "details", "expires_at", "size_vram", "context_length"}
    said: list[str] = []
    ctx = OllamaContext(tmp_path / "audit.db", said.append)

    outcome = await unload(ctx, engine, NOMIC)
    assert outcome.outcome == "ok", outcome.detail
    assert NOMIC not in await ps(engine.url)
    assert any('"keep_alive": 0' in line for line in said) and any('"done_reason":"unload"' in s for s in said)

    outcome = await preload(ctx, engine, SPARE, "10m")
    assert outcome.outcome == "ok", outcome.detail
    # an embedding model: Ollama refuses it on /api/generate, and it loads through /api/embed
    assert outcome.commands == [
        f'POST {engine.url}/api/generate {{"model": "{SPARE}", "keep_alive": "10m", "stream": false}}',
        f'POST {engine.url}/api/embed {{"model": "{SPARE}", "keep_alive": "10m"}}',
    ]
    assert any(f'"\\"{SPARE}\\" does not support generate"' in line for line in said), said
    loaded = (await ps(engine.url))[SPARE]
    expires = residency.parse_expiry(str(loaded["expires_at"]))
    assert expires is not None and 590 < expires - time.time() <= 600

    rows = audit.entries(tmp_path / "audit.db")
    assert [(r.action, r.outcome) for r in rows] == [("ollama preload", "ok"), ("ollama unload", "ok")]
    assert rows[1].commands == [
        f'POST {engine.url}/api/generate {{"model": "{NOMIC}", "keep_alive": 0, "stream": false}}'
    ]

    with pytest.raises(ActionRefused, match="read-only"):
        await unload(OllamaContext(tmp_path / "audit.db", said.append, read_only=True), engine, SPARE)
    assert SPARE in await ps(engine.url) and len(audit.entries(tmp_path / "audit.db")) == 2
    missing = await unload(ctx, engine, "no-such-model:latest")
    assert missing.outcome == "failed" and "HTTP 404" in missing.detail


async def test_server_settings_over_ssh_and_the_pinned_model_flagged(demo: tuple[SimPool, PoolConfig]) -> None:
    _, config = demo
    engine = next(e for e in config.engines if e.name == ENGINE)
    host = config.host(engine.host)
    assert host is not None
    ssh = SSHPool([host], 10, 2)
    try:
        server = await read_server_settings(ssh[host.name], engine)
    finally:
        await ssh.close()
    assert server.error is None, server.error
    assert (server.keep_alive_s, server.num_parallel) == (300.0, 4) and server.source.startswith("docker logs")

    live = LivePool(config)  # the runtime reads the same, and keeps the residency of each poll
    live.start(settle_gc=False)
    track = live.state.engines[ENGINE]
    try:
        deadline = time.monotonic() + 20
        while (track.ollama_server is None or track.residency is None) and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
    finally:
        await live.stop()
    assert track.ollama_server == server and track.residency is not None
    by_name = {r.name: r for r in residency.rows(track.residency, track.ollama_server, time.time())}
    assert set(by_name) == {NOMIC, PINNED, "jina/jina-embeddings-v2-base-en:latest"}
    assert by_name[NOMIC].override is None and by_name[NOMIC].vram_share == 1.0
    left = by_name[NOMIC].expires_in_s
    assert left is not None and 0 < left <= 300
    pinned = by_name[PINNED].override
    assert pinned is not None and "keep_alive -1" in pinned


async def test_a_preload_stopped_midway_is_audited_as_abandoned(
    demo: tuple[SimPool, PoolConfig], tmp_path: Path
) -> None:
    """The console quit while a preload ran: the audit keeps the request that was sent, and says it stopped."""
    _, config = demo
    engine = next(e for e in config.engines if e.name == ENGINE)
    said: list[str] = []
    task = asyncio.ensure_future(preload(OllamaContext(tmp_path / "audit.db", said.append), engine, SPARE, "5m"))
    for _ in range(200):  # until the request is out
        if said:
            break
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    [entry] = audit.entries(tmp_path / "audit.db")
    assert (entry.action, entry.outcome) == ("ollama preload", "abandoned")
    assert entry.detail.startswith("stopped after ") and f"whether /api/ps lists {SPARE} was not seen" in entry.detail
    assert entry.commands and "/api/generate" in entry.commands[0]
