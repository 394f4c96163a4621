"""Idle burn per host (seed 002: "multi-card always-on inference draws noticeable wattage; use
OLLAMA_KEEP_ALIVE and instance sleep policies to avoid idle burn"): per host and UTC day, how long it was
busy or idle, its GPUs' power at idle against under load, and the energy burned idle, with a hint.

Pure, fed the history store's rows by model.ledger.Ledger (the `hosts` key of `ledger --json`). How it counts:
- The time between two stored rows of a host (at most MAX_GAP_S apart, as the engine ledger) is busy when
  any of the host's engines (gateways left out) had requests running at its latest row, idle when every one
  of them had none, and unknown when one was down or unread for longer than MAX_GAP_S, or the host has no
  engine row at all (nothing tells busy from idle).
- Power is the sum of the host's GPUs' readings at the later row, held over that time; idle power and load
  power are the energy of each state over the time of that state that had a reading (a mean, in W).
- The hint appears when the host was idle for at least as long as it was busy that day.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from poolconsole.model.ledger import GATEWAY_KINDS, MAX_GAP_S, StoredRow, _number, utc_date
from poolconsole.model.units import NA

KEEP_ALIVE_HINT = (
    "Ollama on this host: a shorter OLLAMA_KEEP_ALIVE lets cold models expire (a client's keep_alive -1 keeps "
    "them forever)"
)
SLEEP_HINT = (
    "an instance sleep policy: stop or sleep engines that sit idle (vLLM's --enable-sleep-mode, or stop the "
    "container off-hours and start it on demand), and let the cards drop to their idle power state"
)


@dataclass
class _Seen:
    at: float
    running: float | None
    host: str | None
    kind: str | None
    up: bool


@dataclass
class _HostDay:
    busy_s: float = 0.0
    idle_s: float = 0.0
    unknown_s: float = 0.0
    busy_powered_s: float = 0.0
    idle_powered_s: float = 0.0
    busy_j: float = 0.0
    idle_j: float = 0.0
    unknown_j: float = 0.0
    engines: dict[str, str | None] = field(default_factory=dict)
    why_unknown: str | None = None


def _kwh(joules: float) -> float:
    return round(joules / 3.6e6, 6)


class HostLedger:
    def __init__(self, start: float, end: float) -> None:
        self.start = start
        self.end = end
        self._engines: dict[str, _Seen] = {}
        self._hosts: dict[str, float] = {}
        self._days: dict[tuple[str, str], _HostDay] = {}

    def add(self, row: StoredRow) -> None:
        if row.kind == "engine":
            v = row.values
            kind = v.get("kind")
            self._engines[row.name] = _Seen(
                row.at,
                _number(v.get("requests_running")),
                v.get("host") or None,
                str(kind) if kind else None,
                v.get("state") not in ("down", "unreachable", "auth_failed"),
            )
        elif row.kind == "host":
            self._host(row)

    def _state(self, host: str, at: float) -> tuple[str, str | None, dict[str, str | None]]:
        """busy, idle or unknown (with why) at `at`, and the host's engines."""
        mine = {n: e for n, e in self._engines.items() if e.host == host and e.kind not in GATEWAY_KINDS}
        kinds = {n: e.kind for n, e in mine.items()}
        if not mine:
            return "unknown", "no engine row for this host: nothing tells busy from idle", kinds
        if any(e.up and e.running is not None and e.running > 0 and at - e.at <= MAX_GAP_S for e in mine.values()):
            return "busy", None, kinds
        for name, e in mine.items():
            if at - e.at > MAX_GAP_S:
                return "unknown", f"engine {name} unread for over {MAX_GAP_S:.0f} s", kinds
            if not e.up:
                return "unknown", f"engine {name} was down", kinds
            if e.running is None:
                return "unknown", f"engine {name} exposes no running-requests gauge", kinds
        return "idle", None, kinds

    def _host(self, row: StoredRow) -> None:
        previous = self._hosts.get(row.name)
        self._hosts[row.name] = row.at
        if previous is None or not 0 < row.at - previous <= MAX_GAP_S or not self.start <= row.at < self.end:
            return
        seconds = row.at - previous
        key = (utc_date(row.at), row.name)
        day = self._days.get(key)
        if day is None:
            day = self._days[key] = _HostDay()
        readings = [_number(g.get("power_w")) for g in row.values.get("gpus") or () if isinstance(g, dict)]
        known = [p for p in readings if p is not None]
        joules = sum(known) * seconds if known else None
        state, why, kinds = self._state(row.name, row.at)
        day.engines.update(kinds)
        if state == "busy":
            day.busy_s += seconds
            if joules is not None:
                day.busy_j += joules
                day.busy_powered_s += seconds
        elif state == "idle":
            day.idle_s += seconds
            if joules is not None:
                day.idle_j += joules
                day.idle_powered_s += seconds
        else:
            day.unknown_s += seconds
            day.unknown_j += joules or 0.0
            day.why_unknown = day.why_unknown or why

    def entries(self) -> list[dict[str, Any]]:
        """One entry per UTC day and host, by date then host."""
        out = []
        for (date, host), d in sorted(self._days.items()):
            unknown: dict[str, str] = {}
            idle_w = d.idle_j / d.idle_powered_s if d.idle_powered_s else None
            load_w = d.busy_j / d.busy_powered_s if d.busy_powered_s else None
            if idle_w is None:
                unknown["idle_power_w"] = "no GPU power reading while idle" if d.idle_s else "never idle"
            if load_w is None:
                unknown["load_power_w"] = "no GPU power reading under load" if d.busy_s else "never under load"
            if d.why_unknown:
                unknown["unknown_s"] = d.why_unknown
            powered = d.idle_powered_s or d.busy_powered_s
            entry: dict[str, Any] = {
                "date": date,
                "host": host,
                "engines": sorted(d.engines),
                "busy_s": round(d.busy_s, 3),
                "idle_s": round(d.idle_s, 3),
                "unknown_s": round(d.unknown_s, 3),
                "idle_power_w": None if idle_w is None else round(idle_w, 1),
                "load_power_w": None if load_w is None else round(load_w, 1),
                "idle_energy_kwh": _kwh(d.idle_j) if d.idle_powered_s else None,
                "energy_kwh": _kwh(d.idle_j + d.busy_j + d.unknown_j) if powered or d.unknown_j else None,
                "hint": hint(d.idle_s, d.busy_s, idle_w, d.idle_j, d.engines),
                "unknown": unknown,
            }
            out.append(entry)
        return out


def hint(idle_s: float, busy_s: float, idle_w: float | None, idle_j: float, kinds: dict[str, str | None]) -> str | None:
    """When the host sat idle at least as long as it worked: what it burned, and what to change."""
    if idle_s <= 0 or idle_s < busy_s:
        return None
    burned = f" at {idle_w:.0f} W ({idle_j / 3.6e6:.2f} kWh)" if idle_w is not None else ""
    advice = [KEEP_ALIVE_HINT] if "ollama" in kinds.values() else []
    advice.append(SLEEP_HINT)
    return f"idle {idle_s / 3600:.1f} h{burned}, busy {busy_s / 3600:.1f} h: " + "; ".join(advice)


def text_lines(hosts: list[dict[str, Any]], today: str) -> list[str]:
    """`ledger`'s text: today's idle burn per host."""
    rows = [e for e in hosts if e["date"] == today]
    if not rows:
        return []
    lines = ["", f"idle burn per host today ({today}):"]
    for e in rows:
        idle_w = NA if e["idle_power_w"] is None else f"{e['idle_power_w']:.0f} W"
        load_w = NA if e["load_power_w"] is None else f"{e['load_power_w']:.0f} W"
        lines.append(
            f"  {e['host']}: idle {e['idle_s'] / 3600:.1f} h at {idle_w}, busy {e['busy_s'] / 3600:.1f} h at {load_w}"
            + (f", unknown {e['unknown_s'] / 3600:.1f} h" if e["unknown_s"] else "")
        )
        if e["hint"]:
            lines.append(f"    hint: {e['hint']}")
    return lines
