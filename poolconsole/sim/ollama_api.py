"""The simulated Ollama server's API: /api/ps, /api/generate (load and unload), /api/tags, /api/embed and
the OpenAI-compatible /v1/embeddings, residency kept by sim.ollama."""

from __future__ import annotations

import json
import uuid
from typing import TYPE_CHECKING, Any

from aiohttp import web

from poolconsole.sim.openai_api import embedding
from poolconsole.sim.responses import openai_error

if TYPE_CHECKING:
    from poolconsole.sim.server import SimEngine


class OllamaRoutes:
    """The handlers, on one engine."""

    def __init__(self, engine: SimEngine) -> None:
        self.engine = engine

    async def ps(self, request: web.Request) -> web.Response:
        assert self.engine.ollama is not None
        return web.json_response(self.engine.ollama.ps())

    async def generate(self, request: web.Request) -> web.Response:
        """Only what changes residency: load (an empty prompt) and unload (`keep_alive: 0`); the demo's
        Ollama serves embedding models, which do not generate."""
        assert self.engine.ollama is not None
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            return web.json_response({"error": "invalid character in request body"}, status=400)
        if not isinstance(body, dict):
            return web.json_response({"error": "json: cannot unmarshal the body"}, status=400)
        status, answer = self.engine.ollama.generate(body)
        return web.json_response(answer, status=status, dumps=lambda o: json.dumps(o, separators=(",", ":")))  # Go's

    async def tags(self, request: web.Request) -> web.Response:
        return web.json_response(
            {
                "models": [
                    {
                        "name": n,
                        "model": n,
                        "modified_at": "2026-11-01T10:00:00Z",
                        "size": d * 700_000,
                        "digest": uuid.uuid5(uuid.NAMESPACE_DNS, n).hex,
                        "details": {
                            "format": "gguf",
                            "family": "bert",
                            "parameter_size": "137M",
                            "quantization_level": "F16",
                        },
                    }
                    for n, d in self.engine.spec.embedding_dims.items()
                ]
            }
        )

    def _embed(self, model: str, inputs: Any, keep_alive: Any = None) -> list[list[float]] | None:
        dims = self.engine.spec.embedding_dims.get(model)
        if dims is None:
            return None
        if self.engine.ollama is not None:
            self.engine.ollama.used(model, keep_alive=keep_alive)
        items = inputs if isinstance(inputs, list) else [inputs]
        return [embedding(f"{model}:{x}", dims) for x in items]

    async def embed(self, request: web.Request) -> web.Response:
        """Ollama's /api/embed: no input loads the model (no embeddings), keep_alive as given."""
        body = await request.json()
        vectors = self._embed(str(body.get("model")), body.get("input", []), body.get("keep_alive"))
        if vectors is None:
            return web.json_response(
                {"error": f'model "{body.get("model")}" not found, try pulling it first'}, status=404
            )
        return web.json_response(
            {
                "model": body.get("model"),
                "embeddings": vectors,
                "total_duration": 14_000_000,
                "load_duration": 1_000_000,
                "prompt_eval_count": 8,
            }
        )

    async def embeddings(self, request: web.Request) -> web.Response:
        body = await request.json()
        vectors = self._embed(str(body.get("model")), body.get("input", ""))
        if vectors is None:
            return openai_error(404, f'model "{body.get("model")}" not found', "api_error", None)
        return web.json_response(
            {
                "object": "list",
                "model": body.get("model"),
                "data": [{"object": "embedding", "embedding": v, "index": i} for i, v in enumerate(vectors)],
                "usage": {"prompt_tokens": 8, "total_tokens": 8},
            }
        )
