"""Alert rules with hysteresis: an alert fires when a value crosses its threshold and clears only when
it falls back below the clear level, so a value hovering at the line does not flap."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from poolconsole.config.models import AlertSettings
from poolconsole.model.hosts import HostSnapshot
from poolconsole.model.snapshots import EngineState
from poolconsole.model.view import EngineView

COLLAPSE_POLLS = 15


@dataclass(frozen=True)
class AlertEvent:
    at: float
    target: str
    rule: str
    fired: bool
    """True when it fires, False when it clears."""
    message: str


@dataclass(frozen=True)
class Rule:
    name: str
    value: Callable[[EngineView], float | None]
    fire: float
    clear: float
    describe: Callable[[float], str]


def engine_rules(s: AlertSettings) -> list[Rule]:
    return [
        Rule("kv_full", lambda v: v.kv_cache_usage, s.kv_usage, s.kv_usage - s.hysteresis,
             lambda x: f"KV cache {x * 100:.0f}% full: new requests will queue"),
        Rule("queue", lambda v: v.requests_waiting, s.waiting, max(0.0, s.waiting - 3),
             lambda x: f"{x:.0f} requests waiting"),
    ]  # fmt: skip


@dataclass
class Alerts:
    settings: AlertSettings
    active: dict[tuple[str, str], AlertEvent] = field(default_factory=dict)
    log: deque[AlertEvent] = field(default_factory=lambda: deque(maxlen=1000))
    peak_tps: dict[str, float] = field(default_factory=dict)
    recent_tps: dict[str, deque[float | None]] = field(default_factory=dict)
    restarts: dict[str, deque[float]] = field(default_factory=dict)

    def _set(self, target: str, rule: str, on: bool, message: str, now: float) -> AlertEvent | None:
        key = (target, rule)
        if on and key not in self.active:
            event = AlertEvent(now, target, rule, True, message)
            self.active[key] = event
        elif not on and key in self.active:
            del self.active[key]
            event = AlertEvent(now, target, rule, False, f"cleared: {message}")
        else:
            return None
        self.log.append(event)
        return event

    def engine(self, view: EngineView, now: float) -> list[AlertEvent]:
        events: list[AlertEvent | None] = []
        down = view.state in (EngineState.DOWN, EngineState.AUTH_FAILED)
        events.append(self._set(view.name, "down", down, f"{view.state}: {view.error or ''}".strip(), now))
        for rule in engine_rules(self.settings):
            value = rule.value(view)
            if value is None:
                continue
            active = (view.name, rule.name) in self.active
            on = value >= rule.clear if active else value >= rule.fire
            events.append(self._set(view.name, rule.name, on, rule.describe(value), now))
        events.append(self._collapse(view, now))
        events.append(self._restart_loop(view.name, now, bool(view.counter_resets)))
        return [e for e in events if e is not None]

    def restarted(self, name: str, now: float) -> list[AlertEvent]:
        """A restart seen another way than by the engine's counters (the container's own record)."""
        event = self._restart_loop(name, now, restarted=True)
        return [event] if event is not None else []

    def _restart_loop(self, name: str, now: float, restarted: bool) -> AlertEvent | None:
        """K restarts in M minutes (counter resets, a new process start time, a container restart)."""
        seen = self.restarts.setdefault(name, deque(maxlen=100))
        if restarted and (not seen or now - seen[-1] > 0.5):
            seen.append(now)
        window = self.settings.restart_loop_minutes * 60
        recent = [t for t in seen if now - t <= window]
        looping = len(recent) >= self.settings.restart_loop_count
        return self._set(
            name,
            "restart_loop",
            looping,
            f"{len(recent)} restarts in the last {self.settings.restart_loop_minutes:g} min: a restart loop?",
            now,
        )

    def _collapse(self, view: EngineView, now: float) -> AlertEvent | None:
        """tok/s collapse: the mean of the last COLLAPSE_POLLS polls, all with requests running, falls below a
        fraction of the best such mean seen recently. One slow window (a long prefill, llama.cpp counters that
        move only when a request ends) is not a collapse."""
        recent = self.recent_tps.setdefault(view.name, deque(maxlen=COLLAPSE_POLLS))
        tps = view.generation_tokens_per_s
        recent.append(tps if tps is not None and view.requests_running else None)
        if len(recent) < COLLAPSE_POLLS or any(v is None for v in recent):
            return self._set(view.name, "tps_collapse", False, "tok/s recovered", now) if tps else None
        mean = sum(v for v in recent if v is not None) / len(recent)
        peak = max(self.peak_tps.get(view.name, 0.0) * 0.995, mean)  # a slowly decaying best
        self.peak_tps[view.name] = peak
        collapsed = peak > 0 and mean < peak * self.settings.tps_collapse
        return self._set(
            view.name,
            "tps_collapse",
            collapsed,
            f"tok/s collapsed to {mean:.0f} (recent best {peak:.0f}) with requests running",
            now,
        )

    def host(self, snap: HostSnapshot, now: float) -> list[AlertEvent]:
        events: list[AlertEvent | None] = []
        down = not snap.state.answering
        events.append(self._set(snap.name, "down", down, f"{snap.state}: {snap.error or ''}", now))
        for gpu in snap.gpus:
            if gpu.memory_used_bytes is None or not gpu.memory_total_bytes:
                continue
            frac = gpu.memory_used_bytes / gpu.memory_total_bytes
            key = f"vram_gpu{gpu.index}"
            active = (snap.name, key) in self.active
            on = frac >= self.settings.vram - self.settings.hysteresis if active else frac >= self.settings.vram
            events.append(self._set(snap.name, key, on, f"GPU {gpu.index} memory {frac * 100:.0f}% used", now))
        swap = snap.system_memory.swap_used_bytes if snap.system_memory else None
        if snap.memory_kind == "unified" and swap is not None:
            events.append(
                self._set(
                    snap.name,
                    "swap",
                    swap > 0,
                    f"swap in use on unified memory: {swap / 2**30:.1f} GiB (model too big?)",
                    now,
                )
            )
        return [e for e in events if e is not None]
