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
    """A well-formed call of the first declared tool, arguments filled from its JSON schema."""
    tools = body.get("tools")
    choice = body.get("tool_choice", "auto")
    if not isinstance(tools, list) or not tools or choice == "none":
        return None
    tool = tools[0]
    if isinstance(choice, dict):
        wanted = choice.get("function", {}).get("name")
        tool = next((t for t in tools if t.get("function", {}).get("name") == wanted), tool)
    function = tool.get("function", {}) if isinstance(tool, dict) else {}
    params = function.get("parameters", {}) if isinstance(function, dict) else {}
    args: dict[str, Any] = {}
    for key, spec in (params.get("properties") or {}).items():
        kind = spec.get("type") if isinstance(spec, dict) else None
        enum = spec.get("enum") if isinstance(spec, dict) else None
        args[key] = enum[0] if enum else {"number": 21.5, "integer": 3, "boolean": True}.get(str(kind), "Paris")
    return {
        "id": f"chatcmpl-tool-{uuid.uuid4().hex[:16]}",
        "type": "function",
        "function": {"name": function.get("name", "tool"), "arguments": json.dumps(args)},
    }


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
