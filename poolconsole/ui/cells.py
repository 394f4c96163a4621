"""Table cells from the model: plain data in, Rich Text out, colours from the active theme's variables."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from rich.text import Text

from poolconsole.model.hosts import GpuProcess, GpuReading, HostSnapshot, HostState, SystemMemory
from poolconsole.model.pool_state import EngineTrack, HostTrack, PoolState, binned, sparkline
from poolconsole.model.snapshots import EngineState
from poolconsole.model.units import NA, gib, num, pct, seconds

BAR = " ▁▂▃▄▅▆▇█"
SPARK_POINTS = 180
"""The tok/s trend: the last 180 polls (3 minutes at the default 1 s) in 12 bins, each a mean."""


@dataclass(frozen=True)
class Colors:
    ok: str
    warn: str
    bad: str
    dim: str
    unified: str

    @classmethod
    def from_theme(cls, variables: Mapping[str, str]) -> Colors:
        return cls(
            variables.get("success", "green"),
            variables.get("stale", variables.get("warning", "yellow")),
            variables.get("target-down", variables.get("error", "red")),
            variables.get("foreground-darken-3", "grey50"),
            variables.get("unified", variables.get("accent", "cyan")),
        )


def system_memory(mem: SystemMemory | None) -> str:
    """Used / total system memory and swap in use; each unknown part n/a (macOS without macmon: swap)."""
    if mem is None or not mem.total_bytes:
        return "system memory n/a"
    used = mem.total_bytes - mem.available_bytes if mem.available_bytes is not None else None
    return f"system memory {gib(used)} / {gib(mem.total_bytes, 0)} GiB, swap {gib(mem.swap_used_bytes, 1, ' GiB')}"


def gpu_memory(g: GpuReading) -> str:
    """One GPU's used / total memory (the detail table's cell)."""
    if not g.memory_total_bytes:
        return NA
    unified = " (unified)" if g.memory_source == "system" else ""
    return f"{gib(g.memory_used_bytes)} / {gib(g.memory_total_bytes, 0)} GiB{unified}"


def process(p: GpuProcess) -> str:
    """A compute process as `PID:engine memory` (? for an engine not known, n/a for memory not reported)."""
    return f"{'?' if p.pid is None else p.pid}:{p.engine or '?'} {gib(p.used_memory_bytes, 1, 'G')}"


def age(value: float | None) -> str:
    if value is None:
        return "never"
    if value < 60:
        return f"{value:.0f}s"
    return f"{value / 60:.0f}m" if value < 3600 else f"{value / 3600:.0f}h"


def level(fraction: float | None, c: Colors, warn: float = 0.8, bad: float = 0.95) -> str:
    if fraction is None:
        return c.dim
    return c.bad if fraction >= bad else c.warn if fraction >= warn else c.ok


def gpu_bars(host: HostSnapshot | None, gpus: list[int] | None, c: Colors) -> Text:
    """One bar per GPU (a TP node shows all of its cards); unified memory drawn as ◆ with its share."""
    if host is None or not host.gpus:
        return Text(NA, style=c.dim)
    chosen = [g for g in host.gpus if gpus is None or g.index in gpus] or list(host.gpus)
    if host.memory_kind == "unified":
        g = chosen[0]
        used_bytes, total_bytes = g.memory_used_bytes, g.memory_total_bytes
        frac = used_bytes / total_bytes if used_bytes is not None and total_bytes else None
        text = Text("◆ ", style=c.unified)
        text.append(f"{pct(frac)} uni", style=level(frac, c))
        swap = host.system_memory.swap_used_bytes if host.system_memory else None
        if swap:
            text.append(" swap!", style=f"bold {c.bad}")
        return text
    text = Text()
    for g in chosen:
        if g.memory_used_bytes is None or not g.memory_total_bytes:
            text.append("?", style=c.dim)
            continue
        frac = g.memory_used_bytes / g.memory_total_bytes
        text.append(BAR[min(len(BAR) - 1, max(1, round(frac * (len(BAR) - 1))))], style=level(frac, c))
    used = [g.memory_used_bytes for g in chosen if g.memory_used_bytes is not None]
    total = [g.memory_total_bytes for g in chosen if g.memory_total_bytes]
    if len(used) == len(total) == len(chosen):
        text.append(f" {sum(used) / 2**30:.0f}/{sum(total) / 2**30:.0f}G", style=c.dim)
    else:  # a card did not report: a sum over the others would read as a smaller number, complete
        text.append(f" {NA}", style=c.dim)
    return text


def state_text(state: EngineState | HostState | None, c: Colors) -> Text:
    """A state in its colour; None (not polled yet) reads "polling", dimmed."""
    if state is None:
        return Text("polling", style=c.dim)
    ok = state in (EngineState.OK, HostState.OK)
    style = c.ok if ok else c.warn if state in (EngineState.DEGRADED, HostState.DEGRADED) else c.bad
    return Text(state.value, style=style if ok else f"bold {style}")


# (key, label, width): fixed widths, so an update never re-measures a whole column.
COLUMNS: tuple[tuple[str, str, int], ...] = (
    ("host", "Host", 9), ("engine", "Engine", 19), ("kind", "Kind", 15), ("model", "Model", 22),
    ("profile", "Profile", 13), ("vram", "GPU mem", 15), ("kv", "KV", 4), ("queue", "Run/Wait", 8),
    ("tps", "tok/s", 6), ("spark", "tok/s trend", 12), ("ttft", "TTFT p50", 8), ("state", "State", 11),
    ("age", "Age", 5), ("source", "Source", 22),
)  # fmt: skip


def engine_row(state: PoolState, track: EngineTrack, c: Colors) -> dict[str, Text | str]:
    v = track.view
    cfg = track.config
    host = state.hosts.get(cfg.host or "")
    snap = host.snapshot if host else None
    models = ", ".join(v.models[:2]) if v and v.models else (cfg.model or "")
    running = num(v.requests_running) if v else NA
    waiting = num(v.requests_waiting) if v else NA
    queue = Text(f"{running}/{waiting}")
    if v and v.requests_waiting and v.requests_waiting >= state.config.alerts.waiting:
        queue.stylize(f"bold {c.bad}")
    kv = v.kv_cache_usage if v else None
    return {
        "host": cfg.host or "-",
        "engine": cfg.name,
        "kind": f"{cfg.kind.value} {v.version or ''}".strip() if v else cfg.kind.value,
        "model": models[:28],
        "profile": cfg.profile or "-",
        "vram": gpu_bars(snap, cfg.gpus, c),
        "kv": Text(pct(kv), style=level(kv, c, 0.75, state.config.alerts.kv_usage)),
        "queue": queue,
        "tps": num(v.generation_tokens_per_s) if v else NA,
        "spark": sparkline(binned(track.history.tokens_per_s.tail(SPARK_POINTS), 12), 12),
        "ttft": seconds(v.ttft_p50_s) if v else NA,
        "state": state_text(v.state if v else None, c),
        "age": age(state.age_s(track.last_ok_at)),
        "source": (v.source.removeprefix("GET ") if v and v.source else "-")[:24],
    }


def host_row(state: PoolState, track: HostTrack, c: Colors) -> dict[str, Text | str]:
    snap = track.snapshot
    return {
        "host": track.config.name, "engine": "-", "kind": snap.source or "-" if snap else "-",
        "model": (track.config.description or "")[:28], "profile": "-",
        "vram": gpu_bars(snap, None, c), "kv": NA, "queue": NA, "tps": NA, "spark": "", "ttft": NA,
        "state": state_text(snap.state if snap else None, c),
        "age": age(state.age_s(track.last_ok_at)), "source": (snap.source or "-") if snap else "-",
    }  # fmt: skip


def host_of_row(state: PoolState, key: str) -> str | None:
    if key.startswith("host:"):
        return key[5:]
    track = state.engines.get(key.removeprefix("engine:"))
    return track.config.host if track else None
