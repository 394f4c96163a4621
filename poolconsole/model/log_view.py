"""The log view's model (pure): an engine's log lines as read and followed (collect.engine_logs, already
cut, stripped of escapes and redacted), bounded; a search with next / previous match; and the error lines
to jump to: those a failure mode matches (model.failure_modes) and those with an error word.

Lines are numbered from 1 in the order this view received them; when the oldest go (MAX_LINES), the
numbers of the others stay, so a position survives a follow that drops lines."""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from poolconsole.model.failure_modes import match_line

MAX_LINES = 20_000
"""Lines the view keeps (a followed log drops its oldest beyond this)."""
ERROR_WORDS = re.compile(
    r"\b(error|errors|exception|traceback|fatal|critical|panic|failed|failure|killed|segmentation fault|"
    r"out of memory|oom|aborted|core dumped)\b",
    re.I,
)
"""Words that make a line an error line even where no failure mode matches it."""


def is_error_line(line: str) -> bool:
    return bool(ERROR_WORDS.search(line))


@dataclass
class LogView:
    max_lines: int = MAX_LINES
    lines: deque[str] = field(default_factory=deque)
    dropped: int = 0
    """Lines gone from the front: line number n sits at position n - dropped - 1."""
    failures: dict[int, str] = field(default_factory=dict)
    """Line number -> the failure mode's title, for the lines one matches."""
    errors: set[int] = field(default_factory=set)
    """Line numbers of error lines (a failure mode or an error word)."""
    query: str = ""
    current: int | None = None
    """The line number the view points at (a match or an error), None: none."""

    @property
    def last(self) -> int:
        """The newest line's number (0 when empty)."""
        return self.dropped + len(self.lines)

    @property
    def first(self) -> int:
        return self.dropped + 1

    def line(self, number: int) -> str | None:
        at = number - self.dropped - 1
        return self.lines[at] if 0 <= at < len(self.lines) else None

    def replace(self, lines: Iterable[str]) -> None:
        """A fresh read: the view starts again (numbers from 1)."""
        self.lines.clear()
        self.dropped = 0
        self.failures.clear()
        self.errors.clear()
        self.current = None
        self.extend(lines)

    def extend(self, lines: Iterable[str]) -> list[int]:
        """Append lines (the oldest drop past max_lines); returns the numbers of the new ones."""
        added = []
        for text in lines:
            self.lines.append(text)
            number = self.last
            added.append(number)
            hit = match_line(text)
            if hit is not None:
                self.failures[number] = hit[0].title
                self.errors.add(number)
            elif is_error_line(text):
                self.errors.add(number)
        while len(self.lines) > self.max_lines:
            self.lines.popleft()
            self.dropped += 1
            self.failures.pop(self.dropped, None)
            self.errors.discard(self.dropped)
        if self.current is not None and self.current <= self.dropped:
            self.current = None
        return added

    # -- search -------------------------------------------------------------------------------------
    def matches(self, number: int) -> bool:
        line = self.line(number)
        return bool(self.query) and line is not None and self.query.casefold() in line.casefold()

    def match_count(self) -> int:
        if not self.query:
            return 0
        q = self.query.casefold()
        return sum(q in line.casefold() for line in self.lines)

    def search(self, query: str) -> int | None:
        """Set the query and point at its newest match (a log is read from its end)."""
        self.query = query
        self.current = None
        return self.next_match(forward=False)

    def next_match(self, forward: bool = True) -> int | None:
        """The next match after the current line (forward) or before it, wrapping around; None when none."""
        if not self.query or not self.lines:
            return None
        q = self.query.casefold()
        start = self.current if self.current is not None else (self.dropped if forward else self.last + 1)
        span = len(self.lines)
        for step in range(1, span + 1):
            offset = (start - self.first + (step if forward else -step)) % span
            if q in self.lines[offset].casefold():
                self.current = self.first + offset
                return self.current
        return None

    def match_index(self) -> int | None:
        """The current match's position among the matches (1-based), for "match 3 of 12"."""
        if self.current is None or not self.matches(self.current):
            return None
        q = self.query.casefold()
        return sum(q in self.lines[i].casefold() for i in range(self.current - self.first + 1))

    # -- errors -------------------------------------------------------------------------------------
    def last_error(self) -> int | None:
        """From the end, or from the current error line: the newest line a failure mode matches first, then
        walking back through every error line (failure modes and error words), wrapping to the newest."""
        if not self.errors:
            return None
        ordered = sorted(self.errors)
        if self.current is None or self.current not in self.errors:
            pick = max(self.failures) if self.failures else ordered[-1]
        else:
            earlier = [n for n in ordered if n < self.current]
            pick = earlier[-1] if earlier else ordered[-1]
        self.current = pick
        return pick
