"""Every page against the recorded history (issue 37, "0 false pages"): for each firing notification a
receiver got, the history store the watcher wrote must show the condition, at the rule's clear level, held
for the rule's `for` up to the poll that fired it, and at the fire level when it began. A page the store
cannot vouch for is a finding; so is a rule this audit cannot read from the store (it says which).

Used by the test over `--scenario normal` and by benchmarks/page_latency.py's 30-minute mode. It reads the
store read-only (runtime.store's Reader), after the watcher has stopped or while it runs."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from poolconsole.config.models import AlertSettings
from poolconsole.model.hosts import HostState
from poolconsole.runtime.store.reader import Reader

TOLERANCE_S = 0.01
"""Stored times are the polls' own; a page's startsAt is the firing poll's time in RFC 3339 (milliseconds)."""

Values = Mapping[str, Any]


@dataclass(frozen=True)
class Page:
    """A firing notification as a receiver got it: the rule, the target, when it started."""

    alertname: str
    target: str
    starts_at: float
    labels: Mapping[str, str]


def pages_of(webhook_bodies: Iterable[Mapping[str, Any]]) -> list[Page]:
    """The firing alerts of webhook bodies (Alertmanager's format), each once."""
    seen: dict[tuple[str, str, str], Page] = {}
    for body in webhook_bodies:
        for alert in body.get("alerts", []):
            if alert.get("status") != "firing":
                continue
            labels: dict[str, str] = alert["labels"]
            target = labels.get("engine") or labels.get("host") or labels.get("target") or ""
            at = dt.datetime.fromisoformat(alert["startsAt"].replace("Z", "+00:00")).timestamp()
            key = (labels["alertname"], target, alert["startsAt"])
            seen.setdefault(key, Page(labels["alertname"], target, at, labels))
    return list(seen.values())


@dataclass(frozen=True)
class Condition:
    """A rule as the store can show it: at the clear level (`held`), at the fire level when it began (`began`),
    for `hold` seconds."""

    held: Callable[[Values], bool]
    began: Callable[[Values], bool]
    hold: float


def _num(values: Values, name: str) -> float | None:
    value = values.get(name)
    return float(value) if isinstance(value, int | float) else None


def _at_least(name: str, line: float) -> Callable[[Values], bool]:
    def check(values: Values) -> bool:
        value = _num(values, name)
        return value is not None and value >= line

    return check


def _gpu_share(index: int, line: float) -> Callable[[Values], bool]:
    def check(values: Values) -> bool:
        for gpu in values.get("gpus") or []:
            if isinstance(gpu, Mapping) and gpu.get("index") == index:
                used, total = gpu.get("memory_used_bytes"), gpu.get("memory_total_bytes")
                if not isinstance(used, int | float) or not isinstance(total, int | float) or total <= 0:
                    return False
                return used / total >= line
        return False

    return check


def _engine_down(values: Values) -> bool:
    return values.get("state") in ("down", "auth_failed")


def _host_down(values: Values) -> bool:
    try:
        return not HostState(str(values.get("state"))).answering
    except ValueError:
        return False


def condition(page: Page, s: AlertSettings, is_host: bool) -> Condition | None:
    """The page's rule as the store shows it; None for a rule this audit cannot read from the store."""
    h = s.hysteresis
    if page.alertname == "down":
        down = _host_down if is_host else _engine_down
        return Condition(down, down, s.down_for_s)
    if page.alertname == "kv_full":
        return Condition(_at_least("kv_cache_usage", s.kv_usage - h), _at_least("kv_cache_usage", s.kv_usage),
                         s.kv_usage_for_s)  # fmt: skip
    if page.alertname == "queue":
        clear = max(0.0, s.waiting - 3)
        return Condition(
            _at_least("requests_waiting", clear), _at_least("requests_waiting", s.waiting), s.waiting_for_s
        )
    if page.alertname.startswith("vram_gpu") and page.alertname.removeprefix("vram_gpu").isdigit():
        index = int(page.alertname.removeprefix("vram_gpu"))
        return Condition(_gpu_share(index, s.vram - h), _gpu_share(index, s.vram), s.vram_for_s)
    return None


def _stalled(rows: Sequence[Values], times: Sequence[float], end: int, s: AlertSettings) -> str | None:
    """stalled: busy at the firing poll, and its generation, prompt and progress counters unchanged for stall_s."""
    last = rows[end]
    busy = (_num(last, "requests_running") or 0) + (_num(last, "requests_waiting") or 0) > 0
    if not busy:
        return "nothing running or waiting at the poll that fired it"

    def counters(values: Values) -> tuple[Any, Any, Any]:
        return values.get("generation_tokens_total"), values.get("prompt_tokens_total"), values.get("progress_total")

    first = end
    while first > 0 and counters(rows[first - 1]) == counters(last):
        first -= 1
    still = times[end] - times[first]
    return None if still + TOLERANCE_S >= s.stall_s else f"its counters stood still only {still:.1f} s"


def check(page: Page, rows: Sequence[Values], times: Sequence[float], s: AlertSettings, is_host: bool) -> str | None:
    """None when the store shows the page's condition held for its `for`; else what is wrong, in words."""
    end = next((i for i, t in enumerate(times) if abs(t - page.starts_at) <= TOLERANCE_S), None)
    if end is None:
        return "no recorded poll at its start"
    if page.alertname == "stalled" and not is_host:
        return _stalled(rows, times, end, s)
    cond = condition(page, s, is_host)
    if cond is None:
        return "a rule this audit cannot read from the store"
    if not cond.held(rows[end]):
        return "its condition does not hold at the poll that fired it"
    first = end
    while first > 0 and cond.held(rows[first - 1]):
        first -= 1  # the whole run at the clear level up to the firing poll
    if times[end] - times[first] + TOLERANCE_S < cond.hold:
        return f"its condition held only {times[end] - times[first]:.1f} s of its {cond.hold:g} s"
    latest = times[end] - cond.hold + TOLERANCE_S  # it began (at the fire level) at least `for` before it fired
    if not any(cond.began(rows[i]) for i in range(first, end + 1) if times[i] <= latest):
        return f"it was not at its fire level {cond.hold:g} s before it fired"
    return None


def audit(store: Path, pages: Iterable[Page], settings: AlertSettings, hosts: Iterable[str]) -> list[str]:
    """Every page that the store does not vouch for, in words ("qwen: queue at 12:00:01: ...")."""
    host_names = set(hosts)
    history: dict[str, tuple[list[Values], list[float]]] = {}
    with Reader(store) as reader:
        for row in reader.rows():
            rows, times = history.setdefault(row.name, ([], []))
            rows.append(row.values)
            times.append(row.at)
    findings = []
    for page in pages:
        rows, times = history.get(page.target, ([], []))
        wrong = check(page, rows, times, settings, page.target in host_names)
        if wrong is not None:
            when = dt.datetime.fromtimestamp(page.starts_at, dt.UTC).strftime("%H:%M:%S")
            findings.append(f"{page.target}: {page.alertname} at {when}: {wrong}")
    return findings
