"""OpenAI-compatible responses of the simulated engines: chat and completions, JSON and SSE, tool calls,
embeddings; chunk shapes follow the real vLLM and llama.cpp captures."""

from __future__ import annotations

import hashlib
import json
import math
import random
import time
import uuid
from typing import Any

WORDS = [
    "the",
    "pool",
    "serves",
    "tokens",
    "fast",
    "and",
    "the",
    "queue",
    "stays",
    "short",
    "while",
    "memory",
    "holds",
    "every",
    "cache",
    "line",
    "engine",
    "node",
    "request",
    "stream",
    "model",
    "gpu",
    "ready",
    "warm",
    "slot",
    "prefix",
    "batch",
    "decode",
    "prefill",
]


def words(seed: str, n: int) -> list[str]:
    rng = random.Random(seed)
    return [(" " if i else "") + rng.choice(WORDS) for i in range(n)]


def prompt_tokens(body: dict[str, Any]) -> int:
    text = json.dumps(body.get("messages") or body.get("prompt") or "")
    return max(1, len(text) // 4)


DRAFT_ACCEPTANCE = {"code": 0.74, "json": 0.66, "summarize": 0.58, "chat": 0.22}
"""The simulated draft model's acceptance by what a request asks for: a draft guesses code, structured
output and summaries (which copy from the prompt) far better than open conversation."""


def draft_acceptance(body: dict[str, Any]) -> float:
    """The acceptance a request gets from the simulated draft, by the kind of prompt it sends."""
    text = json.dumps(body.get("messages") or body.get("prompt") or "").lower()
    if "def " in text or "```" in text:
        return DRAFT_ACCEPTANCE["code"]
    if "json" in text:
        return DRAFT_ACCEPTANCE["json"]
    if "summar" in text:
        return DRAFT_ACCEPTANCE["summarize"]
    return DRAFT_ACCEPTANCE["chat"]


def max_tokens(body: dict[str, Any], default: int = 64) -> int:
    value = body.get("max_completion_tokens") or body.get("max_tokens") or default
    return max(1, min(int(value), 4096)) if isinstance(value, int | float) else default


def tool_call_for(body: dict[str, Any]) -> dict[str, Any] | None:
    """A well-formed call of the first declared tool (or the one `tool_choice` names), its arguments a JSON string
    that satisfies the tool's parameters schema (`value_for_schema`), in the OpenAI shape vLLM answers."""
    tools = body.get("tools")
    choice = body.get("tool_choice", "auto")
    if not isinstance(tools, list) or not tools or choice == "none":
        return None
    tool = tools[0]
    if isinstance(choice, dict):
        wanted = choice.get("function", {}).get("name")
        tool = next((t for t in tools if t.get("function", {}).get("name") == wanted), tool)
    function = tool.get("function", {}) if isinstance(tool, dict) else {}
    args = value_for_schema(_dict(_dict(function).get("parameters")))
    return {
        "id": f"chatcmpl-tool-{uuid.uuid4().hex[:16]}",
        "type": "function",
        "function": {
            "name": function.get("name", "tool"),
            "arguments": json.dumps(args if isinstance(args, dict) else {}),
        },
    }


def json_content_for(body: dict[str, Any]) -> str | None:
    """The answer's content under `response_format` (None: free text): for json_schema a value that satisfies
    the schema (`value_for_schema`), for json_object an object, as an engine's guided decoding gives."""
    fmt = body.get("response_format")
    if not isinstance(fmt, dict):
        return None
    if fmt.get("type") == "json_schema":
        schema = _dict(_dict(fmt.get("json_schema")).get("schema"))
        return json.dumps(value_for_schema(schema or {"type": "object"}))
    if fmt.get("type") == "json_object":
        return json.dumps({"answer": "Paris"})
    return None


_DEFAULTS: dict[str, Any] = {"string": "Paris", "integer": 3, "number": 21.5, "boolean": True, "null": None}


def value_for_schema(schema: dict[str, Any], depth: int = 0) -> Any:
    """A minimal value that satisfies a JSON schema: an object's required properties (all of them where it names
    none), type-appropriate leaves within their bounds, the first of an enum, a const, the first branch of
    anyOf/oneOf. Patterns and $refs are not followed (the simulated model answers plain values there)."""
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        branches = [b for b in schema.get(key) or [] if isinstance(b, dict) and b.get("type") != "null"]
        if branches:
            return value_for_schema(branches[0], depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind is None:
        kind = "object" if "properties" in schema else "array" if "items" in schema else "string"
    if kind == "object":
        props = _dict(schema.get("properties"))
        required = schema.get("required")
        names = [n for n in required if isinstance(n, str)] if isinstance(required, list) else list(props)
        if depth > 8:
            return {}
        return {n: value_for_schema(_dict(props.get(n)), depth + 1) for n in names}
    if kind == "array":
        items = _dict(schema.get("items"))
        wanted = schema.get("minItems", 1) if schema.get("maxItems", 1) else 0
        return [value_for_schema(items, depth + 1) for _ in range(int(wanted) if depth <= 8 else 0)]
    if kind in ("integer", "number"):
        return _number(schema, kind)
    if kind == "string":
        text = str(_DEFAULTS["string"])
        low, high = int(schema.get("minLength", 0)), schema.get("maxLength")
        text = text.ljust(low, "s")
        return text[: int(high)] if isinstance(high, int) else text
    return _DEFAULTS.get(str(kind), "Paris")


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _number(schema: dict[str, Any], kind: str) -> int | float:
    value: float = _DEFAULTS[kind]
    low, high = schema.get("minimum"), schema.get("maximum")
    ex_low, ex_high = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
    step = 1 if kind == "integer" else 0.5
    if isinstance(low, int | float) and value < low:
        value = low
    if isinstance(ex_low, int | float) and value <= ex_low:
        value = ex_low + step
    if isinstance(high, int | float) and value > high:
        value = high
    if isinstance(ex_high, int | float) and value >= ex_high:
        value = ex_high - step
    return math.ceil(value) if kind == "integer" else float(value)


class Style:
    """Where the engines differ in their OpenAI answers."""

    def __init__(self, kind: str, fingerprint: str) -> None:
        self.kind = kind
        self.fingerprint = fingerprint

    def chunk(
        self, cid: str, model: str, created: int, delta: dict[str, Any], finish: str | None = None, **extra: Any
    ) -> dict[str, Any]:
        choice: dict[str, Any] = {"index": 0, "delta": delta, "finish_reason": finish}
        if self.kind == "vllm":
            choice["logprobs"] = None
        out = {
            "id": cid,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [choice],
            **extra,
        }
        if self.kind != "vllm":
            out["system_fingerprint"] = self.fingerprint
        return out

    def tool_call_start(self, call: dict[str, Any]) -> dict[str, Any]:
        """The delta that opens a streamed tool call: its id, type and name (vLLM 0.32's capture: no arguments
        key and a null content; the OpenAI form, llama.cpp's and SGLang's, starts the arguments empty)."""
        opened: dict[str, Any] = {"id": call["id"], "type": "function", "index": 0}
        if self.kind == "vllm":
            return {"content": None, "tool_calls": [{**opened, "function": {"name": call["function"]["name"]}}]}
        return {"tool_calls": [{**opened, "function": {"name": call["function"]["name"], "arguments": ""}}]}

    def tool_call_delta(self, function: dict[str, Any]) -> dict[str, Any]:
        """A later delta of a streamed tool call: a fragment of its arguments."""
        delta: dict[str, Any] = {"tool_calls": [{"index": 0, "function": function}]}
        return {"content": None, **delta} if self.kind == "vllm" else delta

    def usage_chunk(self, cid: str, model: str, created: int, prompt: int, completion: int) -> dict[str, Any]:
        return {
            "id": cid,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [],
            "usage": {"prompt_tokens": prompt, "total_tokens": prompt + completion, "completion_tokens": completion},
            "system_fingerprint": self.fingerprint,
        }

    def completion(
        self,
        model: str,
        content: str,
        prompt: int,
        completion: int,
        finish: str,
        tool_call: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": "" if tool_call else content}
        if tool_call:
            message["tool_calls"] = [tool_call]
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex[:16]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": "tool_calls" if tool_call else finish,
                }
            ],
            "system_fingerprint": self.fingerprint,
            "usage": {"prompt_tokens": prompt, "total_tokens": prompt + completion, "completion_tokens": completion},
        }

    def text_completion(self, model: str, text: str, prompt: int, completion: int, finish: str) -> dict[str, Any]:
        return {
            "id": f"cmpl-{uuid.uuid4().hex[:16]}",
            "object": "text_completion",
            "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": finish}],
            "system_fingerprint": self.fingerprint,
            "usage": {"prompt_tokens": prompt, "total_tokens": prompt + completion, "completion_tokens": completion},
        }


def embedding(text: str, dims: int) -> list[float]:
    """Deterministic unit vector: identical input gives identical output."""
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")
    rng = random.Random(seed)
    vec = [rng.gauss(0, 1) for _ in range(dims)]
    norm = math.sqrt(sum(v * v for v in vec)) or 1.0
    return [v / norm for v in vec]


def sse(obj: dict[str, Any] | str) -> bytes:
    payload = obj if isinstance(obj, str) else json.dumps(obj, separators=(",", ":"))
    return f"data: {payload}\n\n".encode()
