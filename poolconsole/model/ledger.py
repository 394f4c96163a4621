"""The capacity ledger: per engine and UTC day, what the pool produced (prompt and output tokens, requests),
how long it was busy or idle, its latency (TTFT p50/p95), the GPU energy it burned, and the decision of
seed 002's "pragmatic decision line": does the pool pay off, or is it an on-prem compliance backup?

Pure: it reads stored history rows (the history store's engine rows carry an engine's `status --json`
fields with its per-poll reset-safe `increase` and running `totals`; host rows carry each GPU's power) and
computes; the store, the command line and the console's screen are its clients.

How each figure is counted (the README says the same):
- Tokens and requests: per engine, each row adds its counter's growth since the engine's previous stored
  reading: the poll's reset-safe `increase` (a restart counts the new value, never a negative step), or,
  where the raw counter grew more than that (the first poll of a new recorder session, whose increase is
  empty, or polls lost in between), the raw growth; a raw counter lower than before with no increase is a
  restart across the gap and counts its new value. The first reading ever counts nothing (what an engine
  served before it was watched is not the pool's ledger). Requests are `requests_finished_total` (vLLM
  `request_success_total`, SGLang `num_requests_total`); an engine without such a counter has null.
- busy_s / idle_s: the time between two stored rows of an engine (at most `MAX_GAP_S` apart; a longer gap
  is unknown time, neither) is busy when the later row has requests running > 0, idle when it has 0, and
  unknown when the engine was down or exposes no running gauge.
- TTFT p50 / p95: the median of the per-poll window p50s and the 95th percentile of the per-poll window p95s
  over the polls in which requests finished (the store keeps each poll's window quantiles, not its
  histogram, so this is an estimate of the day's quantiles, not an exact merge).
- Energy: each host GPU's power, held over the time since the host's previous row (at most `MAX_GAP_S`),
  goes to the engines on that GPU: the engines configured on it (`gpus`, as the host row's `engine_gpus`
  says) and the host's engines with no `gpus` (they may use any of its GPUs), split equally between them.
  A GPU with no engine is the host's unattributed energy. Idle burn is the share spent while the engine
  had nothing running. No power reading for an engine's GPUs in a day: energy null, never 0.
"""

from __future__ import annotations

import datetime as dt
import math
import statistics
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from poolconsole.config.models import LedgerSettings

MAX_GAP_S = 300.0
"""Two rows further apart than this are a gap: the time between is neither busy nor idle and burns no
counted energy (a recorder that was not running knows nothing of it)."""
LOOKBACK_S = 3600.0
"""Rows this long before the window are read only as the first rows' predecessors."""
GATEWAY_KINDS = frozenset({"litellm"})
"""Engines that route to other engines: listed, but left out of the pool's totals (their tokens are the
engines' tokens, counted there)."""

COUNTERS = {
    "prompt_tokens": "prompt_tokens_total",
    "output_tokens": "generation_tokens_total",
    "requests": "requests_finished_total",
}


class StoredRow(Protocol):
    """What the ledger needs of a history store row (runtime.store.Row)."""

    @property
    def at(self) -> float: ...
    @property
    def kind(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def values(self) -> dict[str, Any]: ...


def utc_date(at: float) -> str:
    return dt.datetime.fromtimestamp(at, dt.UTC).date().isoformat()


def day_start(date: str) -> float:
    return dt.datetime.fromisoformat(date).replace(tzinfo=dt.UTC).timestamp()


def window_start(now: float, days: int) -> float:
    """Midnight UTC `days - 1` days before today's: the window is today and the days before it."""
    today = dt.datetime.fromtimestamp(now, dt.UTC).date()
    return day_start((today - dt.timedelta(days=days - 1)).isoformat())


@dataclass
class Day:
    """One engine's UTC day. Null (None) is unknown, never 0; `unknown` says why."""

    date: str
    engine: str
    kind: str | None = None
    host: str | None = None
    models: list[str] = field(default_factory=list)
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    requests: int | None = None
    busy_s: float | None = None
    idle_s: float | None = None
    ttft_p50_s: float | None = None
    ttft_p95_s: float | None = None
    energy_kwh: float | None = None
    idle_energy_kwh: float | None = None
    restarts: int = 0
    running_at_start: float | None = None
    running_at_end: float | None = None
    """Requests running at the day's first and last poll: a gateway counts a request when it finishes, the
    engine its tokens as they come, so these are what the two can disagree on at the window's edges."""
    value: float | None = None
    """API-equivalent value of the output tokens (with a price in `[ledger]`)."""
    energy_cost: float | None = None
    unknown: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        doc = asdict(self)
        for key in ("busy_s", "idle_s", "ttft_p50_s", "ttft_p95_s"):
            if doc[key] is not None:
                doc[key] = round(doc[key], 3)
        for key in ("energy_kwh", "idle_energy_kwh", "value", "energy_cost"):
            if doc[key] is not None:
                doc[key] = round(doc[key], 6)
        return doc


@dataclass
class _Acc:
    """One engine-day being summed."""

    kind: str | None = None
    host: str | None = None
    models: dict[str, None] = field(default_factory=dict)
    counters: dict[str, float] = field(default_factory=dict)
    """Growth per counter name; a name is present once the counter was read that day."""
    busy_s: float = 0.0
    idle_s: float = 0.0
    timed: bool = False
    p50s: list[float] = field(default_factory=list)
    p95s: list[float] = field(default_factory=list)
    energy_j: float = 0.0
    idle_energy_j: float = 0.0
    powered: bool = False
    restarts: int = 0
    running_first: float | None = None
    running_last: float | None = None
    reasons: dict[str, str] = field(default_factory=dict)


@dataclass
class _Engine:
    """What the previous stored row of an engine said."""

    at: float | None = None
    raw: dict[str, float] = field(default_factory=dict)
    running: float | None = None
    host: str | None = None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def _tree(values: dict[str, Any], key: str) -> dict[str, Any]:
    found = values.get(key)
    return found if isinstance(found, dict) else {}


def _raw(values: dict[str, Any], name: str) -> float | None:
    """A counter's value at the poll: the `status --json` field where there is one, else the running total
    (a request counter is only stored there)."""
    if name in values:
        return _number(values.get(name))
    return _number(_tree(values, "totals").get(name))


def growth(raw: float, previous: float | None, increase: float | None) -> float:
    """A counter's growth at one row: the reset-safe increase of the poll, or the raw growth since the
    previous stored reading where that is larger (polls or a recorder restart in between); a raw value
    below the previous one with no increase is a restart in the gap, which counts the new value."""
    if previous is None:
        return max(0.0, increase or 0.0)
    step = raw - previous
    if increase is None:
        return step if step >= 0 else raw
    return max(increase, step)


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


class Ledger:
    """Feed stored rows in time order (`add`), then read `days()`. Rows before `start` only serve as the
    predecessors of the first rows in the window."""

    def __init__(self, start: float = -math.inf, end: float = math.inf) -> None:
        self.start = start
        self.end = end
        self._acc: dict[tuple[str, str], _Acc] = {}
        self._engines: dict[str, _Engine] = {}
        self._hosts: dict[str, float] = {}
        self.unattributed_j: dict[tuple[str, str], float] = {}
        """(date, host) -> GPU energy of GPUs no engine is configured on."""
        from poolconsole.model.gateway_ledger import GatewayLedger  # it builds on this module

        self.gateways = GatewayLedger(start, end)
        """The gateways' own accounting per route and caller (poolconsole.model.gateway_ledger)."""
        from poolconsole.model.host_ledger import HostLedger  # it builds on this module

        self.hosts = HostLedger(start, end)
        """Idle burn per host: busy and idle time, power at idle and under load (poolconsole.model.host_ledger)."""

    def _day(self, date: str, engine: str) -> _Acc:
        acc = self._acc.get((date, engine))
        if acc is None:
            acc = self._acc[(date, engine)] = _Acc()
        return acc

    def add(self, row: StoredRow) -> None:
        self.hosts.add(row)
        if row.kind == "engine":
            self._engine(row)
            if row.values.get("kind") in GATEWAY_KINDS:
                self.gateways.gateway(row)
            else:
                self.gateways.engine(row)
        elif row.kind == "host":
            self._host(row)

    def _engine(self, row: StoredRow) -> None:
        v = row.values
        seen = self._engines.setdefault(row.name, _Engine())
        counting = self.start <= row.at < self.end
        acc = self._day(utc_date(row.at), row.name) if counting else None
        increase = _tree(v, "increase")
        for name in COUNTERS.values():
            raw = _raw(v, name)
            if raw is None:
                continue
            grew = growth(raw, seen.raw.get(name), _number(increase.get(name)))
            seen.raw[name] = raw
            if acc is not None:
                acc.counters[name] = acc.counters.get(name, 0.0) + grew
        running = _number(v.get("requests_running"))
        if acc is not None:
            acc.kind = v.get("kind") or acc.kind
            acc.host = v.get("host") or acc.host
            for model in v.get("models") or ():
                acc.models[str(model)] = None
            acc.restarts += int(_number(v.get("counter_resets")) or 0)
            if running is not None:
                acc.running_first = running if acc.running_first is None else acc.running_first
                acc.running_last = running
            unknown = _tree(v, "unknown")
            for name in COUNTERS.values():
                if name in unknown:
                    acc.reasons.setdefault(name, str(unknown[name]))
            if "requests_running" in unknown:
                acc.reasons.setdefault("requests_running", str(unknown["requests_running"]))
            if seen.at is not None and 0 < row.at - seen.at <= MAX_GAP_S and running is not None:
                acc.timed = True
                if running > 0:
                    acc.busy_s += row.at - seen.at
                else:
                    acc.idle_s += row.at - seen.at
            if v.get("ttft_window") == "window":
                p50, p95 = _number(v.get("ttft_p50_s")), _number(v.get("ttft_p95_s"))
                if p50 is not None:
                    acc.p50s.append(p50)
                if p95 is not None:
                    acc.p95s.append(p95)
        seen.at, seen.running = row.at, running
        seen.host = v.get("host") or seen.host

    def _host(self, row: StoredRow) -> None:
        v = row.values
        previous = self._hosts.get(row.name)
        self._hosts[row.name] = row.at
        if previous is None or not 0 < row.at - previous <= MAX_GAP_S or not self.start <= row.at < self.end:
            return
        seconds = row.at - previous
        date = utc_date(row.at)
        pinned = _tree(v, "engine_gpus")
        here = [name for name, e in self._engines.items() if e.host == row.name]
        anywhere = [name for name in here if name not in pinned]
        for gpu in v.get("gpus") or ():
            power = _number(gpu.get("power_w")) if isinstance(gpu, dict) else None
            if power is None:
                continue
            index = gpu.get("index")
            owners = [name for name, gpus in pinned.items() if isinstance(gpus, list) and index in gpus] + anywhere
            joules = power * seconds
            if not owners:
                key = (date, row.name)
                self.unattributed_j[key] = self.unattributed_j.get(key, 0.0) + joules
                continue
            share = joules / len(owners)
            for name in owners:
                acc = self._day(date, name)
                acc.powered = True
                acc.energy_j += share
                engine = self._engines.get(name)
                if (
                    engine is not None
                    and engine.running == 0
                    and engine.at is not None
                    and row.at - engine.at <= MAX_GAP_S
                ):
                    acc.idle_energy_j += share

    def days(self) -> list[Day]:
        """One entry per UTC day and engine, by date then engine."""
        out = []
        for (date, engine), acc in sorted(self._acc.items()):
            day = Day(
                date,
                engine,
                acc.kind,
                acc.host,
                list(acc.models),
                restarts=acc.restarts,
                running_at_start=acc.running_first,
                running_at_end=acc.running_last,
            )
            for field_name, counter in COUNTERS.items():
                if counter in acc.counters:
                    setattr(day, field_name, round(acc.counters[counter]))
                elif counter in acc.reasons:
                    day.unknown[field_name] = acc.reasons[counter]
                elif counter == "requests_finished_total":
                    day.unknown[field_name] = f"no finished-request counter read from this engine ({acc.kind})"
                else:
                    day.unknown[field_name] = "no counter reading this day"
            if acc.timed:
                day.busy_s, day.idle_s = acc.busy_s, acc.idle_s
            else:
                why = acc.reasons.get("requests_running", "no running-requests reading while the engine answered")
                day.unknown["busy_s"] = day.unknown["idle_s"] = why
            if acc.p50s:
                day.ttft_p50_s = statistics.median(acc.p50s)
            if acc.p95s:
                day.ttft_p95_s = _quantile(acc.p95s, 0.95)
            if not acc.p50s and not acc.p95s:
                day.unknown["ttft_p50_s"] = "no request finished in a polled window (or no TTFT histogram)"
            if acc.powered:
                day.energy_kwh = acc.energy_j / 3.6e6
                day.idle_energy_kwh = acc.idle_energy_j / 3.6e6
            else:
                day.unknown["energy_kwh"] = (
                    f"no GPU power reading from host {acc.host}" if acc.host else "the engine names no host"
                )
            out.append(day)
        return out


def short(tokens: float) -> str:
    """412k, 38k, 3.4k, 950, 1.2M."""
    if tokens >= 1e6:
        return f"{tokens / 1e6:.1f}M"
    if tokens >= 10_000:
        return f"{tokens / 1000:.0f}k"
    if tokens >= 1000:
        return f"{tokens / 1000:.1f}k"
    return f"{tokens:.0f}"


def build(
    rows: Iterable[StoredRow], settings: LedgerSettings, *, start: float, end: float, store: str, config: str | None
) -> dict[str, Any]:
    ledger = Ledger(start, end)
    for row in rows:
        ledger.add(row)
    from poolconsole.model.ledger_report import ledger_doc  # it builds on this module

    return ledger_doc(ledger, settings, start=start, end=end, store=store, config=config)
