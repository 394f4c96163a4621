"""The engine's own KV-cache figures, read once for the fit check and `plan` (not on the poll path). Where
each kind states them (vLLM's vllm:cache_config_info labels, SGLang's max_total_num_tokens, llama.cpp's
/slots n_ctx summed over slots) is its adapter's (collect/engines/kinds/)."""

from __future__ import annotations

import json

from poolconsole.collect.auth import auth_headers
from poolconsole.collect.engines.kinds import Capability, adapter
from poolconsole.collect.http import PollClient, fetch
from poolconsole.collect.prom import ParseError, parse_exposition
from poolconsole.config.models import Engine, EngineKind, Settings
from poolconsole.ops.fit import KvCapacity


def kv_from_metrics(body: bytes | str, kind: EngineKind) -> KvCapacity | None:
    try:
        samples = parse_exposition(body).samples
    except ParseError:
        return None
    found = adapter(kind).kv_from_samples(samples)
    return KvCapacity(*found) if found is not None else None


def kv_from_json(body: bytes | str, kind: EngineKind) -> KvCapacity | None:
    """A JSON endpoint among the kind's kv_paths (SGLang /server_info, llama.cpp /slots)."""
    try:
        doc = json.loads(body)
    except ValueError:
        return None
    found = adapter(kind).kv_from_json(doc)
    return KvCapacity(*found) if found is not None else None


async def engine_kv(engine: Engine, settings: Settings) -> KvCapacity | None:
    """None when the engine does not say (or does not answer)."""
    kind = adapter(engine.kind)
    paths = kind.kv_paths if Capability.KV_CAPACITY in kind.capabilities else ()
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
