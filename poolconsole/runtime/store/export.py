"""`poolconsole export`: the stored rows as JSON lines or CSV, and the times its options take."""

from __future__ import annotations

import csv
import dataclasses
import datetime as dt
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, TextIO

from poolconsole.model.hosts import HostSnapshot, HostState
from poolconsole.model.view import EngineView
from poolconsole.runtime.store.files import StoreProblem
from poolconsole.runtime.store.reader import Reader, Row

ENGINE_FIELDS = [f.name for f in dataclasses.fields(EngineView)] + ["totals"]
HOST_FIELDS = list(HostSnapshot("", "", HostState.OK).to_json())
EXPORT_FIELDS = list(dict.fromkeys(["taken_at", "target_type", "polls", *ENGINE_FIELDS, *HOST_FIELDS]))
"""The columns of `export --format csv`: every field a jsonl row can carry, engines' and hosts'."""

_RELATIVE = re.compile(r"^-\s*(\d+(?:\.\d+)?)\s*(s|m|min|h|d|w)$")
_UNITS = {"s": 1, "m": 60, "min": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_time(text: str, now: float) -> float:
    """ISO 8601 (no offset: UTC), `now`, or relative to now: -30s, -10m, -2h, -7d, -1w."""
    text = text.strip()
    if text == "now":
        return now
    match = _RELATIVE.match(text)
    if match:
        return now - float(match.group(1)) * _UNITS[match.group(2)]
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(
            f"{text!r} is not a time: give ISO 8601 (2026-11-30T14:00:00Z) or a relative one (-10m, -2h, -7d)"
        ) from None
    return (when if when.tzinfo is not None else when.replace(tzinfo=dt.UTC)).timestamp()


def iso(at: float) -> str:
    return dt.datetime.fromtimestamp(at, dt.UTC).isoformat(timespec="milliseconds")


def export_doc(row: Row) -> dict[str, Any]:
    return {"taken_at": iso(row.at), "target_type": row.kind, "polls": row.polls, **row.values}


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, dict | list | bool):
        return json.dumps(value, separators=(",", ":"), allow_nan=False)
    return value


def export(
    path: Path, fmt: Literal["jsonl", "csv"], out: TextIO, start: float, end: float, names: Sequence[str] | None
) -> int:
    """Write one row per poll (or 1-minute rollup) per target in [start, end), time order; the rows written."""
    with Reader(path) as reader:
        known = {name for _, name in reader.targets.values()}
        unknown = [n for n in names or () if n not in known]
        if unknown:
            listed = ", ".join(sorted(known)) or "none yet"
            raise StoreProblem(f"{path} has no target named {', '.join(unknown)} (it has: {listed})")
        count = 0
        writer = csv.writer(out, lineterminator="\n") if fmt == "csv" else None
        if writer is not None:
            writer.writerow(EXPORT_FIELDS)
        for row in reader.rows(start, end, reader.ids(names)):
            doc = export_doc(row)
            if writer is not None:
                writer.writerow([_cell(doc.get(k)) for k in EXPORT_FIELDS])
            else:
                out.write(json.dumps(doc, allow_nan=False) + "\n")
            count += 1
        return count
