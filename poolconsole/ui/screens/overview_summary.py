"""The overview's two panes beside its table: the summary over it (the verdict, the watcher's pending
automatic actions counting down, then the totals) and the events pane under it. Each is redrawn only when
what it shows, the width or the theme changed, and lays the screen out again only when its height did."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rich.text import Text
from textual.widgets import Static

from poolconsole.config.models import PoolConfig
from poolconsole.model.actions import key_label
from poolconsole.model.events import EventLog
from poolconsole.model.summary import Summary
from poolconsole.runtime.store import store_path
from poolconsole.ui import cells
from poolconsole.ui.screens import overview_panes

if TYPE_CHECKING:
    from poolconsole.runtime.remediation_board import Pending

BOARD_FIRST_S = 1.0
"""When the overview first reads the watcher's board: after the launch's first frame with data (about 0.5 s
on 32 engines), which its modules and the read, in a thread but holding the interpreter, delayed by ~15 ms."""
BOARD_EVERY_S = 3.0
"""How often the overview reads the watcher's board (its pending automatic actions) while there is none..."""
COUNTDOWN_EVERY_S = 1.0
"""...and while there is one: its line counts each second (as the alert log's does)."""


def board_of(store: Path | None, config: PoolConfig, live: bool) -> Path | None:
    """The history store whose watcher's state file holds the board: the one the console records into, else
    (a live console that does not record) where the config's watcher records; None: no board (a replay)."""
    return store if store is not None or not live else store_path(config)


def read_board(store: Path) -> list[Pending]:
    """The watcher's pending automatic actions, soonest first; none where its state file is absent or cannot
    be read (the alert log says which). Blocking: call it in a thread."""
    # imported here, in the thread, not with the overview: the pager's and the board's modules (the
    # notifications' model among them) cost the launch about 15 ms of CPU before its first frame
    from poolconsole.runtime.pager import state_path
    from poolconsole.runtime.remediation_board import read_pending

    try:
        return read_pending(state_path(store))
    except (sqlite3.Error, OSError):
        return []


def cancel_hint(keys: Mapping[str, str], read_only: bool) -> str:
    """Said after a pending automatic action on the overview: where it is cancelled (the alert log's key,
    then its cancel_auto key); nothing in a read-only console, which cannot cancel it."""
    if read_only:
        return ""
    alerts, cancel = key_label(keys.get("alerts", "a")), key_label(keys.get("cancel_auto", "X"))
    return f"   ({alerts}, then {cancel}, cancels)"


class Panes:
    """The summary and events boxes (yielded by the screen's compose) and what was last drawn in them."""

    def __init__(self, events: EventLog | None, hint: str | None, cancel_hint: str) -> None:
        self.summary_box = Static("", id="summary", markup=False)
        self.events_box = Static("", id="events", markup=False)
        self.events = events
        """The timeline the events pane shows, newest first (None: no pane)."""
        self.hint = hint
        """The line shown above the table (its wrapped lines are taken from the table's)."""
        self.cancel_hint = cancel_hint
        """Said after each pending automatic action: where it is cancelled ("" in a read-only console)."""
        self.pending: list[Pending] = []
        """The watcher's pending automatic actions, soonest first (its board, as last read)."""
        self.show_events: bool | None = None
        """The events pane as `e` left it (None: shown while the table keeps ROWS_KEPT lines of rows with it)."""
        self.folded = False
        """Whether the summary is folded to its verdict and one line of figures (a short terminal)."""
        self._summary_drawn: tuple[str, int, bool, tuple[str, ...]] | None = None
        self._events_drawn: tuple[int, int, int, str] | None = None
        self._box_lines: dict[str, int] = {}
        """Lines each `height: auto` box (summary, events) took when last drawn."""

    def countdown(self, now: float) -> tuple[str, ...]:
        """The pending automatic actions in words, one line each: auto-restart of X in 40 s (2 of 3 left this
        hour)."""
        return tuple(p.words(now) for p in self.pending)

    def width(self) -> int:
        return max(20, self.summary_box.content_size.width or self.summary_box.app.size.width - 2)

    def room(self, summary: Summary | None, filtering: bool) -> tuple[bool, bool]:
        """(whether the events pane fits, whether the whole summary does) on this terminal: each only while
        the table keeps ROWS_KEPT lines of rows with it; the events pane gives way first. The pane as `e`
        left it, when it was pressed. `filtering`: the filter box is open over the table."""
        app = self.summary_box.app
        height = app.size.height
        width = self.width()
        chrome = overview_panes.CHROME
        if self.hint:
            chrome += len(Text(self.hint).wrap(app.console, width))
        if filtering:
            chrome += 3  # its tall border
        lines = overview_panes.summary_lines(summary, width) if summary is not None else 1
        lines += len(self.pending)
        pane = overview_panes.events_lines(height) if self.events is not None else 0
        return overview_panes.room(height, chrome, lines, pane, self.show_events)

    def draw_summary(self, summary: Summary | None, filtering: bool, now: float) -> None:
        if summary is None:
            return
        box = self.summary_box
        width = self.width()
        self.folded = not self.room(summary, filtering)[1]
        countdown = self.countdown(now)
        drawn = (summary.verdict + "\n".join(summary.lines), width, self.folded, countdown)
        if drawn == self._summary_drawn:
            return
        self._summary_drawn = drawn
        c = cells.Colors.from_theme(box.app.theme_variables)
        text = overview_panes.summary_text(summary, width, c, self.folded)
        if countdown:
            text = with_countdown(text, countdown, self.cancel_hint, width, c)
        box.update(text, layout=self._height_changed(box, text))

    def draw_events(self, summary: Summary | None, filtering: bool) -> None:
        """The newest events under the table, as many as the pane's lines hold; redrawn only when the
        log, the width or the theme changed."""
        pane = self.events_box
        log = self.events
        visible = log is not None and self.room(summary, filtering)[0]
        if pane.display != visible:
            pane.display = visible
        if log is None or not visible:
            return
        app = pane.app
        lines = overview_panes.events_lines(app.size.height)
        width = max(20, pane.content_size.width or app.size.width - 2)
        drawn = (log.version, width, lines, app.theme)
        if drawn == self._events_drawn:
            return
        self._events_drawn = drawn
        c = cells.Colors.from_theme(app.theme_variables)
        text = overview_panes.events_text(log, width, lines, c)
        pane.update(text, layout=self._height_changed(pane, text))

    def toggle_events(self, summary: Summary | None, filtering: bool, now: float) -> None:
        """Show or hide the events pane (the table takes its lines); shown on a short terminal too when asked
        for (the summary folds for it)."""
        self.show_events = not self.room(summary, filtering)[0]
        self._events_drawn = None
        self.draw_summary(summary, filtering, now)
        self.draw_events(summary, filtering)

    def forget(self) -> None:
        """Both drawn again at the next draw (a new terminal size: packed again to the new width)."""
        self._summary_drawn = None
        self._events_drawn = None

    def _height_changed(self, box: Static, text: Text) -> bool:
        """Whether a box of `height: auto` takes another number of lines with `text`: only then is the
        screen laid out again (a Static's update lays out the whole screen by default, each second)."""
        lines = text.plain.count("\n") + 1
        changed = self._box_lines.get(box.id or "") != lines
        self._box_lines[box.id or ""] = lines
        return changed


def with_countdown(text: Text, countdown: Sequence[str], hint: str, width: int, c: cells.Colors) -> Text:
    """The summary with the pending automatic actions under its verdict (its first line), in the warning
    colour: what the watcher is about to do reads before the totals. Each is followed by `hint` (where to
    cancel it) where that fits in `width`, else it stands alone, cut with "…" past the width."""
    verdict, _, rest = text.plain.partition("\n")
    out = text[: len(verdict)]
    for words in countdown:
        line = words + hint if len(words + hint) <= width else words
        out.append("\n")
        out.append(line if len(line) <= width else line[: width - 1] + "…", style=f"bold {c.warn}")
    if rest:
        out.append_text(text[len(verdict) :])
    return out
