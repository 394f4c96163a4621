"""Alerts that fired in one burst, summarised for a person: one line per rule ("5 engines queueing:
qwen3-next-80b, ..."), never one notice per target. A console shows these instead of a toast per event,
so an alert storm neither buries the table nor costs more than the polls that raised it."""

from __future__ import annotations

from collections.abc import Iterable

from poolconsole.model import gpu_health
from poolconsole.model.alerts import AlertEvent

WORDS = {
    "down": "down",
    "queue": "queueing",
    "kv_full": "with a full KV cache",
    "tps_collapse": "with tok/s collapsed",
    "restart_loop": "in a restart loop",
    "swap": "swapping on unified memory",
    "stalled": "stalled (answering, generating nothing)",
    "canary": "idle and not answering a one-token canary",
    "slo_burn_page": "burning its TTFT error budget fast",
    "slo_burn_warn": "burning its TTFT error budget",
    "gpu_xid": "with a GPU Xid in the kernel log",
    "gpu_ecc": "with uncorrected GPU memory errors",
    "gpu_throttle": "with GPU clocks held down",
    "gpu_pcie": "with a PCIe link below its maximum",
}
SHOWN = 3
"""Targets named per line; the rest are counted."""
LINES = 3
"""Lines per burst; further rules are counted in the last one."""


def _rule(event: AlertEvent) -> str:
    per_gpu = gpu_health.split(event.rule)
    if per_gpu is not None:
        return per_gpu[0]
    return "vram" if event.rule.startswith("vram_gpu") else event.rule


def summarise(events: Iterable[AlertEvent]) -> list[str]:
    """The fired events of one burst as at most LINES lines, the largest groups first."""
    groups: dict[str, dict[str, AlertEvent]] = {}
    for event in events:
        if event.fired:
            groups.setdefault(_rule(event), {})[event.target] = event  # a target's latest, once
    lines: list[str] = []
    ordered = sorted(groups.items(), key=lambda item: (-len(item[1]), item[0]))
    for rule, by_target in ordered[:LINES]:
        if len(by_target) == 1:
            event = next(iter(by_target.values()))
            lines.append(f"{event.target}: {event.message}")
            continue
        names = sorted(by_target)
        more = f" and {len(names) - SHOWN} more" if len(names) > SHOWN else ""
        what = WORDS.get(rule, "with GPU memory nearly full" if rule == "vram" else f"alerting ({rule})")
        lines.append(f"{len(names)} targets {what}: {', '.join(names[:SHOWN])}{more}")
    rest = sum(len(g) for _, g in ordered[LINES:])
    if rest:
        lines[-1] += f" (and {rest} other alert(s): the alert log, a, has them all)"
    return lines
