"""Pure parsers for the engines' JSON endpoints. Each raises ParseError (and only that) on bad input."""

from __future__ import annotations

import json
from typing import Any

from poolconsole.collect.prom import ParseError
from poolconsole.model.snapshots import OllamaModel, SlotsInfo


def load_json(body: bytes | str, what: str) -> Any:
    text = body.decode("utf-8", errors="replace") if isinstance(body, bytes) else body
    if text.lstrip().startswith("<"):
        raise ParseError(f"{what}: got an HTML page where JSON was expected")
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ParseError(f"{what}: not valid JSON ({exc})") from None
    except RecursionError:
        raise ParseError(f"{what}: JSON nested too deeply") from None


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def parse_models(body: bytes | str) -> tuple[str, ...]:
    """OpenAI `/v1/models` (vLLM, SGLang, llama.cpp, LiteLLM, any OpenAI-compatible server)."""
    data = load_json(body, "/v1/models")
    items = data.get("data") if isinstance(data, dict) else None
    if not isinstance(items, list):
        raise ParseError("/v1/models: no 'data' list in the answer")
    ids = [item.get("id") for item in items if isinstance(item, dict)]
    return tuple(i for i in ids if isinstance(i, str))


def parse_version(body: bytes | str) -> str | None:
    """vLLM `/version`, Ollama `/api/version`: {"version": "..."}."""
    data = load_json(body, "/version")
    version = data.get("version") if isinstance(data, dict) else None
    return version if isinstance(version, str) else None


def parse_props_build(body: bytes | str) -> str | None:
    """llama.cpp `/props` build_info, e.g. 'b1-0c1e570'."""
    data = load_json(body, "/props")
    build = data.get("build_info") if isinstance(data, dict) else None
    return build if isinstance(build, str) else None


def parse_slots(body: bytes | str) -> SlotsInfo:
    """llama.cpp `/slots`: busy slots, an estimate of KV fill (tokens held / context per slot) and the
    tokens the requests in progress have generated so far."""
    data = load_json(body, "/slots")
    if not isinstance(data, list):
        raise ParseError("/slots: expected a JSON array of slots")
    total = busy = ctx_total = ctx_used = 0
    decoded: int | None = None
    for slot in data:
        if not isinstance(slot, dict):
            raise ParseError("/slots: a slot is not an object")
        total += 1
        n_ctx = _int(slot.get("n_ctx")) or 0
        ctx_total += max(n_ctx, 0)
        if slot.get("is_processing") is True:
            busy += 1
            used = _int(slot.get("n_prompt_tokens")) or 0
            tokens = slot.get("next_token")
            first = tokens[0] if isinstance(tokens, list) and tokens else tokens
            n_decoded = _int(first.get("n_decoded")) if isinstance(first, dict) else None
            if n_decoded is not None and n_decoded >= 0:
                used += n_decoded
                decoded = (decoded or 0) + n_decoded
            ctx_used += min(max(used, 0), n_ctx) if n_ctx > 0 else max(used, 0)
    return SlotsInfo(total, busy, ctx_total, ctx_used, decoded)


def parse_ollama_ps(body: bytes | str) -> tuple[OllamaModel, ...]:
    """Ollama `/api/ps`: models loaded now; size vs size_vram tells partial CPU offload."""
    data = load_json(body, "/api/ps")
    items = data.get("models") if isinstance(data, dict) else None
    if not isinstance(items, list):
        raise ParseError("/api/ps: no 'models' list in the answer")
    out: list[OllamaModel] = []
    for item in items:
        if not isinstance(item, dict):
            continue
        name = item.get("name") or item.get("model")
        if not isinstance(name, str):
            continue
        details = item.get("details") if isinstance(item.get("details"), dict) else {}
        quant = details.get("quantization_level") if isinstance(details, dict) else None
        expires = item.get("expires_at")
        out.append(
            OllamaModel(
                name=name,
                size_bytes=_int(item.get("size")),
                size_vram_bytes=_int(item.get("size_vram")),
                context_length=_int(item.get("context_length")),
                expires_at=expires if isinstance(expires, str) else None,
                quantization=quant if isinstance(quant, str) else None,
            )
        )
    return tuple(out)


def parse_ollama_tags(body: bytes | str) -> tuple[str, ...]:
    """Ollama `/api/tags`: models on disk."""
    data = load_json(body, "/api/tags")
    items = data.get("models") if isinstance(data, dict) else None
    if not isinstance(items, list):
        raise ParseError("/api/tags: no 'models' list in the answer")
    names = [item.get("name") or item.get("model") for item in items if isinstance(item, dict)]
    return tuple(n for n in names if isinstance(n, str))


def parse_litellm_liveliness(body: bytes | str) -> bool:
    """LiteLLM `/health/liveliness`: the JSON string "I'm alive!"."""
    data = load_json(body, "/health/liveliness")
    return isinstance(data, str) and "alive" in data.lower()


def parse_litellm_readiness(body: bytes | str) -> dict[str, str]:
    """LiteLLM `/health/readiness`: {"status": "healthy", "db": "..."}."""
    data = load_json(body, "/health/readiness")
    if not isinstance(data, dict) or not isinstance(data.get("status"), str):
        raise ParseError("/health/readiness: no 'status' in the answer")
    return {k: str(v) for k, v in data.items() if isinstance(v, str | int | float | bool)}


def parse_litellm_health(body: bytes | str) -> dict[str, Any]:
    """LiteLLM `/health` (spends tokens): healthy and unhealthy deployments."""
    data = load_json(body, "/health")
    if not isinstance(data, dict):
        raise ParseError("/health: expected an object")

    def endpoints(key: str) -> list[dict[str, str]]:
        items = data.get(key)
        if not isinstance(items, list):
            return []
        out = []
        for item in items:
            if isinstance(item, dict):
                error = item.get("error")
                out.append(
                    {
                        "model": str(item.get("model", "")),
                        "api_base": str(item.get("api_base", "")),
                        "error": str(error).splitlines()[0][:200] if error else "",
                    }
                )
        return out

    return {"healthy": endpoints("healthy_endpoints"), "unhealthy": endpoints("unhealthy_endpoints")}
