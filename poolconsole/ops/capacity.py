"""The engine's own KV-cache figures, read once for the fit check and `plan` (not on the poll path):
vLLM `vllm:cache_config_info` labels (kv_cache_size_tokens from 0.24, else num_gpu_blocks x block_size),
SGLang `max_total_num_tokens` (its metric, else /server_info), llama.cpp `/slots` n_ctx summed over slots."""

from __future__ import annotations

import json

from poolconsole.collect.auth import auth_headers
from poolconsole.collect.fetch import fetch
from poolconsole.collect.poll_client import PollClient
from poolconsole.collect.prom import ParseError, parse_exposition
from poolconsole.config.models import Engine, EngineKind, Settings
from poolconsole.ops.fit import KvCapacity


def _int(text: str | None) -> int | None:
    try:
        return int(float(text)) if text not in (None, "", "None") else None
    except ValueError:
        return None


def kv_from_metrics(body: bytes | str, kind: EngineKind) -> KvCapacity | None:
    try:
        samples = parse_exposition(body).samples
    except ParseError:
        return None
    for s in samples:
        if kind is EngineKind.VLLM and s.name == "vllm:cache_config_info":
            tokens = _int(s.label("kv_cache_size_tokens"))
            if tokens:
                return KvCapacity(tokens, f"vllm:cache_config_info kv_cache_size_tokens {tokens:,}")
            blocks, size = _int(s.label("num_gpu_blocks")), _int(s.label("block_size"))
            if blocks and size:
                return KvCapacity(
                    blocks * size, f"vllm:cache_config_info num_gpu_blocks {blocks:,} x block_size {size}"
                )
        if kind is EngineKind.SGLANG and s.name == "sglang:max_total_num_tokens" and s.value > 0:
            return KvCapacity(int(s.value), f"sglang:max_total_num_tokens {int(s.value):,}")
    return None


def kv_from_json(body: bytes | str, kind: EngineKind) -> KvCapacity | None:
    """SGLang /server_info, llama.cpp /slots."""
    try:
        doc = json.loads(body)
    except ValueError:
        return None
    if kind is EngineKind.SGLANG and isinstance(doc, dict):
        tokens = _int(str(doc.get("max_total_num_tokens")))
        return KvCapacity(tokens, f"/server_info max_total_num_tokens {tokens:,}") if tokens else None
    if kind is EngineKind.LLAMACPP and isinstance(doc, list):
        contexts = [_int(str(s.get("n_ctx"))) for s in doc if isinstance(s, dict)]
        known = [c for c in contexts if c]
        if known and len(known) == len(contexts):
            return KvCapacity(sum(known), f"/slots n_ctx {known[0]:,} x {len(known)} slot(s)")
    return None


async def engine_kv(engine: Engine, settings: Settings) -> KvCapacity | None:
    """None when the engine does not say (or does not answer)."""
    paths = {
        EngineKind.VLLM: ["/metrics"],
        EngineKind.SGLANG: ["/metrics", "/server_info"],
        EngineKind.LLAMACPP: ["/slots"],
    }.get(engine.kind, [])
    client = PollClient()
    try:
        for path in paths:
            got = await fetch(
                client,
                engine.url + path,
                timeout_s=settings.http_timeout_s,
                max_bytes=settings.max_body_bytes,
                headers=auth_headers(engine),
            )
            if not got.ok:
                continue
            read = kv_from_metrics if path == "/metrics" else kv_from_json
            found = read(got.body, engine.kind)
            if found is not None:
                return found
    finally:
        await client.aclose()
    return None
