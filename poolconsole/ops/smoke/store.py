"""Every smoke run in SQLite with its conditions, and the comparison with a target's baseline
(its last passing run of the same check, model and concurrency)."""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from platformdirs import user_data_path

from poolconsole.ops.sqlite import open_db

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    started_at REAL NOT NULL,
    seed INTEGER NOT NULL,
    passed INTEGER NOT NULL,
    command TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS results (
    run_id INTEGER NOT NULL REFERENCES runs(id),
    at REAL NOT NULL,
    target TEXT NOT NULL, model TEXT NOT NULL, check_name TEXT NOT NULL,
    engine_kind TEXT, engine_version TEXT, profile TEXT, quantization TEXT,
    concurrency INTEGER, requests INTEGER, prompt_tokens INTEGER, output_tokens INTEGER,
    passed INTEGER NOT NULL, reason TEXT NOT NULL,
    ttft_mean REAL, ttft_p50 REAL, ttft_p95 REAL, itl_mean REAL, itl_p95 REAL,
    tps_per_stream REAL, tps_aggregate REAL,
    doc TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS results_key ON results(target, model, check_name, concurrency, passed);
"""


def default_db() -> Path:
    return user_data_path("poolconsole") / "smoke.sqlite3"


def connect(path: Path) -> sqlite3.Connection:
    return open_db(path, SCHEMA)


def _get(d: dict[str, Any] | None, key: str) -> float | None:
    return d.get(key) if d else None


def save_run(
    path: Path,
    seed: int,
    passed: bool,
    command: str,
    results: list[dict[str, Any]],
    conditions: dict[str, dict[str, str | None]],
) -> int:
    with connect(path) as db:
        run = db.execute(
            "INSERT INTO runs (started_at, seed, passed, command) VALUES (?, ?, ?, ?)",
            (time.time(), seed, int(passed), command),
        ).lastrowid
        assert run is not None
        for r in results:
            cond = conditions.get(r["target"], {})
            db.execute(
                "INSERT INTO results VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    run,
                    time.time(),
                    r["target"],
                    r["model"],
                    r["check"],
                    cond.get("kind"),
                    cond.get("version"),
                    cond.get("profile"),
                    cond.get("quantization"),
                    r["concurrency"],
                    r["requests"],
                    r["prompt_tokens"],
                    r["output_tokens"],
                    int(r["passed"]),
                    r["reason"],
                    _get(r["ttft_s"], "mean"),
                    _get(r["ttft_s"], "p50"),
                    _get(r["ttft_s"], "p95"),
                    _get(r["itl_s"], "mean"),
                    _get(r["itl_s"], "p95"),
                    _get(r["output_tokens_per_s"], "per_stream"),
                    _get(r["output_tokens_per_s"], "aggregate"),
                    json.dumps(r),
                ),
            )
        return run


@dataclass(frozen=True)
class Change:
    target: str
    model: str
    check: str
    concurrency: int | None
    figure: str
    baseline: float
    now: float
    regression: bool

    @property
    def change_pct(self) -> float:
        return (self.now - self.baseline) / self.baseline * 100 if self.baseline else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "model": self.model,
            "check": self.check,
            "concurrency": self.concurrency,
            "figure": self.figure,
            "baseline": self.baseline,
            "now": self.now,
            "change_pct": round(self.change_pct, 1),
            "regression": self.regression,
        }


# (column, higher is worse)
FIGURES = (
    ("ttft_p95", True),
    ("ttft_mean", True),
    ("itl_p95", True),
    ("tps_per_stream", False),
    ("tps_aggregate", False),
)


def compare(path: Path, run_id: int, threshold: float = 0.10) -> list[Change]:
    """This run's timed results against the last passing run before it with the same target, model, check
    and concurrency; a change over `threshold` in the bad direction is a regression."""
    changes: list[Change] = []
    with connect(path) as db:
        db.row_factory = sqlite3.Row
        rows = db.execute("SELECT * FROM results WHERE run_id = ? AND ttft_mean IS NOT NULL", (run_id,)).fetchall()
        for row in rows:
            base = db.execute(
                "SELECT * FROM results WHERE run_id < ? AND target = ? AND model = ? AND check_name = ? "
                "AND concurrency IS ? AND passed = 1 ORDER BY run_id DESC LIMIT 1",
                (run_id, row["target"], row["model"], row["check_name"], row["concurrency"]),
            ).fetchone()
            if base is None:
                continue
            for figure, higher_is_worse in FIGURES:
                before, now = base[figure], row[figure]
                if before is None or now is None or before <= 0:
                    continue
                delta = (now - before) / before
                worse = delta > threshold if higher_is_worse else delta < -threshold
                changes.append(
                    Change(
                        row["target"], row["model"], row["check_name"], row["concurrency"], figure, before, now, worse
                    )
                )
    return changes
