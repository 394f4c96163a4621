"""Table cells from the model: plain data in, Rich Text out, colours from the active theme's variables."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rich.text import Text

from poolconsole.model.hosts import GpuProcess, GpuReading, HostSnapshot, HostState, SystemMemory
from poolconsole.model.pool_state import EngineTrack, HostTrack, PoolState
from poolconsole.model.snapshots import EngineState
from poolconsole.model.states import severity_of
from poolconsole.model.units import NA, gib, num, pct

LATEST: Any = object()
"""The track's latest view (or the host's latest snapshot): what a row shows unless given the one it was
stamped with (a row built later than its stamp shows the same numbers as the summary of that refresh)."""

BAR = " ▁▂▃▄▅▆▇█"
SPARK_POINTS = 180
"""The tok/s trend: the last 180 polls (6 minutes at the default 2 s), one bin (a mean) per cell of the
column (more polls when the column is wider than that)."""


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
        return f"system memory {NA}"
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


def gpu_bars(host: HostSnapshot | None, gpus: list[int] | None, c: Colors, width: int | None = None) -> Text:
    """One bar per GPU (a TP node shows all of its cards), then used/total when it fits `width` whole;
    unified memory drawn as ◆ with its share (swap flagged before the share is)."""
    if host is None or not host.gpus:
        return Text(NA, style=c.dim)
    chosen = [g for g in host.gpus if gpus is None or g.index in gpus] or list(host.gpus)
    if host.memory_kind == "unified":
        g = chosen[0]
        used_bytes, total_bytes = g.memory_used_bytes, g.memory_total_bytes
        frac = used_bytes / total_bytes if used_bytes is not None and total_bytes else None
        text = Text("◆ ", style=c.unified)
        swap = host.system_memory.swap_used_bytes if host.system_memory else None
        words = [pct(frac)] if swap else [f"{pct(frac)} unified", pct(frac)]  # "uni" read as cut-off text
        room = None if width is None else width - len(text) - (6 if swap else 0)
        share = next((w for w in words if room is None or len(w) <= room), None)
        if share is not None:
            text.append(share, style=level(frac, c))
        if swap:
            text.append(" swap!" if len(text) > 2 else "swap!", style=f"bold {c.bad}")
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
    # a card did not report: a sum over the others would read as a smaller number, complete
    complete = len(used) == len(total) == len(chosen)
    figure = f"{sum(used) / 2**30:.0f}/{sum(total) / 2**30:.0f}G" if complete else NA
    return with_figure(text, figure, width, c)


def with_figure(bars: Text, figure: str, width: int | None, c: Colors) -> Text:
    """A memory cell: its bars (one per card), then its used/total figure, both when they fit `width`. The
    figure comes first: too narrow for both, the figure alone (four cards' bars said nothing of how much);
    too narrow for the figure, the bars alone (whole or not at all: "83/5" would be a lie)."""
    if width is None or len(bars) + 1 + len(figure) <= width:
        bars.append(f" {figure}", style=c.dim)
        return bars
    if len(figure) <= width:
        return Text(figure, style=c.dim)
    return bars


EIGHTHS = " ▏▎▍▌▋▊▉█"


def meter(fraction: float, width: int) -> str:
    """A horizontal bar `width` cells wide filled to `fraction` (in eighths of a cell)."""
    eighths = round(max(0.0, min(1.0, fraction)) * width * 8)
    full, part = divmod(eighths, 8)
    return ("█" * full + (EIGHTHS[part] if part else "")).ljust(width)


CARD_FILLER = frozenset({"NVIDIA", "GeForce", "AMD", "Radeon", "Generation", "Edition", "Workstation", "Server"})
"""Words of a GPU's name that do not tell one card from another."""


def card_name(name: str | None) -> str:
    """A GPU's name in up to three words: the vendor, brand and filler words out ("NVIDIA H200" -> "H200",
    "NVIDIA GeForce RTX 3090" -> "RTX 3090", "NVIDIA RTX 6000 Ada Generation" -> "RTX 6000 Ada", where
    the last two words left "Ada Generation")."""
    if not name:
        return "GPU"
    words = [w for w in name.split() if w not in CARD_FILLER]
    return " ".join(words[:3]) if words else name


def engine_memory(
    host: HostSnapshot | None, name: str, gpus: list[int] | None, c: Colors, width: int | None, shared: bool
) -> Text:
    """An engine's own GPU memory: a bar per card of what its processes hold (HostSnapshot.processes
    mapped to it), then own/total. Where its processes are not known: the cards' memory when the engine
    is alone on them, else "shared" (the host line has the cards' use; repeating it would be a lie)."""
    if host is None or not host.gpus:
        return Text(NA, style=c.dim)
    on = gpus if gpus is not None else host.engine_gpus.get(name)
    chosen = [g for g in host.gpus if on is None or g.index in on] or list(host.gpus)
    procs = [p for p in host.processes if p.engine == name]
    if not procs:
        return gpu_bars(host, on, c, width) if not shared else Text("shared", style=c.dim)
    unified = host.memory_kind == "unified"
    text = Text("◆ " if unified else "", style=c.unified)
    own_total: int | None = 0
    for g in chosen if not unified else chosen[:1]:
        mine = [p.used_memory_bytes for p in procs if unified or p.gpu_uuid is None or p.gpu_uuid == g.uuid]
        if not g.memory_total_bytes or any(m is None for m in mine):
            text.append("?", style=c.dim)
            own_total = None
            continue
        own = sum(m for m in mine if m is not None)
        own_total = None if own_total is None else own_total + own
        frac = own / g.memory_total_bytes
        if unified:
            text.append(f"{pct(frac)} own", style=level(frac, c))
        else:
            text.append(BAR[min(len(BAR) - 1, max(1, round(frac * (len(BAR) - 1))))], style=level(frac, c))
    total = sum(g.memory_total_bytes or 0 for g in chosen[: 1 if unified else None])
    figure = f"{own_total / 2**30:.0f}/{total / 2**30:.0f}G" if own_total is not None and total else NA
    return text if unified else with_figure(text, figure, width, c)


COLLAPSED = "▸ "
"""Before a group line whose rows are folded away (c, Enter or a click opens it again)."""


def state_rank(word: str) -> int:
    """A state word's rank, worse higher: its state's severity doubled, and "polling" (no answer yet) between
    ok and degraded. 3 and above: not answering (down, unreachable, auth failed, ...)."""
    return 1 if word == "polling" else 2 * severity_of(word)


def state_word(state: EngineState | HostState | None) -> str:
    return "polling" if state is None else STATE_WORDS.get(state.value, state.value)


def group_tag(states: Sequence[str], engines: int, problems: int, severity: int | None, c: Colors) -> Text:
    """A folded group's count and worst state ("[4 engines, worst down, 2 problems]"), in the colour of
    its worst problem: what the hidden rows hold stays on screen. `states` are the state words of its
    `engines` engines (and of its host), `severity` the worst problem's (0 critical, 1 warning, None: none)."""
    worst = max(states, key=state_rank, default="ok")
    count = f"{engines} engine{'' if engines == 1 else 's'}"
    words = f"{count}, all ok" if worst == "ok" and not problems else f"{count}, worst {worst}"
    if problems:
        words += f", {problems} problem{'' if problems == 1 else 's'}"
    bad = severity == 0 or state_rank(worst) >= 3
    colour = c.bad if bad else c.warn if severity == 1 or worst != "ok" else c.ok
    return Text(f"[{words}]", style=f"bold {colour}")


def model_line(model: str, tracks: Sequence[EngineTrack], c: Colors, width: int, tag: Text | None = None) -> Text:
    """A model's line over the engines serving it: how many, their states, their tok/s and requests running
    / waiting summed (n/a when none of them is known, the unknown ones counted apart)."""
    text = Text(COLLAPSED if tag is not None else "")
    text.append(model or "no model", style="bold")
    if tag is not None:
        text.append("  ")
        text.append_text(tag)
    counts: dict[str, int] = {}
    for track in tracks:
        word = state_word(track.view.state if track.view else None)
        counts[word] = counts.get(word, 0) + 1
    if tag is None:  # folded, the tag says how many and their worst: not said twice ("1 engine, all ok]  1 engine")
        text.append(f"  {len(tracks)} engine{'' if len(tracks) == 1 else 's'}", style=c.dim)
        for word, count in sorted(counts.items(), key=lambda kv: -state_rank(kv[0])):
            style = c.ok if word == "ok" else c.warn if state_rank(word) < 3 else f"bold {c.bad}"
            text.append(f"  {count} {word}", style=style)

    def total(values: list[float | None]) -> tuple[str, int]:
        known = [v for v in values if v is not None]
        return (num(sum(known)) if known else NA), (len(values) - len(known) if known else 0)

    def missing(count: int) -> str:
        return f" ({count} {NA})" if count else ""

    views = [t.view for t in tracks]
    tps, tps_na = total([v.generation_tokens_per_s if v else None for v in views])
    running, running_na = total([v.requests_running if v else None for v in views])
    waiting, waiting_na = total([v.requests_waiting if v else None for v in views])
    text.append(f"  tok/s {tps}{missing(tps_na)}  run/wait {running}/{waiting}", style=c.dim)
    text.append(missing(max(running_na, waiting_na)), style=c.dim)  # once, after the pair
    return text


def host_line(
    state: PoolState,
    track: HostTrack,
    c: Colors,
    width: int,
    why: str | None = None,
    tag: Text | None = None,
    snapshot: HostSnapshot | None = LATEST,
) -> Text:
    """A host's line over its engines: its name and state, then each GPU as a bar of its own (a 4-GPU
    tensor-parallel node shows four), unified memory drawn apart (◆, the theme's `unified` colour), swap
    on it flagged; the used/total memory, the power draw and what needs attention when they fit `width`.
    Folded (its engines hidden), `tag` says how many and their worst, right after the name."""
    snap = track.snapshot if snapshot is LATEST else snapshot
    text = Text(COLLAPSED if tag is not None else "")
    text.append(track.config.name, style="bold")
    if tag is not None:
        text.append("  ")
        text.append_text(tag)
    if snap is None:
        text.append("  polling", style=c.dim)
        return text
    text.append("  ")
    text.append_text(state_text(snap.state, c))
    if not snap.state.answering:
        text.append(f"  {why or (snap.error or 'no reason given')}", style=c.bad)
        return text
    gpus = list(snap.gpus)
    tail = Text()
    if why:
        tail.append(f"  {why}", style=c.bad)
    if not gpus:
        mem = snap.system_memory
        text.append(f"  no GPUs · {system_memory(mem)}", style=c.dim)
        text.append_text(tail)
        return text
    used = [g.memory_used_bytes for g in gpus]
    total = [g.memory_total_bytes for g in gpus]
    figure = (
        f" {sum(u or 0 for u in used) / 2**30:.0f}/{sum(t or 0 for t in total) / 2**30:.0f}G"
        if None not in used and all(total)
        else f" {NA}"
    )
    power = [g.power_w for g in gpus]
    watts = f"  {sum(w or 0 for w in power):.0f} W" if None not in power else ""
    label = f"  {len(gpus)}× {card_name(gpus[0].name)}" if len(gpus) > 1 else f"  {card_name(gpus[0].name)}"
    if snap.memory_kind == "unified":
        label += " unified"
    swap = snap.system_memory.swap_used_bytes if snap.system_memory else None
    flag = f"  swap {swap / 2**30:.1f}G!" if snap.memory_kind == "unified" and swap else ""
    fixed = len(text) + len(label) + len(figure) + len(watts) + len(flag) + len(tail)
    per_card = (width - fixed) // len(gpus) - 6  # each card: " ▕bar▏NN%"
    bars = Text()
    for g in gpus:
        known = g.memory_used_bytes is not None and g.memory_total_bytes
        frac = (g.memory_used_bytes or 0) / (g.memory_total_bytes or 1) if known else None
        colour = c.unified if snap.memory_kind == "unified" else level(frac, c)
        if per_card >= 3:
            bar = min(per_card, 12)
            bars.append(" ▕")
            bars.append(meter(frac, bar) if frac is not None else "?".center(bar), style=colour)
            bars.append("▏")
            bars.append(pct(frac).rjust(4), style=level(frac, c))
        else:  # too narrow for a bar each: a block per card, still one per card
            block = BAR[min(len(BAR) - 1, max(1, round(frac * (len(BAR) - 1))))] if frac is not None else "?"
            bars.append(block if bars else f" {block}", style=colour)
    if snap.memory_kind == "unified":
        text.append("  ◆ ", style=c.unified)
        text.append(label[2:], style=c.unified)
    elif len(text) + len(label) + len(bars) + len(figure) <= width:
        text.append(label, style=c.dim)
    text.append_text(bars)
    text.append(figure, style=c.dim)
    if flag:
        text.append(flag, style=f"bold {c.bad}")
    if len(text) + len(watts) + len(tail) <= width:
        text.append(watts, style=c.dim)
    text.append_text(tail)
    return text


STATE_WORDS = {"auth_failed": "auth failed", "host_key_unknown": "key unknown", "host_key_changed": "key changed"}
"""States as the State column shows them: every one within its 11 cells, never cut."""


def state_text(state: EngineState | HostState | None, c: Colors) -> Text:
    """A state in its colour; None (not polled yet) reads "polling", dimmed."""
    if state is None:
        return Text("polling", style=c.dim)
    ok = state in (EngineState.OK, HostState.OK)
    style = c.ok if ok else c.warn if state in (EngineState.DEGRADED, HostState.DEGRADED) else c.bad
    return Text(STATE_WORDS.get(state.value, state.value), style=style if ok else f"bold {style}")
