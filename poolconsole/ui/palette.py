"""The command palette's one provider: every action of the registry (with its key) and every theme.

Titles and help texts are shown as plain text, never parsed as markup: "Filter [/]" parsed as markup
raised MarkupError and closed the console on Ctrl+P.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.content import Content
from textual.markup import escape

HELP_SCORE = 0.01
"""A match in the help text: listed, below every match of a title."""


@dataclass(frozen=True)
class Entry:
    title: str
    help: str
    run: Callable[[], object]


class HasEntries(Protocol):
    def palette_entries(self) -> Iterable[Entry]: ...


class PoolCommands(Provider):
    """Registry actions and themes; `self.app` is the PoolApp (anything with `palette_entries`)."""

    def _entries(self) -> list[Entry]:
        app: HasEntries = self.app  # type: ignore[assignment]
        return list(app.palette_entries())

    async def discover(self) -> Hits:
        for entry in self._entries():
            yield DiscoveryHit(Content(entry.title), entry.run, text=entry.title, help=escape(entry.help))

    async def search(self, query: str) -> Hits:
        """Titles by Textual's fuzzy match; then an entry whose help holds the query's words as typed
        ("alert log" finds Alerts, "The alert log"), ranked below every title match. Help is not matched
        fuzzily: its letters would match nearly any query."""
        matcher = self.matcher(query)
        words = " ".join(query.lower().split())
        for entry in self._entries():
            score = matcher.match(entry.title)
            if score > 0:
                yield Hit(score, matcher.highlight(entry.title), entry.run, text=entry.title, help=escape(entry.help))
            elif len(words) >= 3 and words in " ".join(entry.help.lower().split()):
                yield Hit(HELP_SCORE, Content(entry.title), entry.run, text=entry.title, help=escape(entry.help))
