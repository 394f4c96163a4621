"""Ollama residency: which models an Ollama instance holds in memory (`/api/ps`), how much of each sits in
VRAM, their context, when each expires, and the server's own OLLAMA_KEEP_ALIVE / OLLAMA_NUM_PARALLEL read
from the `server config` line it logs at start. Pure: no I/O, no Textual.

A client overriding keep-alive is what makes models stay "forever" or unload "for no reason": Ollama sets a
model's expiry anew on every request, to the request's `keep_alive` when it gives one, else to the server's
OLLAMA_KEEP_ALIVE. So an expiry further away than the server's setting, an expiry refreshed to less than
it, and a model gone before its expiry are each a client's doing (or, for the last, memory pressure)."""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from poolconsole.model.snapshots import OllamaModel
from poolconsole.model.units import NA

FOREVER_S = 100 * 365 * 86400.0
"""An expiry further than this is Ollama's "forever" (keep_alive < 0: Go's largest duration, ~292 years)."""
SLACK_S = 5.0
"""Expiries are compared with this tolerance (a poll's lag, clocks)."""
MAX_EVENTS = 20
GO_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
GO_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
RFC3339 = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$")


def parse_go_duration(text: str) -> float | None:
    """Go's time.Duration.String() ("5m0s", "1h0m0s", "2562047h47m16.854775807s", "0s") in seconds."""
    text = text.strip()
    sign = -1.0 if text.startswith("-") else 1.0
    body = text.lstrip("+-")
    if body == "0":
        return 0.0
    if not body or GO_DURATION.sub("", body):
        return None
    return sign * sum(float(n) * GO_UNITS[u] for n, u in GO_DURATION.findall(body))


def parse_expiry(text: str | None) -> float | None:
    """An `expires_at` (RFC 3339 with nanoseconds and a zone, "2025-08-08T00:07:26.817827822+02:00") as epoch
    seconds; None when absent or unreadable."""
    if not text:
        return None
    found = RFC3339.match(text.strip())
    if found is None:
        return None
    base, fraction, zone = found.groups()
    try:
        at = dt.datetime.fromisoformat(base + ("+00:00" if zone == "Z" else zone))
    except ValueError:
        return None
    return at.timestamp() + (float("0." + fraction) if fraction else 0.0)


@dataclass(frozen=True)
class OllamaServer:
    """The server's settings as it logged them at start (None: not in the line, or not read)."""

    keep_alive_s: float | None
    num_parallel: int | None
    """0 is "auto" (Ollama picks 1 or 4 by the memory free)."""
    source: str
    """Where it was read, in words ("docker logs embeddings, its server config line")."""
    error: str | None = None

    def keep_alive_text(self) -> str:
        return duration_text(self.keep_alive_s)

    def parallel_text(self) -> str:
        if self.num_parallel is None:
            return NA
        return "auto" if self.num_parallel == 0 else str(self.num_parallel)


SERVER_CONFIG_MARK = "OLLAMA_KEEP_ALIVE:"
"""What marks the `server config` line in an Ollama server's log, in every version's format."""


def parse_server_config(line: str, source: str) -> OllamaServer:
    """OLLAMA_KEEP_ALIVE and OLLAMA_NUM_PARALLEL from the `server config env="map[...]"` line (slog format
    since 0.1.4x: `msg="server config" env="map[...]"`; older: `routes.go:1225: INFO server config env="map[..."`).
    An empty value is the default: keep-alive 5m, parallel auto."""
    keep = re.search(r"\bOLLAMA_KEEP_ALIVE:(\S*)", line)
    parallel = re.search(r"\bOLLAMA_NUM_PARALLEL:(\S*)", line)
    if keep is None and parallel is None:
        return OllamaServer(None, None, source, "no server config line in its log")
    keep_s = None
    if keep is not None:
        value = keep.group(1).rstrip(']"')
        keep_s = 300.0 if value == "" else parse_go_duration(value)
        if keep_s is not None and keep_s < 0:
            keep_s = math.inf
    number = None
    if parallel is not None:
        value = parallel.group(1).rstrip(']"')
        number = 0 if value == "" else int(value) if value.isdigit() else None
    return OllamaServer(keep_s, number, source)


def duration_text(seconds: float | None) -> str:
    """ "4m12s", "2h05m", "forever", "n/a"."""
    if seconds is None:
        return NA
    if seconds >= FOREVER_S:
        return "forever"
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.0f}s"
    if seconds < 3600:
        return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"
    if seconds < 86400 * 2:
        return f"{int(seconds // 3600)}h{int(seconds % 3600 // 60):02d}m"
    return f"{seconds / 86400:.0f}d"


@dataclass(frozen=True)
class ResidencyEvent:
    """A change a client (or memory pressure) made between two polls."""

    at: float
    model: str
    kind: str
    """refreshed (a request set its expiry anew), loaded, gone_early (unloaded before its expiry), expired."""
    keep_alive_s: float | None = None
    """For refreshed / loaded: the keep-alive the request implied (its expiry minus the poll's time)."""


@dataclass(frozen=True)
class Residency:
    """What the last /api/ps said, and what changed over the recent polls."""

    fetched_at: float
    models: tuple[OllamaModel, ...]
    expiries: tuple[tuple[str, float | None], ...]
    events: tuple[ResidencyEvent, ...] = field(default=())

    def expiry(self, name: str) -> float | None:
        return dict(self.expiries).get(name)


def observe(previous: Residency | None, models: Sequence[OllamaModel], fetched_at: float) -> Residency:
    """The next Residency from one answered /api/ps."""
    expiries = tuple((m.name, parse_expiry(m.expires_at)) for m in models)
    events = list(previous.events) if previous is not None else []
    if previous is not None:
        before = dict(previous.expiries)
        now_names = {name for name, _ in expiries}
        for name, expires in expiries:
            if name not in before:
                implied = expires - fetched_at if expires is not None else None
                events.append(ResidencyEvent(fetched_at, name, "loaded", implied))
            elif expires is not None and (old := before[name]) is not None and abs(expires - old) > 1.0:
                # a request set it anew: later with the same keep-alive, or sooner with a shorter one
                events.append(ResidencyEvent(fetched_at, name, "refreshed", expires - fetched_at))
        for name, old in before.items():
            if name not in now_names:
                early = old is not None and old - fetched_at > SLACK_S
                events.append(ResidencyEvent(fetched_at, name, "gone_early" if early else "expired"))
    return Residency(fetched_at, tuple(models), expiries, tuple(events[-MAX_EVENTS:]))


@dataclass(frozen=True)
class ResidentRow:
    name: str
    size_bytes: int | None
    vram_bytes: int | None
    vram_share: float | None
    """size_vram / size: 1.0 all on the GPU, less is the part offloaded to system RAM."""
    context: int | None
    expires_in_s: float | None
    """None unknown; >= FOREVER_S: kept forever (keep_alive < 0)."""
    override: str | None
    """In words, when a client's keep_alive and not the server's decides its expiry."""


def _override(remaining: float | None, server: OllamaServer | None, events: list[ResidencyEvent]) -> str | None:
    keep = server.keep_alive_s if server is not None else None
    if remaining is None or keep is None:
        return None
    slack = max(SLACK_S, 0.05 * keep) if math.isfinite(keep) else SLACK_S
    server_text = f"OLLAMA_KEEP_ALIVE={duration_text(keep)}"
    if remaining >= FOREVER_S and keep < FOREVER_S:
        return f"kept forever: a client sent keep_alive -1 (server {server_text})"
    if remaining > keep + slack:
        return f"expires in {duration_text(remaining)}, beyond the server's {server_text}: a client set keep_alive"
    set_by = next((e for e in reversed(events) if e.kind in ("refreshed", "loaded")), None)
    if set_by is not None and set_by.keep_alive_s is not None and set_by.keep_alive_s < keep - slack:
        return (
            f"a request set its keep-alive to ~{duration_text(set_by.keep_alive_s)}, under the server's "
            f"{server_text}: a client overrides keep_alive (it unloads early)"
        )
    return None


def rows(residency: Residency, server: OllamaServer | None, now: float) -> list[ResidentRow]:
    """One row per resident model, the expiry counted down to `now`."""
    out: list[ResidentRow] = []
    for m in residency.models:
        expires = residency.expiry(m.name)
        remaining = expires - now if expires is not None else None
        at_poll = expires - residency.fetched_at if expires is not None else None
        share = None
        if m.size_bytes and m.size_vram_bytes is not None:
            share = min(1.0, m.size_vram_bytes / m.size_bytes)
        mine = [e for e in residency.events if e.model == m.name]
        out.append(
            ResidentRow(m.name, m.size_bytes, m.size_vram_bytes, share, m.context_length, remaining,
                        _override(at_poll, server, mine))
        )  # fmt: skip
    return out


def resident_marks(residency: Residency, server: OllamaServer | None, now: float) -> dict[str, str]:
    """Per resident model, what a picker says after its name: "resident, expires in 4m12s", "resident, never
    expires", or "resident" when its expiry is unknown (the detail screen's words)."""
    out = {}
    for row in rows(residency, server, now):
        left = row.expires_in_s
        until = (
            "" if left is None else ", never expires" if left >= FOREVER_S else f", expires in {duration_text(left)}"
        )
        out[row.name] = f"resident{until}"
    return out


OWN_UNLOAD_S = 120.0
"""A model gone from /api/ps within this long after this console unloaded it left by that unload."""


def notes(
    residency: Residency,
    server: OllamaServer | None,
    now: float,
    window_s: float = 600.0,
    unloaded_here: Mapping[str, float] | None = None,
) -> list[str]:
    """Models that left before their expiry, recently: a client's keep_alive 0, or memory pressure; or this
    console's own unload (`unloaded_here`: model -> when it asked), said as such."""
    out = []
    for e in residency.events:
        if e.kind == "gone_early" and now - e.at <= window_s:
            asked = (unloaded_here or {}).get(e.model)
            if asked is not None and asked - 1.0 <= e.at <= asked + OWN_UNLOAD_S:
                why = "by this console (U, in the audit log)"
            else:
                why = "before its keep-alive ran out: a client sent keep_alive 0, or another model needed the memory"
            out.append(f"{e.model} unloaded {duration_text(now - e.at)} ago, {why}")
    return out
