"""Reading the history store (export, replay, the ledger, the console's charts): read-only, never creates a
file, never takes the writer's lock."""

from __future__ import annotations

import heapq
import math
import sqlite3
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from poolconsole.runtime.store.codec import Kind, decode
from poolconsole.runtime.store.files import StoreProblem, check_store


@dataclass(frozen=True)
class Row:
    at: float
    kind: Kind
    name: str
    polls: int
    """How many polls the row stands for: 1 at full resolution, more for a 1-minute rollup."""
    values: dict[str, Any]


class Reader:
    """Read-only access (export, the console's charts): never creates a file, never takes the writer's lock."""

    def __init__(self, path: Path) -> None:
        self.path = path
        if path.is_dir():
            raise StoreProblem(f"{path} is a directory, not a history store")
        if not path.is_file():
            raise StoreProblem(f"no history store at {path} (`poolconsole record` or the console writes one)")
        try:
            self._db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=10)
        except sqlite3.Error as exc:
            raise StoreProblem(f"cannot open the history store {path}: {exc}") from None
        try:
            check_store(self._db, path, new_ok=False)
            self.targets: dict[int, tuple[Kind, str]] = {
                tid: (kind, name) for tid, kind, name in self._db.execute("SELECT id, kind, name FROM targets")
            }
        except StoreProblem:
            self._db.close()
            raise
        except sqlite3.Error as exc:
            self._db.close()
            raise StoreProblem(f"cannot read the history store {path}: {exc}") from None
        self._dicts: dict[int, bytes] = {}

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Reader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def ids(self, names: Sequence[str] | None, kinds: Sequence[str] = ("engine", "host")) -> list[int]:
        return [t for t, (kind, name) in self.targets.items() if kind in kinds and (names is None or name in names)]

    def written_at(self) -> float | None:
        """When the writer last committed (wall clock)."""
        row = self._db.execute("SELECT value FROM meta WHERE key = 'written_at'").fetchone()
        return None if row is None else float(row[0])

    def _zdict(self, dict_id: int | None) -> bytes | None:
        if dict_id is None:
            return None
        data = self._dicts.get(dict_id)
        if data is None:
            row = self._db.execute("SELECT data FROM dicts WHERE id = ?", (dict_id,)).fetchone()
            if row is None:
                raise StoreProblem(f"{self.path} is damaged: a row's dictionary {dict_id} is missing")
            data = self._dicts[dict_id] = bytes(row[0])
        return data

    def _query(self, table: str, start: float, end: float, ids: list[int]) -> Iterator[Row]:
        polls = "polls" if table == "rollups" else "1"
        marks = ",".join("?" * len(ids))
        cursor = self._db.execute(
            f"SELECT at, target, {polls}, dict, data FROM {table} "
            f"WHERE at >= ? AND at < ? AND target IN ({marks}) ORDER BY at, target",
            (start, end, *ids),
        )
        while True:
            try:
                found = cursor.fetchmany(500)
            except sqlite3.Error as exc:
                raise StoreProblem(f"cannot read the history store {self.path}: {exc}") from None
            if not found:
                return
            for at, target, count, dict_id, blob in found:
                kind, name = self.targets[target]
                try:
                    values = decode(blob, self._zdict(dict_id))
                except (zlib.error, ValueError) as exc:
                    raise StoreProblem(
                        f"{self.path} is damaged: a row of {name} at {at} does not decode ({exc})"
                    ) from None
                yield Row(at, kind, name, int(count), values)

    def rows(self, start: float = -math.inf, end: float = math.inf, ids: list[int] | None = None) -> Iterator[Row]:
        """Rollups and full-resolution rows merged in time order."""
        chosen = list(self.targets) if ids is None else ids
        if not chosen:
            return iter(())
        lo, hi = max(start, -1e300), min(end, 1e300)
        return heapq.merge(
            self._query("rollups", lo, hi, chosen), self._query("polls", lo, hi, chosen), key=lambda r: r.at
        )
