"""The audit log's automatic actions (issue 38): an entry the watcher's remediation wrote says so
(`automatic`, `rule`) in `audit --json` and in the text form; an audit log written before these columns gains
them when next opened, its entries read as an operator's, and a new automatic entry lands beside them."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from poolconsole.ops import audit

OLD_SCHEMA = """
CREATE TABLE actions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at REAL NOT NULL, user TEXT NOT NULL, action TEXT NOT NULL, target TEXT NOT NULL,
    profile_from TEXT, profile_to TEXT, commands TEXT NOT NULL,
    outcome TEXT NOT NULL, detail TEXT NOT NULL, duration_s REAL NOT NULL
);
CREATE TABLE active_profiles (engine TEXT PRIMARY KEY, profile TEXT NOT NULL, at REAL NOT NULL);
"""


def test_an_automatic_entry_says_so_in_json_and_text(tmp_path: Path) -> None:
    path = tmp_path / "audit.sqlite3"
    audit.record(path, "restart", "e1", ["docker restart e1"], "ok", "serving after 3.0 s", 3.0)
    audit.record(
        path, "restart", "e1", ["docker restart e1"], "ok", "serving after 2.0 s", 2.0, automatic=True, rule="stalled"
    )
    auto, by_hand = audit.entries(path)
    assert (auto.automatic, auto.rule) == (True, "stalled")
    assert (by_hand.automatic, by_hand.rule) == (False, None)
    shown = json.loads(json.dumps([auto.to_json(), by_hand.to_json()]))
    assert shown[0]["automatic"] is True and shown[0]["rule"] == "stalled"
    assert shown[1]["automatic"] is False and shown[1]["rule"] is None
    assert "restart (automatic: stalled) e1: ok" in auto.text()
    assert "automatic" not in by_hand.text()


def test_an_older_audit_log_gains_the_columns_and_keeps_its_entries(tmp_path: Path) -> None:
    path = tmp_path / "audit.sqlite3"
    db = sqlite3.connect(path)
    with db:
        db.executescript(OLD_SCHEMA)
        db.execute(
            "INSERT INTO actions (at, user, action, target, profile_from, profile_to, commands, outcome, detail, "
            "duration_s) VALUES (1.0, 'op', 'rollover', 'e1', 'a', 'b', '[]', 'ok', 'serving b', 4.0)"
        )
    db.close()
    (old,) = audit.entries(path)
    assert (old.action, old.automatic, old.rule) == ("rollover", False, None)
    audit.record(path, "rollover", "e1", [], "ok", "serving a", 1.0, "b", "a", automatic=True, rule="restart_loop")
    new, old_again = audit.entries(path)
    assert (new.automatic, new.rule) == (True, "restart_loop") and old_again == old
    columns = {row[1] for row in sqlite3.connect(path).execute("PRAGMA table_info(actions)")}
    assert {"automatic", "rule"} <= columns


def test_the_previous_profile_is_the_one_before_the_last_promoted_rollover(tmp_path: Path) -> None:
    path = tmp_path / "audit.sqlite3"
    assert audit.previous_profile(path, "e1") is None
    audit.record(path, "rollover", "e1", [], "ok", "", 1.0, "fp8", "awq")
    audit.record(path, "rollover", "e1", [], "rolled back", "", 1.0, "awq", "broken")
    audit.record(path, "rollover", "e1", [], "ok", "", 1.0, "awq", "awq")  # a re-apply changes nothing
    audit.record(path, "rollover", "e2", [], "ok", "", 1.0, "x", "y")
    assert audit.previous_profile(path, "e1") == "fp8"
