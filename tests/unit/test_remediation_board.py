"""The remediation's board and its cancel (issue 38, item 3), on a fake clock and a real SQLite file in tmp_path:
the ladder lists each case waiting out its grace (the action, when, the budget left) and none that acts, cleared,
gave up or was cancelled; a cancellation of the case drops its action, is announced, and the case stays
notify-only until it clears (a later case acts again); the watcher's board writes and deletes its rows in the
state file, the console reads them read-only and writes a cancellation that the watcher's side reads; the
workflow's cancel writes it and audits it, and says a file it cannot write."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from poolconsole.ops import audit
from poolconsole.runtime.pager import state_path
from poolconsole.runtime.remediation_board import BEAT_S, STALE_S, Board, Cancel, Pending, add_cancel, read_pending
from poolconsole.workflows import remediation_cancel
from poolconsole.workflows.remediation import Ladder
from tests.unit.test_remediation_ladder import acts, config, stalled


def test_the_board_lists_a_case_waiting_out_its_grace_until_it_acts() -> None:
    ladder = Ladder(config("", 'on_crash_loop = "rollback"'))
    ladder.tick(1000.0, stalled("a"))
    (row,) = ladder.pending(1010.0)
    assert row == Pending("a", "stalled", "restart", 1060.0, 3, 3, 1000.0)
    assert row.words(1020.0) == "auto-restart of a in 40 s (3 of 3 left this hour)"
    assert row.words(1060.0) == "auto-restart of a due now (3 of 3 left this hour)"
    assert acts(ladder.tick(1060.0, stalled("a"))) == [("a", "restart")]
    assert ladder.pending(1060.0) == []  # acting: no countdown
    ladder.finished("a", 1070.0, serving=True, seconds=10.0, detail="ok")
    (climb,) = ladder.pending(1070.0)  # served, but if the rule still fires grace_s later: a rollback
    assert (climb.action, climb.left) == ("rollback", 2) and climb.due_at == 1360.0  # the cooldown's end
    ladder.tick(1080.0, {})
    assert ladder.pending(1080.0) == []  # cleared


def test_a_cancelled_case_is_not_acted_on_and_is_announced_until_it_clears() -> None:
    ladder = Ladder(config())
    ladder.tick(0.0, stalled("a", "c"))
    assert ladder.cancel(Cancel("a", "stalled", 1.0, 10.0, "ann")) is None  # another case (opened at 1.0)
    step = ladder.cancel(Cancel("a", "stalled", 0.0, 10.0, "ann"))
    assert step is not None and step.stage == "cancelled" and step.action is None
    assert step.words.startswith("auto-restart of a cancelled by an operator (ann): stalled: 5 running")
    assert [p.engine for p in ladder.pending(10.0)] == ["c"]
    assert acts(ladder.tick(60.0, stalled("a", "c"))) == [("c", "restart")]  # a: notify only
    assert acts(ladder.tick(600.0, stalled("a", "c"))) == [] and "a" not in ladder.spent
    assert ladder.cancel(Cancel("a", "stalled", 0.0, 11.0, "ann")) is None  # said once
    ladder.tick(601.0, {"c": stalled("c")["c"]})  # a cleared
    ladder.tick(700.0, stalled("a"))  # a new case on a: acted on as usual
    assert acts(ladder.tick(760.0, stalled("a"))) == [("a", "restart")]


def test_a_case_already_acting_is_not_cancelled() -> None:
    ladder = Ladder(config())
    ladder.tick(0.0, stalled("a"))
    ladder.tick(60.0, stalled("a"))
    assert ladder.cancel(Cancel("a", "stalled", 0.0, 61.0, "ann")) is None


def test_a_dry_run_shows_no_board() -> None:
    ladder = Ladder(config(), dry_run=True)
    ladder.tick(0.0, stalled("a"))
    assert ladder.pending(1.0) == []


def test_the_watchers_board_writes_and_deletes_rows_the_console_reads(tmp_path: Path) -> None:
    path = state_path(tmp_path / "history.sqlite3")
    assert read_pending(path) == []  # no watcher yet
    board = Board(path)
    try:
        row = Pending("a", "stalled", "restart", 1060.0, 2, 3, 1000.0)
        board.show([row])
        assert read_pending(path) == [row] == board.pending()
        board.show([])  # it acted, cleared or gave up
        assert read_pending(path) == []
        add_cancel(path, Cancel("a", "stalled", 1000.0, 1010.0, "ann"))  # the console's
        assert board.cancels(1000.0) == [Cancel("a", "stalled", 1000.0, 1010.0, "ann")]
        assert board.cancels(1011.0) == []
    finally:
        board.close()


def test_the_cancel_workflow_writes_the_cancellation_and_audits_it(tmp_path: Path) -> None:
    store = tmp_path / "history.sqlite3"
    board = Board(state_path(store))
    row = Pending("a", "stalled", "restart", 1060.0, 2, 3, 1000.0)
    board.show([row])
    (seen,) = remediation_cancel.pending(store)
    plan = remediation_cancel.plan(store, seen, "ann", 1020.0)
    assert plan.question == "Cancel the automatic restart of a?"
    assert "in 40 s (2 of 3 left this hour)" in plan.lines[0]
    outcome = asyncio.run(remediation_cancel.run(plan, tmp_path / "audit.sqlite3"))
    assert outcome.ok, outcome.detail
    (cancel,) = board.cancels(0.0)
    board.close()
    assert (cancel.engine, cancel.rule, cancel.opened_at, cancel.by) == ("a", "stalled", 1000.0, "ann")
    (entry,) = audit.entries(tmp_path / "audit.sqlite3")
    assert (entry.action, entry.target, entry.outcome) == ("cancel_remediation", "a/stalled", "ok")
    assert entry.automatic is False


def test_a_cancel_that_cannot_be_written_says_so_and_is_audited_as_failed(tmp_path: Path) -> None:
    row = Pending("a", "stalled", "restart", 1060.0, 2, 3, 1000.0)
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    plan = remediation_cancel.plan(blocked / "history.sqlite3", row, "ann", 1020.0)
    outcome = asyncio.run(remediation_cancel.run(plan, tmp_path / "audit.sqlite3"))
    assert not outcome.ok and outcome.detail.startswith("cannot write ")
    (entry,) = audit.entries(tmp_path / "audit.sqlite3")
    assert entry.outcome == "failed"


def test_two_watchers_on_one_store_keep_each_others_rows_and_hear_only_their_own_cancels(tmp_path: Path) -> None:
    """Two watchers (two pools, or two configs) on one history store: each one's board writes and clears only its
    own rows, and a cancellation of one's case reaches that one only."""
    path = state_path(tmp_path / "history.sqlite3")
    first, second = Board(path), Board(path)
    try:
        assert first.watcher != second.watcher
        mine = Pending("a", "stalled", "restart", 1060.0, 2, 3, 1000.0)
        theirs = Pending("b", "down", "restart", 1090.0, 3, 3, 1030.0)
        first.show([mine])
        second.show([theirs])
        assert [(p.engine, p.watcher) for p in read_pending(path)] == [("a", first.watcher), ("b", second.watcher)]
        second.show([])  # the second's case cleared: the first's countdown stays
        (row,) = read_pending(path)
        assert (row.engine, row.watcher) == ("a", first.watcher)
        second.show([theirs])
        asyncio.run(remediation_cancel.run(remediation_cancel.plan(path.parent / "history.sqlite3", row, "ann", 1020.0),
                                           tmp_path / "audit.sqlite3"))  # fmt: skip
        assert [(c.engine, c.watcher) for c in first.cancels(0.0)] == [("a", first.watcher)]
        assert second.cancels(0.0) == []
    finally:
        first.close()
        second.close()


def test_a_dead_watchers_rows_are_hidden_once_stale_and_dropped_by_the_next_write(tmp_path: Path) -> None:
    """A watcher killed without its goodbye leaves rows; a live one refreshes its own each BEAT_S, so the console
    hides rows not refreshed for STALE_S and any watcher's next write deletes them."""
    path = state_path(tmp_path / "history.sqlite3")
    dead, live = Board(path), Board(path)
    try:
        dead.show([Pending("a", "stalled", "restart", 1060.0, 2, 3, 1000.0)], now=1000.0)
        rows = [Pending("b", "down", "restart", 1090.0, 3, 3, 1030.0)]
        live.show(rows, now=1000.0)
        assert len(read_pending(path, now=1000.0 + STALE_S - 1)) == 2
        assert not live.changes(rows, 1000.0 + BEAT_S - 1)  # nothing written each tick
        assert live.changes(rows, 1000.0 + BEAT_S)  # the same rows, refreshed
        live.show(rows, now=1000.0 + STALE_S)
        assert [p.engine for p in read_pending(path, now=1001.0 + STALE_S)] == ["b"]
        assert [p.engine for p in live.pending()] == ["b"]  # deleted, not only hidden
    finally:
        dead.close()
        live.close()


def test_a_board_written_before_watchers_had_ids_is_replaced(tmp_path: Path) -> None:
    path = state_path(tmp_path / "history.sqlite3")
    old = sqlite3.connect(path)
    old.executescript(
        "CREATE TABLE remediation_pending (engine TEXT PRIMARY KEY, rule TEXT NOT NULL, action TEXT NOT NULL, "
        "due_at REAL NOT NULL, left INTEGER NOT NULL, per_hour INTEGER NOT NULL, opened_at REAL NOT NULL);"
        "INSERT INTO remediation_pending VALUES ('a', 'stalled', 'restart', 1060, 2, 3, 1000);"
    )
    old.commit()
    old.close()
    assert read_pending(path) == []  # an old watcher's row: no id, not shown
    board = Board(path)
    try:
        board.show([Pending("b", "down", "restart", 1090.0, 3, 3, 1030.0)])
        assert [p.engine for p in read_pending(path)] == ["b"]
    finally:
        board.close()
