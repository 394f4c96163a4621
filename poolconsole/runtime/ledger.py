"""The capacity ledger read from the history store (blocking: call it off the event loop). The
aggregation is poolconsole.model.ledger's; this only chooses the rows."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from poolconsole.config.models import LedgerSettings
from poolconsole.model.ledger import LOOKBACK_S, build, window_start
from poolconsole.runtime.store import Reader


def read_ledger(
    path: Path, days: int, now: float, settings: LedgerSettings | None = None, config: str | None = None
) -> dict[str, Any]:
    """The `ledger --json` document of the last `days` UTC days (today included) up to `now` (inclusive: a
    replay's clock stands on a row)."""
    start, end = window_start(now, days), math.nextafter(now, math.inf)
    with Reader(path) as reader:
        rows = reader.rows(start - LOOKBACK_S, end)
        return build(rows, settings or LedgerSettings(), start=start, end=end, store=str(path), config=config)
