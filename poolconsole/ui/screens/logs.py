"""An engine's log in the console (`l` on the detail screen or an engine row): read through the same path
as `poolconsole logs` (collect.engine_logs: bounded by lines and bytes, every argument quoted, the text
only ever travelling back, cut, stripped of escapes and redacted), then followed while the screen is open.
Search (`f`, then `n` / `N`), jump to the last error (`x`: the newest failure-mode line first, then back
through the lines with an error word), pause or resume following (`F`). Read-only: nothing here runs a
command or changes the pool; the I/O is the two callables the app hands in (a worker of this screen
awaits them, so closing the screen stops the follow and closes its SSH channel)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events, work
from textual.app import ComposeResult
from textual.geometry import Size
from textual.screen import Screen
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widgets import Header, Input, Static
from textual.worker import Worker

from poolconsole.model.failure_modes import Finding
from poolconsole.model.log_read import LogRead
from poolconsole.model.log_view import LogView
from poolconsole.ui.fields import FieldLines
from poolconsole.ui.footer import KeysFooter

Reader = Callable[[], Awaitable[LogRead]]
"""The bounded one-shot read (collect.engine_logs.read_logs with its connection and engine bound)."""
Follower = Callable[[Callable[[str, Finding | None], None]], Awaitable[None]]
"""Each new line to the callback until cancelled (collect.engine_logs.follow_logs, bound)."""

FLUSH_S = 0.2
"""Followed lines are drawn in batches, at most this often."""
NUMBER_WIDTH = 7


def match_words(query: str, at: int | None, count: int) -> str:
    """The search's place in the status line: "'Load': match 2 of 5", "'Load': 1 match", "'Load': 3 matches"."""
    if at:
        return f"{query!r}: match {at} of {count}"
    return f"{query!r}: {count} match" + ("" if count == 1 else "es")


class LogLines(ScrollView, can_focus=True):
    """The log's lines, numbered, with the current line, the error lines and the search's matches marked
    (theme variables in the .tcss)."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "log-lines--number",
        "log-lines--error",
        "log-lines--match",
        "log-lines--current",
    }

    def __init__(self, view: LogView, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.view = view
        self._width = 0
        self._to_end = False
        """The end was asked for and the lines' own size may not be known yet (see on_resize)."""

    def sync(self, to_end: bool) -> None:
        """The lines changed: resize the scroll area; follow the end when asked."""
        for line in self.view.lines if self._width == 0 else list(self.view.lines)[-200:]:
            self._width = max(self._width, len(line) + NUMBER_WIDTH)
        self.virtual_size = Size(self._width, len(self.view.lines))
        self._to_end = to_end  # after the layout this size brings: until then the scrollbar is not shown and
        if to_end:  # a scroll is refused (it opened at line 1, "following" lines out of sight)
            self.scroll_end(animate=False)
        self.refresh()

    def on_resize(self, event: events.Resize) -> None:
        """A scroll to the end asked before this widget had its size scrolled nowhere (the end was 0 then): a
        loaded machine lays the screen out after the first read's refresh. Once sized, go to the end again."""
        if self._to_end:
            self.scroll_end(animate=False, immediate=True)

    def show(self, number: int) -> None:
        """Scroll so that line `number` is in the middle."""
        self._to_end = False  # a line chosen (an error, a match): a later resize keeps it, not the end
        at = number - self.view.first
        self.scroll_to(x=0, y=max(0, at - self.size.height // 2), animate=False, immediate=True)
        self.refresh()

    @property
    def at_end(self) -> bool:
        return self.scroll_y >= self.max_scroll_y

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        scroll_x, scroll_y = int(self.scroll_x), int(self.scroll_y)
        view = self.view
        number = view.first + scroll_y + y
        line = view.line(number)
        base = self.rich_style
        if line is None:
            return Strip.blank(width, base)
        style = base
        if number == view.current:
            style = base + self.get_component_rich_style("log-lines--current")
        elif number in view.errors:
            style = base + self.get_component_rich_style("log-lines--error")
        text = Text(line, style=style, no_wrap=True, end="")  # plain text: a log line is never markup
        if view.query:
            text.highlight_words([view.query], self.get_component_rich_style("log-lines--match"), case_sensitive=False)
        number_style = base + self.get_component_rich_style("log-lines--number")
        numbered = Text(f"{number:>{NUMBER_WIDTH - 1}} ", style=number_style)
        numbered.append_text(text)
        segments = [Segment(s.text, s.style) for s in numbered.render(self.app.console) if s.text != "\n"]
        return Strip(segments).crop(scroll_x, scroll_x + width).adjust_cell_length(width, Style.null() + base)


class LogScreen(Screen[None]):
    CSS_PATH = Path(__file__).with_suffix(".tcss")

    def __init__(self, engine: str, source: str, read: Reader, follow: Follower | None) -> None:
        super().__init__()
        self.engine = engine
        self.source = source
        self.reader = read
        self.follower = follow
        self.view = LogView()
        self.following = follow is not None
        self.read_result: LogRead | None = None
        self.state = "reading"
        """reading, following, paused, ended (the log command ended or failed), read (no follow)."""
        self._pending: list[str] = []
        self._flushing = False
        self._follow_worker: Worker[None] | None = None

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(f"{self.engine}: reading {self.source} ...", id="log-head", markup=False)
        yield Input(placeholder="find in the log (Enter searches, Esc closes)", id="log-search")
        yield LogLines(self.view, id="log-lines")
        yield Static("", id="log-status", markup=False)
        yield KeysFooter()

    def on_mount(self) -> None:
        box = self.query_one("#log-search", Input)
        box.display = False
        box.disabled = True
        self.query_one(LogLines).focus()
        self._status()
        self._load()

    @property
    def lines_widget(self) -> LogLines:
        return self.query_one(LogLines)

    # -- reading and following ------------------------------------------------------------------------
    @work(group="log-read", description="reading the engine's log", exclusive=True, exit_on_error=False)
    async def _load(self) -> None:
        self.state = "reading"
        self._status()
        try:
            got = await self.reader()
        except Exception as exc:  # the read reports failure as data; anything else is shown, never raised
            self.state = "ended"
            self._status(f"log not read: {type(exc).__name__}: {exc}")
            return
        self.read_result = got
        self.view.replace(got.lines)
        self._head(got)
        self.lines_widget.sync(to_end=True)
        if got.error is None and self.following and self.follower is not None:
            self._follow_worker = self._follow(got.lines[-1] if got.lines else None)
        else:
            self.state = "read" if got.error is None else "ended"
        self._status()

    @work(group="log-follow", description="following the engine's log", exclusive=True, exit_on_error=False)
    async def _follow(self, last: str | None) -> None:
        """New lines as they come. The follow starts at the newest line already read, which it skips."""
        assert self.follower is not None
        self.state = "following"
        self._status()
        skip = [last] if last is not None else []

        def heard(line: str, finding: Finding | None) -> None:
            if skip:
                first = skip.pop()
                if line == first:
                    return
            self._pending.append(line)
            if not self._flushing:
                self._flushing = True
                self.set_timer(FLUSH_S, self._flush)

        why = "the log command ended"
        try:
            await self.follower(heard)
        except Exception as exc:  # SSHFailure and the like: shown, the screen stays
            why = f"following stopped: {getattr(exc, 'message', None) or exc}"
        self._flush()
        self.state = "ended"
        self._status(why)

    def _flush(self) -> None:
        self._flushing = False
        if not self._pending:
            return
        widget = self.lines_widget
        to_end = widget.at_end and (self.view.current is None)
        got, self._pending = self._pending, []
        self.view.extend(got)
        widget.sync(to_end=to_end)
        self._status()

    def toggle_follow(self) -> None:
        if self.follower is None:
            self.notify("this log cannot be followed here", severity="warning")
            return
        if self.state == "following" and self._follow_worker is not None:
            self.following = False
            self._follow_worker.cancel()
            self._follow_worker = None
            self.state = "paused"
            self._status()
        else:
            self.following = True
            self._load()  # a fresh bounded read, then follow from its end

    # -- search and errors ----------------------------------------------------------------------------
    def open_search(self) -> None:
        box = self.query_one("#log-search", Input)
        box.display = True
        box.disabled = False
        box.value = self.view.query
        box.focus()

    def close_search(self) -> None:
        box = self.query_one("#log-search", Input)
        box.display = False
        box.disabled = True
        self.lines_widget.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.close_search()
        self.search(event.value)

    def on_key(self, event: events.Key) -> None:
        if event.key == "escape" and self.query_one("#log-search", Input).has_focus:
            event.stop()  # Esc closes the search box, not the screen
            event.prevent_default()
            self.close_search()

    def search(self, query: str) -> int | None:
        found = self.view.search(query.strip())
        self._point(found, f"no line contains {query.strip()!r}" if query.strip() else "search cleared")
        return found

    def next_match(self, forward: bool = True) -> int | None:
        if not self.view.query:
            self.notify("nothing searched yet: f finds", severity="warning")
            return None
        found = self.view.next_match(forward)
        self._point(found, f"no line contains {self.view.query!r}")
        return found

    def last_error(self) -> int | None:
        found = self.view.last_error()
        self._point(found, "no error line in what was read")
        return found

    # -- its actions (model.actions, target "log": the app routes their keys and palette entries here) ----
    def action_log_find(self) -> None:
        self.open_search()

    def action_log_next(self, forward: bool) -> None:
        self.next_match(forward)

    def action_log_error(self) -> None:
        self.last_error()

    def action_log_follow(self) -> None:
        self.toggle_follow()

    def _point(self, number: int | None, otherwise: str) -> None:
        if number is not None:
            self.lines_widget.show(number)
            self._status()
        else:
            self.lines_widget.refresh()
            self._status(otherwise)

    # -- text -----------------------------------------------------------------------------------------
    def _head(self, got: LogRead) -> None:
        lines = [
            f"{self.engine}: {got.source} on {got.host}, {len(got.lines)} lines read"
            + (" (the oldest cut at the byte limit)" if got.truncated else "")
            + (f"; {got.note}" if got.note else "")
        ]
        if got.error:
            lines.append(f"error: {got.error}")
        for f in got.findings:
            lines.append(f"!! {f.title} (x{f.count}): {f.diagnosis}  change: {f.adjustment}")
        if not got.findings and got.error is None:
            lines.append("no known failure mode in what was read")
        self.query_one("#log-head", Static).update("\n".join(lines))

    def _status(self, message: str | None = None) -> None:
        view = self.view
        parts = [
            {
                "reading": "reading ...",
                "following": "following (F pauses)",
                "paused": "paused (F resumes)",
                "ended": "not following",
                "read": "read once",
            }[self.state],
            f"lines {view.first}-{view.last}" if view.lines else "no lines",
            f"{len(view.errors)} error lines ({len(view.failures)} failure-mode)",
        ]
        if view.query:
            at = view.match_index()
            count = view.match_count()
            parts.append(match_words(view.query, at, count))
        if view.current is not None:
            tag = view.failures.get(view.current)
            parts.append(f"at line {view.current}" + (f" ({tag})" if tag else ""))
        if message:
            parts.append(message)
        keys = ("f find", "n/N next/previous", "x last error", "F follow", "Esc back")
        # wrapped between fields, never inside one ("x last error  F" / "follow" split a key from its action)
        fields = (*(f"{part}  ·" for part in parts), *keys)
        self.query_one("#log-status", Static).update(FieldLines([fields]))
