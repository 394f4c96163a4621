"""Alert rules with hysteresis and a hold: an alert fires once a value has stayed over its threshold for
the rule's `for` duration (as a Prometheus alerting rule does: pending until then), and clears only when it
falls back below the clear level, so a value hovering at the line does not flap. The same clear level holds
a pending alert: a value hovering just under and over the line (an overloaded KV cache freeing a few blocks
as requests end) is still waited out, and only a fall below the clear level starts the wait again.
Messages are plain words, for the fired and the cleared alike."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from poolconsole.config.models import AlertSettings
from poolconsole.model import gpu_health
from poolconsole.model.alert_index import ByTarget
from poolconsole.model.failure_modes import MODES, Finding
from poolconsole.model.hosts import HostSnapshot
from poolconsole.model.snapshots import EngineState
from poolconsole.model.view import EngineView

COLLAPSE_POLLS = 15
DELIBERATE_GRACE_S = 120.0
LOG_FINDING_SERVED_S = 600.0
"""A failure mode its log showed stops being a problem once the engine has served this long since (the
alert clears; the event and the detail keep it). It stayed active while the engine served for hours, and
the overview's verdict called a healthy pool '1 problem'."""
"""A restart seen this long after a console action on the engine ended is still the action's (the container's
record is read once a minute while the engine stays up)."""


CRITICAL_RULES = frozenset({"down", "restart_loop", "stalled", "canary", "slo_burn_page", "gpu_xid", "gpu_ecc"})
"""The rules that page at once: a target that does not answer, one that serves nothing, one that keeps dying,
a GPU the kernel or its memory says is failing."""


def severity(rule: str) -> str:
    """critical, warning or info: a log's findings are the cause of a down or a restart (info), the rest warn.
    A per-GPU key (gpu_xid_gpu2) has its rule's."""
    per_gpu = gpu_health.split(rule)
    if (per_gpu[0] if per_gpu else rule) in CRITICAL_RULES:
        return "critical"
    return "info" if rule.startswith("log:") else "warning"


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
    cleared: Callable[[float], str]
    hold: float = 0.0
    """Seconds the condition must hold before the alert fires (`for`)."""
    level: Callable[[float], str] = str
    """A threshold in the message's words ("90%", "8")."""


def engine_rules(s: AlertSettings) -> list[Rule]:
    return [
        Rule("kv_full", lambda v: v.kv_cache_usage, s.kv_usage, s.kv_usage - s.hysteresis,
             lambda x: f"KV cache {x * 100:.0f}% full: new requests will queue",
             lambda x: f"KV cache back to {x * 100:.0f}%", s.kv_usage_for_s, lambda x: f"{x * 100:.0f}%"),
        Rule("queue", lambda v: v.requests_waiting, s.waiting, max(0.0, s.waiting - 3),
             lambda x: f"{x:.0f} requests waiting", lambda x: f"queue back to {x:.0f} waiting", s.waiting_for_s,
             lambda x: f"{x:.0f}"),
    ]  # fmt: skip


@dataclass
class Alerts:
    settings: AlertSettings
    active: ByTarget[AlertEvent] = field(default_factory=ByTarget)
    """(target, rule) -> the alert firing; a dict that also knows each target's rules (`rules_of`)."""
    log: deque[AlertEvent] = field(default_factory=lambda: deque(maxlen=1000))
    peak_tps: dict[str, float] = field(default_factory=dict)
    recent_tps: dict[str, deque[float | None]] = field(default_factory=dict)
    restarts: dict[str, deque[float]] = field(default_factory=dict)
    pending: dict[tuple[str, str], float] = field(default_factory=dict)
    acting: dict[str, tuple[float, float | None]] = field(default_factory=dict)
    """engine -> (start, end or None while it runs) of the console's latest restart or rollover of it."""
    serving_since: dict[str, float] = field(default_factory=dict)
    """engine -> since when its polls have said ok, without a break."""
    off_since: dict[tuple[str, str], float] = field(default_factory=dict)
    """(target, rule) -> since when a firing alert's condition has not held, while it waits out its clear
    hold (the GPU rules' hysteresis)."""
    generated: dict[str, tuple[tuple[float | None, float | None, float | None], float]] = field(default_factory=dict)
    """engine -> ((its generation, prompt and progress counters), since when it has had those values) for the
    stalled rule."""
    """(target, rule) -> since when its condition has held, while it waits out the rule's hold."""

    def _held(
        self, key: tuple[str, str], value: float, fire: float, words: str, levels: tuple[str, str], now: float
    ) -> str:
        """What fires after a hold, said so when the value is under the line now: it crossed the line, and the
        clear level held it since ("6 requests waiting" alone read as an alert under its threshold)."""
        since = self.pending.get(key)
        if since is None or value >= fire:
            return words
        return f"{words} ({levels[0]} or more {now - since:.0f} s ago, {levels[1]} or more since)"

    def _set(
        self, target: str, rule: str, on: bool, message: str, now: float, cleared: str, hold: float = 0.0
    ) -> AlertEvent | None:
        """`message` says what fires, `cleared` what it is back to; it fires once `on` held `hold` s."""
        key = (target, rule)
        if on and key not in self.active:
            since = self.pending.setdefault(key, now)
            if now - since < hold:
                return None
            del self.pending[key]
            event = AlertEvent(now, target, rule, True, message)
            self.active[key] = event
        elif not on and key in self.active:
            del self.active[key]
            event = AlertEvent(now, target, rule, False, cleared)
        else:
            if not on:
                self.pending.pop(key, None)
            return None
        self.log.append(event)
        return event

    def engine(self, view: EngineView, now: float, restarted: bool | None = None) -> list[AlertEvent]:
        """`restarted`: whether this poll's counter reset is a restart not yet counted (default: any reset)."""
        events: list[AlertEvent | None] = []
        down = view.state in (EngineState.DOWN, EngineState.AUTH_FAILED)
        said = f"{str(view.state).replace('_', ' ')}: {view.error or 'no reason given'}"
        events.append(self._set(view.name, "down", down, said, now, "answering again", self.settings.down_for_s))
        for rule in engine_rules(self.settings):
            value = rule.value(view)
            if value is None:
                continue
            key = (view.name, rule.name)
            held = key in self.active or key in self.pending
            on = value >= rule.clear if held else value >= rule.fire
            levels = (rule.level(rule.fire), rule.level(rule.clear))
            said = self._held(key, value, rule.fire, rule.describe(value), levels, now)
            events.append(self._set(view.name, rule.name, on, said, now, rule.cleared(value), rule.hold))
        events.append(self._collapse(view, now))
        events.append(self._stalled(view, now))
        new = bool(view.counter_resets) if restarted is None else restarted
        events.append(self._restart_loop(view.name, now, new))
        events += self._served_past_findings(view, now)
        return [e for e in events if e is not None]

    def _served_past_findings(self, view: EngineView, now: float) -> list[AlertEvent | None]:
        """Clear its log findings once it has served LOG_FINDING_SERVED_S since they fired."""
        if view.state != EngineState.OK:
            self.serving_since.pop(view.name, None)
            return []
        since = self.serving_since.setdefault(view.name, now)
        out: list[AlertEvent | None] = []
        for rule in self.active.rules_of(view.name):  # its own alerts, not every alert of the pool (issue 39)
            event = self.active[(view.name, rule)]
            if rule.startswith("log:") and now - max(since, event.at) >= LOG_FINDING_SERVED_S:
                title = next((m.title for m in MODES if m.id == rule[4:]), rule[4:])
                cleared = f"{title}: serving for {LOG_FINDING_SERVED_S / 60:.0f} min since its log showed it"
                out.append(self._set(view.name, rule, False, "", now, cleared))
        return out

    def restarted(self, name: str, now: float) -> list[AlertEvent]:
        """A restart seen another way than by the engine's counters (the container's own record)."""
        event = self._restart_loop(name, now, restarted=True)
        return [event] if event is not None else []

    def log_findings(self, name: str, findings: Sequence[Finding], now: float, why: str) -> list[AlertEvent]:
        """The failure modes an engine's log showed (read because it `why`: "went down", "restarted"): one
        alert per mode saying what it means and what to change, active until a later read no longer shows it."""
        events: list[AlertEvent | None] = []
        seen = {f"log:{f.pattern}" for f in findings}
        for f in findings:
            message = f"{why}; its log shows {f.title}: {f.diagnosis} Change: {f.adjustment}"
            events.append(self._set(name, f"log:{f.pattern}", True, message, now, f"{f.title}: no longer in its log"))
        for target, rule in list(self.active):
            if target == name and rule.startswith("log:") and rule not in seen:
                events.append(self._set(name, rule, False, "", now, f"{rule[4:]}: no longer in its log"))
        return [e for e in events if e is not None]

    def action_started(self, name: str, now: float) -> None:
        """The console restarts or rolls this engine: the restarts it causes are not a restart loop."""
        self.acting[name] = (now, None)

    def action_ended(self, name: str, now: float) -> None:
        started, _ = self.acting.get(name, (now, None))
        self.acting[name] = (started, now)

    def _deliberate(self, name: str, now: float) -> bool:
        started, ended = self.acting.get(name, (None, None))
        return started is not None and started <= now and (ended is None or now <= ended + DELIBERATE_GRACE_S)

    def _restart_loop(self, name: str, now: float, restarted: bool) -> AlertEvent | None:
        """K restarts in M minutes (counter resets, a new process start time, a container restart); those the
        console's own restart or rollover caused are not counted (an operator's rollback and retry raised a
        critical "restart loop" of three confirmed, audited actions)."""
        seen = self.restarts.setdefault(name, deque(maxlen=100))
        if restarted and not self._deliberate(name, now) and (not seen or now - seen[-1] > 0.5):
            seen.append(now)
        window = self.settings.restart_loop_minutes * 60
        recent = [t for t in seen if now - t <= window]
        looping = len(recent) >= self.settings.restart_loop_count
        minutes = f"{self.settings.restart_loop_minutes:g} min"
        return self._set(
            name,
            "restart_loop",
            looping,
            f"{len(recent)} restarts in the last {minutes}: a restart loop?",
            now,
            f"restart loop over: {len(recent)} restart(s) in the last {minutes}",
        )

    def _collapse(self, view: EngineView, now: float) -> AlertEvent | None:
        """tok/s collapse: the mean of the last COLLAPSE_POLLS polls, all with requests running, falls below a
        fraction of the best such mean seen recently. One slow window (a long prefill, llama.cpp counters that
        move only when a request ends) is not a collapse."""
        recent = self.recent_tps.setdefault(view.name, deque(maxlen=COLLAPSE_POLLS))
        tps = view.generation_tokens_per_s
        recent.append(tps if tps is not None and view.requests_running else None)
        if len(recent) < COLLAPSE_POLLS or any(v is None for v in recent):
            return self._set(view.name, "tps_collapse", False, "", now, "tok/s recovered") if tps else None
        mean = sum(v for v in recent if v is not None) / len(recent)
        peak = max(self.peak_tps.get(view.name, 0.0) * 0.995, mean)  # a slowly decaying best
        self.peak_tps[view.name] = peak
        line = self.settings.tps_collapse
        if (view.name, "tps_collapse") in self.active:  # clears only well above the line, not at it
            line += self.settings.hysteresis
        collapsed = peak > 0 and mean < peak * line
        return self._set(
            view.name,
            "tps_collapse",
            collapsed,
            f"tok/s collapsed to {mean:.0f} (recent best {peak:.0f}) with requests running",
            now,
            f"tok/s recovered to {mean:.0f}",
            self.settings.tps_collapse_for_s,
        )

    def _stalled(self, view: EngineView, now: float) -> AlertEvent | None:
        """The wedge `/health` hides: the engine answers, requests are running or waiting, and none of its
        generation counter, its prompt (prefill) counter and its progress counter has moved for `stall_s`.
        The prompt counter counts too, so a long prefill (a 100k-token prompt, many prompts admitted at once)
        is progress, not a wedge, wherever the engine exposes it (vLLM's and SGLang's prompt_tokens_total,
        llama.cpp's prompt_tokens_total). The progress counter is the one a kind's spec declares where its
        generation counter does not move at every step (llama.cpp's n_decode_total: its tokens_predicted_total
        grows only when a request ends, so a long answer without /slots moves only that). Any change counts as
        progress (a restart's reset too). Unknown (down, no generation counter, no request counts, or a
        declared progress counter unknown with a reason) leaves the alert as it is: a down engine is `down`'s."""
        total = view.generation_tokens_total
        if view.state != EngineState.OK or total is None:
            return None
        if view.progress_total is None and "progress_total" in view.unknown:
            return None  # its progress cannot be read: a long answer would look like a wedge
        progress = (total, view.prompt_tokens_total, view.progress_total)
        seen = self.generated.get(view.name)
        if seen is None or seen[0] != progress:
            self.generated[view.name] = seen = (progress, now)
        busy_known = view.requests_running is not None or view.requests_waiting is not None
        if not busy_known:
            return None
        running, waiting = view.requests_running or 0, view.requests_waiting or 0
        still = now - seen[1]
        stalled = (running + waiting) > 0 and still >= self.settings.stall_s
        read = ["token generated"]
        read += ["prompt token processed"] if progress[1] is not None else []
        read += ["decoding step"] if progress[2] is not None else []
        counted = "no " + (f"{', '.join(read[:-1])} or {read[-1]}" if len(read) > 1 else read[0])
        said = (
            f"stalled: {running:.0f} running and {waiting:.0f} waiting, {counted} for {still:.0f} s "
            "(it answers /health and serves nothing)"
        )
        back = "generating again" if running + waiting > 0 else "no requests running or waiting"
        return self._set(view.name, "stalled", stalled, said, now, back)

    def canary(self, name: str, failed: str | None, now: float) -> AlertEvent | None:
        """A canary probe's outcome (the watcher's runtime.alerts_canary sends it): `failed` in words fires
        `canary` once failures have held `canary_for_s`; a probe that answered (None) clears it."""
        return self._set(
            name,
            "canary",
            failed is not None,
            f"canary: idle, and a one-token completion failed: {failed} (it answers /health and serves nothing)",
            now,
            "canary answered",
            self.settings.canary_for_s,
        )

    def slo_burn(self, target: str, pages: bool, warns: bool, words: str, now: float) -> list[AlertEvent]:
        """slo_burn's two alerts for one objective (runtime.alerts_slo reads the windows): slo_burn_page
        (critical: 1 h and 5 min over 14.4x) and slo_burn_warn (6 h and 30 min over 6x), each after
        `slo_burn_for_s`; receivers know both as alertname slo_burn."""
        hold, said = self.settings.slo_burn_for_s, f"slo burn: {words}"
        events = [
            self._set(target, "slo_burn_page", pages, said, now, f"burn back under 14.4x: {words}", hold),
            self._set(target, "slo_burn_warn", warns, said, now, f"burn back under 6x: {words}", hold),
        ]
        return [e for e in events if e is not None]

    def canary_progress(self, name: str, now: float) -> AlertEvent | None:
        """The engine generated (its counters moved while the canary fired): it serves, the canary clears."""
        if (name, "canary") not in self.active:
            return None
        return self._set(name, "canary", False, "", now, "generating again")

    def host(self, snap: HostSnapshot, now: float) -> list[AlertEvent]:
        events: list[AlertEvent | None] = []
        down = not snap.state.answering
        said = f"{snap.state.value.replace('_', ' ')}: {snap.error or 'no reason given'}"
        events.append(self._set(snap.name, "down", down, said, now, "reachable again", self.settings.down_for_s))
        for gpu in snap.gpus:
            if gpu.memory_used_bytes is None or not gpu.memory_total_bytes:
                continue
            frac = gpu.memory_used_bytes / gpu.memory_total_bytes
            key = f"vram_gpu{gpu.index}"
            held = (snap.name, key) in self.active or (snap.name, key) in self.pending
            on = frac >= self.settings.vram - self.settings.hysteresis if held else frac >= self.settings.vram
            line, clear = self.settings.vram, self.settings.vram - self.settings.hysteresis
            levels = (f"{line * 100:.0f}%", f"{clear * 100:.0f}%")
            used = self._held(
                (snap.name, key), frac, line, f"GPU {gpu.index} memory {frac * 100:.0f}% used", levels, now
            )
            back = f"GPU {gpu.index} memory back to {frac * 100:.0f}% used"
            events.append(self._set(snap.name, key, on, used, now, back, self.settings.vram_for_s))
        events += self._gpu_health(snap, now)
        swap = snap.system_memory.swap_used_bytes if snap.system_memory else None
        if snap.memory_kind == "unified" and swap is not None:
            events.append(
                self._set(
                    snap.name,
                    "swap",
                    swap > 0,
                    f"swap in use on unified memory: {swap / 2**30:.1f} GiB (model too big?)",
                    now,
                    "swap no longer in use",
                    self.settings.swap_for_s,
                )
            )
        return [e for e in events if e is not None]

    def _gpu_health(self, snap: HostSnapshot, now: float) -> list[AlertEvent | None]:
        """gpu_xid, gpu_ecc, gpu_throttle, gpu_pcie per GPU (model.gpu_health), each after its `for` and
        cleared only once its condition has stayed off its clear time. Unknown leaves the alert as it is."""
        s = self.settings
        holds = {
            "gpu_xid": (s.gpu_xid_for_s, s.gpu_xid_clear_s),
            "gpu_ecc": (s.gpu_ecc_for_s, s.gpu_ecc_clear_s),
            "gpu_throttle": (s.gpu_throttle_for_s, s.gpu_throttle_clear_s),
            "gpu_pcie": (s.gpu_pcie_for_s, s.gpu_pcie_clear_s),
        }
        out: list[AlertEvent | None] = []
        for gpu in snap.gpus:
            if gpu.index is None:
                continue
            for rule, check in gpu_health.CHECKS.items():
                said = check(gpu)
                if said is None:
                    continue
                key = (snap.name, gpu_health.key(rule, gpu.index))
                if said is False and key not in self.active:
                    # Off and not firing, every poll of a healthy GPU: what _set would do, without its words
                    self.off_since.pop(key, None)
                    self.pending.pop(key, None)
                    continue
                hold, clear = holds[rule]
                on = said is not False
                if not on and key in self.active:  # hysteresis: off for `clear` s before it clears
                    since = self.off_since.setdefault(key, now)
                    on = now - since < clear
                else:
                    self.off_since.pop(key, None)
                message = f"GPU {gpu.index}: {said}" if isinstance(said, str) else ""
                cleared = f"GPU {gpu.index}: {rule.removeprefix('gpu_')} back to normal"
                out.append(self._set(key[0], key[1], on, message, now, cleared, hold))
        return out
