"""The simulated Ollama server's residency: which models are loaded, until when, and the two ways a client
changes it, in Ollama's own formats: `/api/ps` (as in a real capture, tests/fixtures/real/issue-samples/
ollama-api-ps-2025-08-nirmato-issue13.txt, plus `context_length`), and `/api/generate` with an empty prompt,
which loads the model (`keep_alive` as long as given, else the server's OLLAMA_KEEP_ALIVE) or, with
`keep_alive: 0`, unloads it (`"done_reason": "unload"`).

The demo's clients: two embedding models are used every USE_EVERY_S by a caller that leaves keep_alive to
the server (expiry = last use + OLLAMA_KEEP_ALIVE); one was pinned by a client with `keep_alive: -1`
(Ollama then keeps it "forever": its expiry lies ~292 years ahead), the override the console points out."""

from __future__ import annotations

import datetime as dt
import re
import time
import uuid
from dataclasses import dataclass
from typing import Any

SERVER_KEEP_ALIVE_S = 300.0
"""OLLAMA_KEEP_ALIVE of the simulated server (Ollama's default, 5m)."""
SERVER_NUM_PARALLEL = 4
USE_EVERY_S = 20.0
FOREVER_S = 9223372036.854775807
"""Go's largest time.Duration, what a negative keep_alive becomes (2562047h47m16.854775807s)."""
CONTEXT = 8192
DURATION = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def go_duration(seconds: float) -> str:
    """A duration as Go's time.Duration.String() writes it: 5m0s, 1h0m0s, 30s."""
    if seconds >= FOREVER_S:
        return "2562047h47m16.854775807s"
    whole = int(seconds)
    h, rest = divmod(whole, 3600)
    m, s = divmod(rest, 60)
    if h:
        return f"{h}h{m}m{s}s"
    if m:
        return f"{m}m{s}s"
    return f"{s}s"


def keep_alive_seconds(value: Any) -> float | None:
    """A request's keep_alive as Ollama reads it: a number of seconds, or a duration ("10m", "1h30m", "-1"
    or "-1m" for forever); None when it is not one. Negative means forever."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        text = value.strip()
        sign = -1.0 if text.startswith("-") else 1.0
        body = text.lstrip("+-")
        if re.fullmatch(r"\d+(?:\.\d+)?", body):
            seconds = sign * float(body)
        elif body and DURATION.sub("", body) == "":
            seconds = sign * sum(float(n) * UNITS[u] for n, u in DURATION.findall(body))
        else:
            return None
    else:
        return None
    return FOREVER_S if seconds < 0 else seconds


def stamp(epoch: float) -> str:
    """Go's RFC3339Nano of a wall time, in UTC (a container's zone)."""
    epoch = min(epoch, time.time() + FOREVER_S)
    at = dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=epoch)
    return at.strftime("%Y-%m-%dT%H:%M:%S") + f".{at.microsecond:06d}000Z"


@dataclass
class Resident:
    loaded_at: float
    keep_alive_s: float
    expires_at: float | None
    """Fixed by the last request that set it; None: used every USE_EVERY_S with the server's keep-alive."""


class OllamaResidency:
    def __init__(self, models: dict[str, int], now: float | None = None) -> None:
        now = time.time() if now is None else now
        self.sizes = {name: dims * 700_000 for name, dims in models.items()}
        """Bytes per model (size == size_vram: fully on the GPU)."""
        self.keep_alive_s = SERVER_KEEP_ALIVE_S
        self.num_parallel = SERVER_NUM_PARALLEL
        names = list(models)
        self.resident: dict[str, Resident] = {}
        for i, name in enumerate(names[:3]):
            pinned = i == 1
            self.resident[name] = Resident(now - 600, FOREVER_S if pinned else self.keep_alive_s, None)
            if pinned:
                self.resident[name].expires_at = now - 600 + FOREVER_S

    def config_line(self, address: str) -> str:
        """The server config Ollama logs at start; `address` is host:port, as OLLAMA_HOST gives it."""
        from poolconsole.sim.logs import OLLAMA_SERVER_CONFIG, slog_line

        text = OLLAMA_SERVER_CONFIG.format(
            keep_alive=go_duration(self.keep_alive_s), parallel=self.num_parallel, address=address
        )
        return slog_line("INFO", "routes.go:1919", text)

    def expiry(self, resident: Resident, now: float) -> float:
        if resident.expires_at is not None:
            return resident.expires_at
        last_use = now - (now % USE_EVERY_S)
        return last_use + resident.keep_alive_s

    def ps(self, now: float | None = None) -> dict[str, Any]:
        """/api/ps: the resident models (those whose keep-alive ran out are unloaded first)."""
        now = time.time() if now is None else now
        for name in [n for n, r in self.resident.items() if self.expiry(r, now) <= now]:
            del self.resident[name]
        models = []
        for name, resident in self.resident.items():
            size = self.sizes[name]
            models.append(
                {
                    "name": name,
                    "model": name,
                    "size": size,
                    "digest": uuid.uuid5(uuid.NAMESPACE_DNS, name).hex + uuid.uuid5(uuid.NAMESPACE_URL, name).hex,
                    "details": {
                        "parent_model": "",
                        "format": "gguf",
                        "family": "bert",
                        "families": ["bert"],
                        "parameter_size": "137M",
                        "quantization_level": "F16",
                    },
                    "expires_at": stamp(self.expiry(resident, now)),
                    "size_vram": size,
                    "context_length": CONTEXT,
                }
            )
        return {"models": models}

    def used(self, model: str, now: float | None = None, keep_alive: Any = None) -> None:
        """A request for the model (an embedding call): loaded if it was not, and its expiry set anew, as in
        Ollama, by each request: its keep_alive when it gives one (0: unloaded after it), else the server's."""
        if model in self.sizes:
            now = time.time() if now is None else now
            keep = None if keep_alive is None else keep_alive_seconds(keep_alive)
            if keep == 0:
                self.resident.pop(model, None)
                return
            loaded = self.resident[model].loaded_at if model in self.resident else now
            if keep is None:
                self.resident[model] = Resident(loaded, self.keep_alive_s, None)
            else:
                self.resident[model] = Resident(loaded, keep, now + keep)

    def generate(self, body: dict[str, Any], now: float | None = None) -> tuple[int, dict[str, Any]]:
        """`/api/generate` as Ollama answers it for an embedding model: an unload (no prompt, keep_alive 0) is
        done before the capability check; anything else is refused ("... does not support generate")."""
        now = time.time() if now is None else now
        model = str(body.get("model") or "")
        if model not in self.sizes:
            return 404, {"error": f'model "{model}" not found, try pulling it first'}
        raw = body.get("keep_alive")
        keep = self.keep_alive_s if raw is None else keep_alive_seconds(raw)
        if keep is None:
            return 400, {"error": f"time: invalid duration {raw!r}"}
        answer: dict[str, Any] = {"model": model, "created_at": stamp(now), "response": "", "done": True}
        if keep == 0 and not body.get("prompt") and raw is not None:  # Ollama's unload branch comes first
            self.resident.pop(model, None)
            answer["done_reason"] = "unload"
            return 200, answer
        # then its capability check: the demo's Ollama holds embedding models only (load them on /api/embed)
        return 400, {"error": f'"{model}" does not support generate'}
