"""The kernel's `NVRM: Xid` lines, read over SSH beside the nvidia-smi query: the journal's kernel messages of
the last few minutes, falling back to dmesg, each line stamped with seconds since boot, then the host's
uptime, so one parser keeps the lines of the last WINDOW_S whichever source answered. Pure parser, fixed
command."""

from __future__ import annotations

import re

WINDOW_S = 300.0
"""An Xid counts for this long after the kernel logged it (the journal is asked for as much)."""
UNREADABLE = "@poolconsole-dmesg-unreadable"
COMMAND = (
    "journalctl -k -q --no-pager -o short-monotonic --since -5min -g 'NVRM: Xid' 2>/dev/null"
    f" || {{ dmesg 2>/dev/null || echo {UNREADABLE}; }} | grep -F -e 'NVRM: Xid' -e {UNREADABLE} | tail -n 50"
    "; cat /proc/uptime"
)
"""Bounded and cheap: the journal's matches of the last 5 minutes, else dmesg's last 50 Xid lines (whose
own stamps the parser windows), then the uptime. Fixed: nothing in it comes from config or the network."""
_LINE = re.compile(r"^\[\s*(?P<at>\d+(?:\.\d+)?)\].*NVRM: Xid \(PCI:(?P<bus>[0-9A-Fa-f:.]+)\): (?P<code>\d+)")
_UPTIME = re.compile(r"^(\d+(?:\.\d+)?) \d+(?:\.\d+)?$")


def bus_key(bus_id: str | None) -> str | None:
    """A PCI address reduced to bus:device (`00000000:41:00.0` and the Xid line's `0000:41:00` -> `41:00`)."""
    if not bus_id:
        return None
    parts = bus_id.lower().split(".")[0].split(":")
    return ":".join(p[-2:].zfill(2) for p in parts[-2:]) if len(parts) >= 2 else None


def parse(text: str, window_s: float = WINDOW_S) -> dict[str, tuple[int, ...]] | None:
    """Bus key -> the Xid codes logged in the last `window_s`, oldest first; None when the kernel log could
    not be read (no uptime line, or no journal match and dmesg refused): unknown, never "no Xid"."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    uptime = next((float(m.group(1)) for ln in reversed(lines) if (m := _UPTIME.match(ln))), None)
    if uptime is None or any(ln == UNREADABLE for ln in lines):
        return None
    found: dict[str, list[int]] = {}
    for ln in lines:
        m = _LINE.match(ln)
        if m is None or uptime - float(m["at"]) > window_s:
            continue
        key = bus_key(m["bus"])
        if key is not None:
            found.setdefault(key, []).append(int(m["code"]))
    return {k: tuple(v) for k, v in found.items()}


def for_gpu(found: dict[str, tuple[int, ...]] | None, bus_id: str | None) -> tuple[int, ...] | None:
    if found is None:
        return None
    key = bus_key(bus_id)
    return found.get(key, ()) if key is not None else None
