"""Destructive actions in the console: pick a profile, confirm with the exact remote commands shown, follow
the progress as it streams, read the outcome; and the audit log."""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.css.query import NoMatches
from textual.screen import ModalScreen, Screen
from textual.widgets import Button, DataTable, Header, OptionList, RichLog, Static

from poolconsole.model.audit import Entry
from poolconsole.ui.cells import Colors
from poolconsole.ui.fields import FieldLines, Line
from poolconsole.ui.footer import KeysFooter
from poolconsole.ui.tables import FitTable


class ProfilePicker(ModalScreen[str | None]):
    """A choice from a list (a profile to roll to, an Ollama model to unload or preload); Escape or q cancels."""

    CSS_PATH = Path(__file__).with_suffix(".tcss")
    BINDINGS: ClassVar[list[BindingType]] = [("escape,q", "cancel", "Cancel")]

    def __init__(
        self,
        engine: str,
        profiles: list[str],
        active: str | None,
        question: str | None = None,
        marks: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__()
        self.engine = engine
        self.profiles = profiles
        self.active = active
        self.question = question
        """Asked instead of "Switch ENGINE to which profile?" (the picker also picks Ollama models)."""
        self.marks = {**({active: "active"} if active is not None else {}), **(marks or {})}
        """Said after a choice, dimmed: the active profile, an Ollama model already resident."""

    def compose(self) -> ComposeResult:
        dim = Colors.from_theme(self.app.theme_variables).dim
        with Vertical(id="dialog"):
            question = self.question or f"Switch {self.engine} to which profile? (active: {self.active or 'unknown'})"
            yield Static(question, markup=False)
            yield OptionList(*(self._option(p, dim) for p in self.profiles), id="profiles")
            yield Button("Cancel", id="cancel")

    def _option(self, choice: str, dim: str) -> Text:
        mark = self.marks.get(choice)
        return Text.assemble(choice, (f"  ({mark})", dim)) if mark else Text(choice)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(self.profiles[event.option_index])

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(None)

    def action_cancel(self) -> None:
        self.dismiss(None)


class ConfirmAction(ModalScreen[bool]):
    """Shows exactly what will run where; nothing runs unless the operator says yes."""

    CSS_PATH = Path(__file__).with_suffix(".tcss")
    BINDINGS: ClassVar[list[BindingType]] = [
        ("y", "answer(True)", "Yes, run it"),
        ("n,escape,q", "answer(False)", "No"),
        Binding("down", "scroll('scroll_down')", "Scroll", show=False),
        Binding("up", "scroll('scroll_up')", "Scroll", show=False),
        Binding("pagedown", "scroll('scroll_page_down')", "Scroll", show=False),
        Binding("pageup", "scroll('scroll_page_up')", "Scroll", show=False),
        Binding("end", "scroll('scroll_end')", "Scroll", show=False),
        Binding("home", "scroll('scroll_home')", "Scroll", show=False),
    ]

    def __init__(self, title: str, lines: Sequence[Line], runnable: bool = True, yes: str = "Run it (y)") -> None:
        super().__init__()
        self.title_text = title
        self.yes = yes
        self.lines = FieldLines(lines)
        """What will run, and the fit check's rows of fields (wrapped between fields, a number with its unit)."""
        self.runnable = runnable
        """False: what would be refused anyway (a profile that does not fit) is shown, with no "Run it"."""

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(Text(self.title_text, style="bold"), id="confirm-title")
            with VerticalScroll(id="commands-box"):  # a long fit report scrolls; the question and buttons stay
                yield Static(self.lines, id="commands")
            with Horizontal(id="buttons"):
                yield Static("", id="commands-more", markup=False)  # left of the buttons: what is below
                if self.runnable:
                    yield Button(self.yes, id="yes", variant="error")
                yield Button("Cancel (n)" if self.runnable else "Close (n)", id="no", variant="primary")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()  # the safe answer has the focus
        box = self.query_one("#commands-box", VerticalScroll)
        self.watch(box, "scroll_y", self._say_more, init=False)
        self.watch(box, "virtual_size", self._say_more, init=False)
        self.call_after_refresh(self._say_more)  # once laid out: how much it holds

    def on_resize(self, event: events.Resize) -> None:
        self.call_after_refresh(self._say_more)  # a shorter terminal: more below (scroll_y did not move)

    def _say_more(self) -> None:
        """Under a report taller than the dialog: how many lines are below, and the keys that scroll to them
        (at 80x24 a rollover's commands and its gateway line were out of sight, the arrows moving the
        buttons' focus)."""
        box = self.query_one("#commands-box", VerticalScroll)
        below = round(box.max_scroll_y - box.scroll_y)
        more = f"{below} more line{'s' if below != 1 else ''} below: ↓ / PgDn / End" if below > 0 else ""
        self.query_one("#commands-more", Static).update(more)

    def action_scroll(self, how: str) -> None:
        getattr(self.query_one("#commands-box", VerticalScroll), how)(animate=False)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes and self.runnable)


class ActionScreen(Screen[None]):
    """Progress of one action as it streams in, then its outcome. The operator may close it while the action
    runs (Escape, q): what is said meanwhile is kept, and shown whole if the screen is opened again."""

    CSS_PATH = Path(__file__).with_suffix(".tcss")

    def __init__(self, title: str) -> None:
        super().__init__()
        self.title_text = title
        self.outcome: str | None = None
        self.detail = ""
        self.said: list[str] = []
        """Every progress line, in order (the Log shows those written to it: `_written`)."""
        self._written = 0

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(self._heading(), id="action-title")
        # wrapped, never cut at the edge: a profile's long variable names and a failure's words are whole
        yield RichLog(id="action-log", wrap=True, markup=False, highlight=False)
        yield KeysFooter()

    def on_mount(self) -> None:
        self.ready = True
        self._flush()

    def on_unmount(self) -> None:
        self._written = 0  # closed: its Log goes with it, and a new one is written whole

    def _heading(self) -> Text:
        said = f"{self.outcome}: {self.detail}" if self.outcome else "running"
        return Text(f"{self.title_text}: {said}", style="bold")

    def _flush(self) -> None:
        try:
            log = self.query_one("#action-log", RichLog)
        except NoMatches:  # not composed yet, or closed while the action runs
            return
        for line in self.said[self._written :]:
            log.write(Text(line))  # plain text: a command or an engine's answer is never markup
        self._written = len(self.said)

    def progress(self, line: str) -> None:
        self.said.append(line)
        self._flush()

    def finish(self, outcome: str, detail: str) -> None:
        self.outcome, self.detail = outcome, detail
        with contextlib.suppress(NoMatches):
            self.query_one("#action-title", Static).update(self._heading())
        self.progress(f"== {outcome}: {detail}")


class AuditScreen(Screen[None]):
    CSS_PATH = Path(__file__).with_suffix(".tcss")

    def __init__(self, entries: list[Entry], path: Path) -> None:
        super().__init__()
        self.entries = entries
        self.sub_title = f"audit log {path} (the CLI: poolconsole audit --db {path})"
        """Which log: the demo's is its own, beside its hosts.toml, not the one `poolconsole audit` reads."""

    def compose(self) -> ComposeResult:
        yield Header()
        yield FitTable({"cmd": 16, "profiles": 14, "target": 12}, id="audit")  # cut cells end in "…"
        yield Static(id="audit-entry", markup=False)  # the highlighted entry whole: why it failed, every command
        yield KeysFooter()

    def on_mount(self) -> None:
        table = self.query_one(FitTable)
        for key, label in (  # the outcome before the long columns: at 80 columns it was off the screen
            ("at", "Time (UTC)"),
            ("user", "User"),
            ("action", "Action"),
            ("target", "Target"),
            ("outcome", "Outcome"),
            ("s", "Seconds"),
            ("profiles", "Profile"),
            ("cmd", "Commands"),
        ):
            table.add_column(label, key=key)
        table.show(
            {
                str(i): (
                    dt.datetime.fromtimestamp(e.at, dt.UTC).strftime("%m-%d %H:%M:%S"),
                    e.user,
                    e.action,
                    e.target,
                    e.outcome,
                    f"{e.duration_s:.1f}",
                    f"{e.profile_from} -> {e.profile_to}" if e.profile_to else "-",
                    " ; ".join(e.commands),  # cut to the width left, with "…": the pane below has them whole
                )
                for i, e in enumerate(self.entries)
            }
        )
        self._show_entry()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_entry()

    def _show_entry(self) -> None:
        """Under the table, the highlighted entry as `poolconsole audit` prints it: its outcome's detail (why
        it failed or was refused: the table has no room for it) and each command on its own line."""
        table = self.query_one(FitTable)
        if not self.entries or not 0 <= table.cursor_row < len(self.entries):
            self.query_one("#audit-entry", Static).update("no actions recorded" if not self.entries else "")
            return
        self.query_one("#audit-entry", Static).update(self.entries[table.cursor_row].text())
