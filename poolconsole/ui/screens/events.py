"""The events timeline on a screen of its own: every event the log holds, newest first (restarts with
their cause, alerts fired and cleared, actions with their outcome, smoke verdicts), with a text filter."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from rich.text import Text
from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Header, Input, Static

from poolconsole.model.events import CRITICAL, OK, WARNING, EventLog
from poolconsole.ui import cells
from poolconsole.ui.footer import KeysFooter
from poolconsole.ui.tables import Cell, FitTable

ELASTIC = {"what": 24, "target": 12}
"""What gives way when the timeline is wider than the screen (a cut line ends in "…"), and the least kept."""


class EventsScreen(Screen[None]):
    CSS_PATH = Path(__file__).with_suffix(".tcss")

    def __init__(self, log: EventLog) -> None:
        super().__init__()
        self.timeline = log
        self.filter_text = ""
        self._drawn: tuple[int, str, str] | None = None

    def compose(self) -> ComposeResult:
        yield Header()
        yield Input(placeholder="filter events: a target, a rule, a word (Esc goes back)", id="events-filter")
        yield Static(id="events-summary", markup=False)
        yield FitTable(ELASTIC, id="event-log")
        yield KeysFooter()

    def on_mount(self) -> None:
        table = self.query_one("#event-log", FitTable)
        for key, label in (("at", "Time"), ("target", "Target"), ("kind", "Kind"), ("what", "What")):
            table.add_column(label, key=key)
        self.query_one("#events-filter", Input).focus()
        self.refresh_view()
        self.ready = True

    def on_input_changed(self, event: Input.Changed) -> None:
        self.filter_text = event.value.strip()
        self.refresh_view()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.query_one("#event-log", FitTable).focus()

    def refresh_view(self) -> None:
        drawn = (self.timeline.version, self.filter_text, self.app.theme)
        if drawn == self._drawn:
            return
        self._drawn = drawn
        c = cells.Colors.from_theme(self.app.theme_variables)
        colour = {CRITICAL: c.bad, WARNING: c.warn, OK: c.ok}
        shown = self.timeline.newest(self.filter_text)
        rows: dict[str, tuple[Cell, ...]] = {}
        for index, event in enumerate(shown):
            at = dt.datetime.fromtimestamp(event.at, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")
            key = f"{event.at!r}:{event.target}:{event.kind}:{event.message}"
            while key in rows:  # two alike in the same instant
                key += f"#{index}"
            rows[key] = (at, event.target, event.kind, Text(event.text(), style=colour.get(event.severity, "")))
        self.query_one("#event-log", FitTable).show(rows)
        where = "" if self.timeline.live else "  From the recording: restarts and alerts (the rest is live-only)."
        filt = f" matching {self.filter_text!r}" if self.filter_text else ""
        self.query_one("#events-summary", Static).update(
            f"{len(shown)} of {len(self.timeline.entries)} events{filt}, newest first (times in UTC).{where}"
        )
