"""What an engine says it runs with, read from the engine itself (not from hosts.toml): the conditions a
stored run is measured on (`engine_reported`), set beside the profile the audit log names so that a run
shows where the engine disagrees with its profile.

- vLLM: `vllm:cache_config_info` labels on /metrics (cache_dtype, gpu_memory_utilization,
  kv_cache_size_tokens, else num_gpu_blocks x block_size, enable_prefix_caching), whether its
  `vllm:spec_decode_*` counters exist (vLLM registers them only with a speculative config), and
  `/v1/models` max_model_len.
- SGLang: `/server_info` (older: `/get_server_info`), its ServerArgs with the scheduler's figures:
  context_length, quantization, kv_cache_dtype, max_running_requests, tp_size, speculative_algorithm,
  speculative_num_draft_tokens, mem_fraction_static, max_total_num_tokens.
- llama.cpp: `/props`: default_generation_settings.n_ctx (one slot's context), total_slots, model_ftype,
  default_generation_settings.params["speculative.types"].

Parsers are pure (bytes in, a dict of the fields found out; a field the engine does not report is None);
`read_reported` fetches what they need, each under the poll's timeout.
"""

from __future__ import annotations

import json
import math
from typing import Any

from poolconsole.collect.engines.kinds import adapter_named
from poolconsole.collect.prom import ParseError, parse_exposition

FIELDS = (
    "max_context",
    "max_num_seqs",
    "quantization",
    "kv_dtype",
    "tp_size",
    "spec_decoding",
    "spec_draft_tokens",
    "kv_cache_tokens",
    "gpu_memory_utilization",
    "prefix_caching",
)
"""The normalized vocabulary of `engine_reported`, whatever the engine calls them."""
_NONE = {"", "None", "none", "null"}


def _int(value: Any) -> int | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return int(number) if number.is_integer() else None


def _float(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return number if math.isfinite(number) else None  # NaN and Inf are unknown, never a value


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value not in _NONE else None


def _bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    return {"True": True, "true": True, "False": False, "false": False}.get(str(value))


def empty() -> dict[str, Any]:
    return dict.fromkeys(FIELDS)


def parse_vllm_metrics(body: bytes | str) -> dict[str, Any]:
    """The cache config labels and whether speculative decoding is configured (its counters exist)."""
    out = empty()
    samples = parse_exposition(body).samples
    info = next((s for s in samples if s.name == "vllm:cache_config_info"), None)
    if info is not None:
        out["kv_dtype"] = _str(info.label("cache_dtype"))
        out["gpu_memory_utilization"] = _float(info.label("gpu_memory_utilization"))
        tokens = _int(info.label("kv_cache_size_tokens"))
        blocks, size = _int(info.label("num_gpu_blocks")), _int(info.label("block_size"))
        out["kv_cache_tokens"] = tokens or (blocks * size if blocks and size else None)
        out["prefix_caching"] = _bool(info.label("enable_prefix_caching"))
    spec = any(s.name.startswith("vllm:spec_decode_num_drafts") for s in samples)
    out["spec_decoding"] = "on" if spec else "off"
    return out


def parse_vllm_models(body: bytes | str) -> int | None:
    """`/v1/models`: the first model's max_model_len."""
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError):  # RecursionError: nested too deeply
        raise ParseError("/v1/models: not valid JSON") from None
    data = doc.get("data") if isinstance(doc, dict) else None
    first = data[0] if isinstance(data, list) and data and isinstance(data[0], dict) else {}
    return _int(first.get("max_model_len"))


def parse_sglang_server_info(body: bytes | str) -> dict[str, Any]:
    """SGLang's server args and scheduler figures (`/server_info`)."""
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError):  # RecursionError: nested too deeply
        raise ParseError("/server_info: not valid JSON") from None
    if not isinstance(doc, dict):
        raise ParseError("/server_info: not a JSON object")
    out = empty()
    out["max_context"] = _int(doc.get("context_length"))
    out["max_num_seqs"] = _int(doc.get("max_running_requests"))
    out["quantization"] = _str(doc.get("quantization"))
    out["kv_dtype"] = _str(doc.get("kv_cache_dtype"))
    out["tp_size"] = _int(doc.get("tp_size"))
    if "speculative_algorithm" in doc:
        out["spec_decoding"] = _str(doc.get("speculative_algorithm")) or "off"
    out["spec_draft_tokens"] = _int(doc.get("speculative_num_draft_tokens")) if out["spec_decoding"] != "off" else None
    out["kv_cache_tokens"] = _int(doc.get("max_total_num_tokens"))
    out["gpu_memory_utilization"] = _float(doc.get("mem_fraction_static"))
    if "disable_radix_cache" in doc:
        out["prefix_caching"] = not bool(doc.get("disable_radix_cache"))
    return out


def parse_llamacpp_props(body: bytes | str) -> dict[str, Any]:
    """llama.cpp `/props`: one slot's context (what one request can use), the slots, the weights' file type
    and the speculative types (`none` without a draft)."""
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError):  # RecursionError: nested too deeply
        raise ParseError("/props: not valid JSON") from None
    if not isinstance(doc, dict):
        raise ParseError("/props: not a JSON object")
    out = empty()
    found = doc.get("default_generation_settings")
    settings: dict[str, Any] = found if isinstance(found, dict) else {}
    given = settings.get("params")
    params: dict[str, Any] = given if isinstance(given, dict) else {}
    out["max_context"] = _int(settings.get("n_ctx"))
    out["max_num_seqs"] = _int(doc.get("total_slots"))
    out["quantization"] = _str(doc.get("model_ftype"))
    spec = params.get("speculative.types")
    if isinstance(spec, str) and spec:
        out["spec_decoding"] = "off" if spec == "none" else spec
    if out["max_context"] and out["max_num_seqs"]:
        out["kv_cache_tokens"] = out["max_context"] * out["max_num_seqs"]
    return out


def models_context(body: bytes | str) -> dict[str, Any]:
    """/v1/models max_model_len as the context length (vLLM's, SGLang's)."""
    return {"max_context": parse_vllm_models(body)}


async def read_reported(kind: str, base_url: str, headers: dict[str, str], timeout_s: float = 5.0) -> dict[str, Any]:
    """`{fields..., "source": [paths read], "unknown": reason or None}`; never raises for an engine that does
    not answer: the reason says why nothing is known."""
    import httpx

    out: dict[str, Any] = {**empty(), "source": [], "unknown": None}
    found_kind = adapter_named(kind)
    if found_kind is None or not found_kind.reported:
        out["unknown"] = f"a {kind} engine does not report its configuration"
        return out
    async with httpx.AsyncClient(timeout=timeout_s, trust_env=False, headers=headers) as client:
        for path, parse in found_kind.reported:
            newer = found_kind.reported_older.get(path)
            if newer is not None and newer in out["source"]:
                continue
            if path in found_kind.reported_if_unknown and out["max_context"] is not None:
                continue
            try:
                got = await client.get(base_url.rstrip("/") + path)
            except httpx.HTTPError as exc:
                out["unknown"] = f"{path}: {type(exc).__name__}"
                continue
            if got.status_code != 200:
                out["unknown"] = f"{path} answered {got.status_code}"
                continue
            try:
                found = parse(got.content)
            except ParseError as exc:
                out["unknown"] = str(exc)
                continue
            out.update({k: v for k, v in found.items() if v is not None})
            out["source"].append(path)
    if out["source"]:
        out["unknown"] = None
    return out


# -- where the engine disagrees with its profile ---------------------------------------------------------
def _kv(value: str | None) -> str | None:
    if value is None:
        return None
    v = value.lower()
    if v.startswith("fp8"):
        return "fp8"
    return {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32", "float": "fp32"}.get(v, v)


def _quant(value: str) -> str:
    v = value.lower().replace("all ", "")
    for word, short in ((" - medium", "_m"), (" - small", "_s"), (" - large", "_l")):
        v = v.replace(word, short)
    return "".join(ch for ch in v if ch.isalnum())


def disagreements(profile: dict[str, Any], declared: set[str], reported: dict[str, Any]) -> list[dict[str, Any]]:
    """Each figure the profile declares (`declared`: the profile's fields set in hosts.toml) that the engine
    reports otherwise: {"field", "profile", "engine"}. A figure the engine does not report is not compared;
    a KV dtype the engine leaves to the model ("auto") disagrees only with a quantized KV cache declared."""
    out = []

    def differ(field: str, mine: Any, theirs: Any) -> None:
        out.append({"field": field, "profile": mine, "engine": theirs})

    pairs = (("max_model_len", "max_context"), ("max_num_seqs", "max_num_seqs"), ("tp_size", "tp_size"))
    for mine, theirs in pairs:
        if mine in declared and reported.get(theirs) is not None and profile.get(mine) != reported[theirs]:
            differ(mine, profile.get(mine), reported[theirs])
    kv = _kv(reported.get("kv_dtype"))
    if "kv_dtype" in declared and kv is not None and profile.get("kv_dtype") is not None:
        declared_kv = profile["kv_dtype"]
        if kv == "auto":
            if declared_kv in ("fp8", "q8_0", "q4_0"):
                differ("kv_dtype", declared_kv, reported["kv_dtype"])
        elif kv != declared_kv:
            differ("kv_dtype", declared_kv, reported["kv_dtype"])
    fmt, quant = profile.get("format"), reported.get("quantization")
    if fmt and quant:
        a, b = _quant(fmt), _quant(quant)
        if a and b and a not in b and b not in a:
            differ("quantization", fmt, quant)
    return out
