"""The command palette's one provider: every action of the registry (with its key) and every theme.

Titles and help texts are shown as plain text, never parsed as markup: "Filter [/]" parsed as markup
raised MarkupError and closed the console on Ctrl+P.
"""

from __future__ import annotations

import re
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
    name: str = ""
    """The action's id in the registry (what the help screen and [keys] call it), searched with the help."""


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
        """Titles by Textual's fuzzy match; then an entry whose action id or help holds the query's words as
        whole words ("alert log" finds Alerts, "The alert log"; "security" the exposure audit, by its id),
        ranked below every title match. Help is not matched fuzzily: its letters would match nearly any
        query, and "audit" is not "audited"."""
        matcher = self.matcher(query)
        words = query.lower().split()
        phrase = re.compile(r"\b" + r"\W+".join(map(re.escape, words)) + r"s?\b") if words else None
        for entry in self._entries():
            score = matcher.match(entry.title)
            if score > 0:
                yield Hit(score, matcher.highlight(entry.title), entry.run, text=entry.title, help=escape(entry.help))
            elif phrase is not None and len(query.strip()) >= 3 and phrase.search(_searched(entry)):
                yield Hit(HELP_SCORE, Content(entry.title), entry.run, text=entry.title, help=escape(entry.help))


def _searched(entry: Entry) -> str:
    return f"{entry.name.replace('_', ' ')} {entry.help}".lower()
