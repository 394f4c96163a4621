"""Every smoke run in SQLite with its conditions, and the comparison with a target's baseline
(its last passing run of the same check, model and concurrency)."""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from platformdirs import user_data_path

from poolconsole.model.smoke import Change
from poolconsole.ops.sqlite import StoreUnusable, require, transaction

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
CREATE TABLE IF NOT EXISTS conditions (
    run_id INTEGER NOT NULL REFERENCES runs(id), target TEXT NOT NULL, doc TEXT NOT NULL,
    PRIMARY KEY (run_id, target)
);
"""


def default_db() -> Path:
    return user_data_path("poolconsole") / "smoke.sqlite3"


WHAT = "a smoke-run store"


@contextmanager
def connect(path: Path) -> Iterator[sqlite3.Connection]:
    """One transaction on the store; a file that cannot be used raises StoreUnusable naming it."""
    with transaction(path, SCHEMA, WHAT) as db:
        yield db


def require_writable(path: Path) -> None:
    """Raises StoreUnusable now where a run could not be stored at `path`, before its checks run."""
    require(path, WHAT, SCHEMA)


def require_existing(path: Path) -> None:
    """A store named on the command line must be there to be read: a missing one is a typo, not 'no runs'."""
    if not path.exists():
        raise StoreUnusable(f"no smoke-run store at {path}")


def _get(d: dict[str, Any] | None, key: str) -> float | None:
    return d.get(key) if d else None


def save_run(
    path: Path,
    seed: int,
    passed: bool,
    command: str,
    results: list[dict[str, Any]],
    conditions: Mapping[str, Mapping[str, Any]],
) -> int:
    """The run, its results, and the conditions of every target it measured (what `runs` lists)."""
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
        for target in dict.fromkeys(r["target"] for r in results):
            db.execute(
                "INSERT INTO conditions VALUES (?, ?, ?)", (run, target, json.dumps(dict(conditions.get(target, {}))))
            )
        return run


def link_runs(path: Path, target: str, baseline: int, candidate: int) -> None:
    """An A/B pair (`smoke --ab`): each run's conditions of `target` name the other run
    (`ab.baseline_run`, `ab.candidate_run`)."""
    with connect(path) as db:
        for run in (baseline, candidate):
            row = db.execute("SELECT doc FROM conditions WHERE run_id = ? AND target = ?", (run, target)).fetchone()
            doc = json.loads(row[0]) if row else {}
            doc.setdefault("ab", {}).update(baseline_run=baseline, candidate_run=candidate)
            db.execute("INSERT OR REPLACE INTO conditions VALUES (?, ?, ?)", (run, target, json.dumps(doc)))


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


# -- condition-logged runs: `poolconsole runs` ---------------------------------------------------------
RESULT_FIGURES = ("ttft_p50", "ttft_p95", "itl_p95", "tps_per_stream", "tps_aggregate")
"""The timed figures `runs` shows and `runs --compare` sets side by side."""
_OLD_CONDITIONS = {
    "kind": "engine_kind",
    "version": "engine_version",
    "profile": "profile",
    "quantization": "quantization",
}
"""A run stored before its conditions had a table of their own: what its results' columns held."""


def _measured(doc: str) -> dict[str, Any]:
    """A workload run's result keeps its workload and acceptance (`smoke --workload`)."""
    full = json.loads(doc)
    return {k: full[k] for k in ("workload", "spec_decode_acceptance_rate") if k in full}


def _run_doc(db: sqlite3.Connection, row: sqlite3.Row) -> dict[str, Any]:
    results = db.execute("SELECT * FROM results WHERE run_id = ? ORDER BY rowid", (row["id"],)).fetchall()
    stored = {
        t: json.loads(d) for t, d in db.execute("SELECT target, doc FROM conditions WHERE run_id = ?", (row["id"],))
    }
    targets: dict[str, dict[str, Any]] = {}
    for r in results:
        if r["target"] not in targets:
            targets[r["target"]] = stored.get(r["target"]) or {k: r[c] for k, c in _OLD_CONDITIONS.items()}
    return {
        "run_id": row["id"],
        "started_at": dt.datetime.fromtimestamp(row["started_at"], dt.UTC).isoformat(timespec="seconds"),
        "passed": bool(row["passed"]),
        "seed": row["seed"],
        "command": row["command"],
        "conditions": targets,
        "results": [
            {
                "target": r["target"],
                "model": r["model"],
                "check": r["check_name"],
                "concurrency": r["concurrency"],
                "passed": bool(r["passed"]),
                "reason": r["reason"],
                **{f: r[f] for f in RESULT_FIGURES},
                **_measured(r["doc"]),
            }
            for r in results
        ],
    }


def list_runs(path: Path, target: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
    """The newest runs first, each with the conditions of every target it measured and its results;
    `target` keeps the runs that measured it (and only its part of them)."""
    if not path.exists():
        return []
    with connect(path) as db:
        db.row_factory = sqlite3.Row
        if target is None:
            rows = db.execute("SELECT * FROM runs ORDER BY id DESC LIMIT ?", (limit,)).fetchall()
        else:
            rows = db.execute(
                "SELECT * FROM runs WHERE id IN (SELECT run_id FROM results WHERE target = ?) ORDER BY id DESC LIMIT ?",
                (target, limit),
            ).fetchall()
        docs = [_run_doc(db, row) for row in rows]
    if target is not None:
        for doc in docs:
            doc["conditions"] = {t: c for t, c in doc["conditions"].items() if t == target}
            doc["results"] = [r for r in doc["results"] if r["target"] == target]
    return docs


def get_run(path: Path, run_id: int) -> dict[str, Any] | None:
    if not path.exists():
        return None
    with connect(path) as db:
        db.row_factory = sqlite3.Row
        row = db.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
        return None if row is None else _run_doc(db, row)


def compare_runs(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Two runs side by side: per target the conditions that differ, per result (target, model, check,
    concurrency) the outcome and timed figures that differ, and what only one of them measured."""
    conditions = []
    disagree = []
    for run in (a, b):
        for target, c in run["conditions"].items():
            for d in c.get("engine_disagrees") or ():
                disagree.append({"run": run["run_id"], "target": target, "profile_name": c.get("profile"), **d})
    for target in dict.fromkeys([*a["conditions"], *b["conditions"]]):
        ca, cb = a["conditions"].get(target), b["conditions"].get(target)
        if ca is None or cb is None:
            conditions.append({"target": target, "only_in": a["run_id"] if cb is None else b["run_id"]})
            continue
        ca, cb = _flat(ca), _flat(cb)
        for key in dict.fromkeys([*ca, *cb]):
            if ca.get(key) != cb.get(key):
                conditions.append({"target": target, "condition": key, "a": ca.get(key), "b": cb.get(key)})

    def result_key(r: dict[str, Any]) -> tuple[str, str, str, int | None]:
        return (r["target"], r["model"], r["check"], r["concurrency"])

    ra, rb = {result_key(r): r for r in a["results"]}, {result_key(r): r for r in b["results"]}
    results = []
    for k in dict.fromkeys([*ra, *rb]):
        x, y = ra.get(k), rb.get(k)
        where = {"target": k[0], "model": k[1], "check": k[2], "concurrency": k[3]}
        if x is None or y is None:
            results.append({**where, "only_in": a["run_id"] if y is None else b["run_id"]})
            continue
        if x["passed"] != y["passed"]:
            results.append({**where, "figure": "passed", "a": x["passed"], "b": y["passed"]})
        for figure in RESULT_FIGURES:
            before, now = x[figure], y[figure]
            if before == now:
                continue
            change = round((now - before) / before * 100, 1) if before and now is not None else None
            results.append({**where, "figure": figure, "a": before, "b": now, "change_pct": change})
    return {
        "a": a["run_id"],
        "b": b["run_id"],
        "conditions": conditions,
        "results": results,
        "engine_disagrees": disagree,
    }


_NESTED = ("engine_reported",)
_NOT_COMPARED = ("engine_disagrees", "ab")
"""`engine_disagrees` is listed on its own; an A/B pair's link always differs."""


def _flat(c: dict[str, Any]) -> dict[str, Any]:
    """A target's conditions with what the engine reported as `engine_reported.FIELD` keys (compared one
    by one), the source it was read from left out."""
    out = {k: v for k, v in c.items() if k not in _NESTED and k not in _NOT_COMPARED}
    for key in _NESTED:
        for field, value in (c.get(key) or {}).items():
            if field != "source":
                out[f"{key}.{field}"] = value
    return out
