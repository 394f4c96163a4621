"""An alert storm as a few lines: one per rule, the targets named (a few) and counted, never a line per
target."""

from __future__ import annotations

from poolconsole.model.alerts import AlertEvent
from poolconsole.model.notices import summarise


def fired(target: str, rule: str, message: str = "") -> AlertEvent:
    return AlertEvent(1.0, target, rule, True, message or f"{rule} on {target}")


def test_a_storm_is_one_line_per_rule() -> None:
    events = [fired(f"eng{i:02d}", "queue", f"{8 + i} requests waiting") for i in range(32)]
    events += [fired("ws48", "down", "unreachable: connection refused"), fired("eng00", "queue")]
    events.append(AlertEvent(1.0, "eng05", "kv_full", False, "cleared"))  # a clear is not announced
    lines = summarise(events)
    assert lines == [
        "32 targets queueing: eng00, eng01, eng02 and 29 more",
        "ws48: unreachable: connection refused",
    ]


def test_more_rules_than_lines_are_counted() -> None:
    events = [fired("a", "queue"), fired("b", "queue"), fired("c", "down"), fired("d", "kv_full")]
    events += [fired("e", "vram_gpu0"), fired("f", "vram_gpu3"), fired("g", "swap")]
    lines = summarise(events)
    assert len(lines) == 3
    assert lines[0] == "2 targets queueing: a, b" and lines[1] == "2 targets with GPU memory nearly full: e, f"
    assert lines[2].endswith("(and 2 other alert(s): the alert log, a, has them all)")
