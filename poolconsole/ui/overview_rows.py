"""The overview's columns and rows: which columns it shows at a width, and each engine's and host's row of
cells (the cells themselves come from ui/cells.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rich.text import Text

from poolconsole.config.models import Engine, PoolConfig
from poolconsole.model.hosts import HostSnapshot
from poolconsole.model.pool_state import EngineTrack, HostTrack, PoolState, binned, sparkline
from poolconsole.model.units import NA, num, pct, seconds
from poolconsole.model.view import EngineView
from poolconsole.ui.cells import (
    LATEST,
    SPARK_POINTS,
    Colors,
    age,
    engine_memory,
    gpu_bars,
    level,
    state_text,
    state_word,
)
from poolconsole.ui.columns import Column, ColumnSpec, fit_columns

PAD = (1, 0)
"""The overview's cells: one blank before each, so columns are one cell apart."""
SPECS: tuple[ColumnSpec, ...] = (
    ColumnSpec("host", "Host", 7, 9, fold=6, ellipsis=True),
    ColumnSpec("engine", "Engine", 16, 20, fold=12, ellipsis=True),
    ColumnSpec("kind", "Kind", 8, 19, fold=2),
    ColumnSpec("model", "Model", 15, 36, fold=3, ellipsis=True),
    ColumnSpec("vram", "GPU mem", 9, 18, fold=4),
    ColumnSpec("kv", "KV", 4, 4, fold=10),
    ColumnSpec("queue", "Run/Wait", 8, 8, fold=11),
    ColumnSpec("tps", "tok/s", 5, 6, fold=9),
    ColumnSpec("spark", "tok/s trend", 6, 6, fold=1, grow=True, short="trend"),
    ColumnSpec("ttft", "TTFT p50", 5, 8, fold=5, short="TTFT"),
    ColumnSpec("state", "State", 11, 11),
    ColumnSpec("age", "Age", 5, 5, fold=7),
    ColumnSpec("why", "Why", 12, 24, fold=8, ellipsis=True),
)
"""Every column of the overview, at its narrowest and widest. The model's narrowest is what reads a name
("qwen3-next-80b-…", not "qwen3-3…"). 13 columns at their narrowest take 124 cells; narrower, they fold
away in this order: the tok/s trend (the tok/s figure stays), Kind, Model, GPU mem, TTFT, Host, Age, Why,
tok/s, KV, Run/Wait, Engine; State never folds. At 120 only the trend is folded."""
WIDEN = ("engine", "vram", "model", "kind", "why", "ttft", "tps", "host")
"""Where spare width goes first (each column up to its widest): the engine's name whole, the GPU figures,
the model with the profile it runs (what a rollover changes), then Kind, so a version shows whole; what is
left after these goes to the tok/s trend."""
FOLD_ORDER = tuple(s.key for s in sorted((s for s in SPECS if s.fold is not None), key=lambda s: s.fold or 0))


def overview_columns(width: int) -> list[Column]:
    """The overview's columns for a content width of `width` cells."""
    return fit_columns(SPECS, width, sum(PAD), WIDEN)


def kind_text(kind: str, version: str | None, width: int) -> str:
    """The engine kind and its version when the whole version fits (a version is never cut)."""
    full = f"{kind} {version}" if version else kind
    return full if len(full) <= width else kind


def trend(values: Sequence[float | None], width: int) -> str:
    """The tok/s trend exactly `width` cells wide: one bin per cell, the newest on the right; a history
    shorter than the column is padded on the left with blanks (nothing known there, not zeros)."""
    if width <= 0:
        return ""
    line = sparkline(binned(list(values), width), width)
    return " " * (width - len(line)) + line


def engine_words(track: EngineTrack, why: str | None = None, view: EngineView | None = LATEST) -> dict[str, str]:
    """An engine row's text columns as plain words, read from the model without building the row: what the
    overview sorts the text columns by and what its filter matches (with the state's word)."""
    v = track.view if view is LATEST else view
    cfg = track.config
    models = ", ".join(v.models[:2]) if v and v.models else (cfg.model or "")
    profile = track.active_profile or cfg.profile
    if profile:
        models = f"{models} · {profile}" if models else profile
    version = v.version if v else None
    return {
        "host": cfg.host or "-",
        "engine": cfg.name,
        "kind": f"{cfg.kind.value} {version}" if version else cfg.kind.value,
        "model": models,
        "state": state_word(v.state if v else None),
        "why": why or "",
    }


def host_words(track: HostTrack, why: str | None = None, snapshot: HostSnapshot | None = LATEST) -> dict[str, str]:
    """A host row's text columns as plain words (see engine_words)."""
    snap = track.snapshot if snapshot is LATEST else snapshot
    return {
        "host": track.config.name,
        "engine": "-",
        "kind": snap.source or "-" if snap else "-",
        "model": track.config.description or "",
        "state": state_word(snap.state if snap else None),
        "why": why or "",
    }


def engine_row(
    state: PoolState,
    track: EngineTrack,
    c: Colors,
    widths: Mapping[str, int] | None = None,
    why: str | None = None,
    view: EngineView | None = LATEST,
    host_snapshot: HostSnapshot | None = LATEST,
) -> dict[str, Text | str]:
    """One engine's cells; `widths` (column key -> cells) sizes the trend and the kind, `why` says what
    needs attention (empty for a row that needs none); `view` and `host_snapshot` what it shows (LATEST:
    the track's and its host's latest)."""
    widths = widths or {s.key: s.min for s in SPECS}
    v = track.view if view is LATEST else view
    cfg = track.config
    host = state.hosts.get(cfg.host or "")
    snap = (host.snapshot if host else None) if host_snapshot is LATEST else host_snapshot
    words = engine_words(track, why, v)
    running = num(v.requests_running) if v else NA
    waiting = num(v.requests_waiting) if v else NA
    queue = Text(f"{running}/{waiting}")
    if v and v.requests_waiting and v.requests_waiting >= state.config.alerts.waiting:
        queue.stylize(f"bold {c.bad}")
    kv = v.kv_cache_usage if v else None
    spark = widths.get("spark", 0)
    return {
        "host": words["host"],
        "engine": words["engine"],
        "kind": kind_text(cfg.kind.value, v.version if v else None, widths.get("kind", 0)),
        "model": words["model"],
        "vram": engine_memory(snap, cfg.name, cfg.gpus, c, widths.get("vram"), shares_gpus(state, cfg.name)),
        "kv": Text(pct(kv), style=level(kv, c, 0.75, state.config.alerts.kv_usage)),
        "queue": queue,
        "tps": num(v.generation_tokens_per_s) if v else NA,
        "spark": trend(track.history.tokens_per_s.tail(max(SPARK_POINTS, spark)), spark) if spark else "",
        "ttft": seconds(v.ttft_p50_s) if v else NA,
        "state": state_text(v.state if v else None, c),
        "age": age(state.age_s(track.last_ok_at)),
        "why": Text(why, style=c.bad) if why else "",
    }


def host_row(
    state: PoolState,
    track: HostTrack,
    c: Colors,
    widths: Mapping[str, int] | None = None,
    why: str | None = None,
    snapshot: HostSnapshot | None = LATEST,
) -> dict[str, Text | str]:
    snap = track.snapshot if snapshot is LATEST else snapshot
    words = host_words(track, why, snap)
    return {
        "host": words["host"], "engine": words["engine"], "kind": words["kind"], "model": words["model"],
        "vram": gpu_bars(snap, None, c, (widths or {}).get("vram")),
        "kv": NA, "queue": NA, "tps": NA, "spark": "", "ttft": NA,
        "state": state_text(snap.state if snap else None, c),
        "age": age(state.age_s(track.last_ok_at)), "why": Text(why, style=c.bad) if why else "",
    }  # fmt: skip


_SHARED: dict[int, tuple[object, frozenset[str]]] = {}


def shared_engines(config: PoolConfig) -> frozenset[str]:
    """The engines that run on the same host's cards as another (no `gpus` list: all of them); worked out
    once per config, host by host (over every pair of the pool it took 52 % of a refresh at 1,000 engines)."""
    cached = _SHARED.get(id(config))
    if cached is not None and cached[0] is config:
        return cached[1]
    by_host: dict[str, list[Engine]] = {}
    for engine in config.engines:
        if engine.host:
            by_host.setdefault(engine.host, []).append(engine)
    shared: set[str] = set()
    for engines in by_host.values():
        for me in engines:
            for other in engines:
                overlap = me.gpus is None or other.gpus is None or bool(set(me.gpus) & set(other.gpus))
                if other.name != me.name and overlap:
                    shared.add(me.name)
                    break
    _SHARED.clear()  # one config at a time (the console's); a test's next pool replaces it
    _SHARED[id(config)] = (config, frozenset(shared))
    return frozenset(shared)


def shares_gpus(state: PoolState, name: str) -> bool:
    """Whether another engine runs on the same host's cards (no `gpus` list: all of them)."""
    return name in shared_engines(state.config)


def host_of_row(state: PoolState, key: str) -> str | None:
    if key.startswith("host:"):
        return key[5:]
    track = state.engines.get(key.removeprefix("engine:"))
    return track.config.host if track else None
