"""Pool overview: the pool's summary (a verdict in words, then its totals) over one row per engine, plus
hosts without engines. Rows are updated in place (keyed diffs inside one batch), the cursor stays where it
is, `/` filters, `s` sorts, `!` puts the rows that need attention first (on by default while anything is
wrong), and the columns fit the width (folding the least important ones on a narrow terminal).

The screen holds the operator's choices and draws; its rows and groups are kept by overview_book, put in
order by overview_order, and the panes around the table are drawn by overview_panes."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import Header, Input, Static

from poolconsole.model.alerts import Alerts
from poolconsole.model.events import EventLog
from poolconsole.model.pool_state import PoolState
from poolconsole.model.summary import Summary, summarise
from poolconsole.ui import cells, overview_rows
from poolconsole.ui.footer import KeysFooter
from poolconsole.ui.grid import PoolGrid
from poolconsole.ui.screens import overview_order, overview_panes, overview_summary
from poolconsole.ui.screens.overview_book import RowBook, RowEntry, diff
from poolconsole.ui.screens.overview_order import GROUPINGS, LABELS, SORTS, TEXT_SORTS
from poolconsole.ui.screens.overview_summary import Panes


class OverviewScreen(Screen[None]):
    CSS_PATH = Path(__file__).with_suffix(".tcss")

    def __init__(
        self,
        state: PoolState,
        alerts: Alerts | None = None,
        events: EventLog | None = None,
        *,
        hint: str | None = None,
        read_only: bool = False,
        opener: Callable[[str], None] | None = None,
    ) -> None:
        super().__init__()
        self.state = state
        self.alerts = alerts
        """The alerts the summary counts and the rows' "why" names (None: none fired)."""
        self.events = events
        """The timeline the events pane shows, newest first (None: no pane)."""
        self.hint = hint
        """A line shown above the table (the demo says how to point the console at a real pool)."""
        self.read_only = read_only
        """Said on the status line (READ-ONLY)."""
        self.opener = opener
        """Opens a row's detail (Enter, a double click): the app's navigation."""
        self.panes = Panes(events, hint, overview_summary.cancel_hint(state.config.keys, read_only))
        """The summary over the table and the events pane under it."""
        self.ready = False
        """Mounted: drawn from then on (the app's tick, a resize)."""
        self.board: Path | None = None
        """The history store whose watcher's board the summary shows (None: none; show_board sets it)."""
        self.sort_key = "host"
        """The column rows are sorted by (`s` cycles SORTS; a click on a header picks any column)."""
        self.grouping: str | None = "host"
        """How rows are grouped (`G` cycles GROUPINGS), apart from the sort."""
        self.reverse = False
        self.rendered: dict[str, dict[str, str]] = {}
        self.filter_text = ""
        self.sort_index = 0
        self.status_text = ""
        self.attention: bool | None = None
        """Rows that need attention first: None follows the pool (on while anything is wrong)."""
        self.summary: Summary | None = None
        self.collapsed: set[str] = set()
        """The group lines whose rows are folded away (`c`, Enter or a click on the line; `C` all of them)."""
        self.problems_only = False
        """`p`: only the rows that need attention (and their groups' lines)."""
        self.hidden = 0
        """Engines left out by the filter, the problems-only view and folding (the status line says how many:
        it counts engines, not the group lines and hosts among the rows)."""
        self.engines_shown = 0
        self.by_filter = 0
        """Of the hidden engines, those the filter leaves out ..."""
        self.by_problems = 0
        """... and those `p` leaves out (the filter's matches that need no attention); the rest are folded."""
        self.book = RowBook(state)
        """The rows as the model has them (their cells once built) and their groups."""
        self.order_memo = overview_order.OrderMemo()
        """The rows' order as last made, given again while nothing it reads moved."""

    @property
    def built(self) -> int:
        """How many rows' cells were built (tests count them: an unchanged target builds none, a row out of
        view none until it is drawn)."""
        return self.book.built

    @property
    def spans(self) -> set[str]:
        """The rows drawn as one line across the columns: the group lines."""
        return self.book.spans

    @property
    def group_of(self) -> dict[str, str]:
        """Row key -> its group's line key ("host:NAME", "model:NAME"; "" for rows outside every group)."""
        return self.book.group_of

    @property
    def members(self) -> dict[str, list[str]]:
        """A group's line key -> the keys of its rows."""
        return self.book.members

    def compose(self) -> ComposeResult:
        yield Header()
        with Vertical():
            yield Input(placeholder="filter rows (Esc clears)", id="filter")
            if self.hint:
                yield Static(self.hint, id="hint", markup=False)
            yield self.panes.summary_box
            yield PoolGrid(
                overview_rows.overview_columns(sum(s.min + sum(overview_rows.PAD) for s in overview_rows.SPECS)),
                id="pool",
                pad=overview_rows.PAD,
                fit=overview_rows.overview_columns,
                provide=self._provide,
            )
            yield self.panes.events_box
            yield Static("", id="status-line")
        yield KeysFooter()

    def on_mount(self) -> None:
        table = self.query_one(PoolGrid)
        box = self.query_one("#filter", Input)
        box.display = False
        box.disabled = True  # hidden: it must not take focus (and the keys) from the table
        table.focus()
        self.refresh_rows()
        self.ready = True
        if self.board is not None:
            self.set_timer(overview_summary.BOARD_FIRST_S, self.read_board)

    def show_board(self, store: Path | None, live: bool) -> None:
        """The watcher's pending automatic actions in the summary, counting down ("auto-restart of X in 40 s
        (2 of 3 left this hour)"), read from the state file beside the history store `store` (else, live,
        where the config's watcher records). Called by the app before the screen is mounted."""
        self.board = overview_summary.board_of(store, self.state.config, live)

    @work(group="board", description="reading the watcher's board", exclusive=True, exit_on_error=False)
    async def read_board(self) -> None:
        """The board, read in a thread; read again a second after while it holds a case, else after three."""
        try:
            if self.board is None:
                return
            pending = await asyncio.to_thread(overview_summary.read_board, self.board)
            if (pending or self.panes.pending) and self.is_attached:  # redrawn each second while counting
                self.panes.pending = pending
                self._draw_summary()
                self._draw_events()  # the summary's lines changed: the pane may give way
        finally:
            if self.is_attached and self.board is not None:
                every = overview_summary.COUNTDOWN_EVERY_S if self.panes.pending else overview_summary.BOARD_EVERY_S
                self.set_timer(every, self.read_board)

    # -- data ----------------------------------------------------------------------------------------
    def _alerts(self) -> Alerts:
        if self.alerts is None:
            self.alerts = Alerts(self.state.config.alerts)
        return self.alerts

    def rows(self) -> dict[str, RowEntry]:
        """Every row (before the filter, the problems-only view and folding), keyed by row, its cells not
        built (RowBook.build: made again only where what a row shows changed). Also sets the rows' groups."""
        c = cells.Colors.from_theme(self.app.theme_variables)
        summary = self.summary or summarise(self.state, self._alerts())
        grid = self.query_one(PoolGrid)
        widths = {column.key: column.width for column in grid.columns}
        span_width = grid.row_width - grid.pad[0]
        return self.book.build(summary.why(), summary.rank(), c, widths, span_width, self.grouped(), self.collapsed)

    def _provide(self, key: str) -> list[Text]:
        """The grid's call for a stale row it is about to draw (or a test reads): its cells, built now."""
        return self.book.provide(key, self.query_one(PoolGrid).column_keys, self.rendered)

    def attention_first(self) -> bool:
        """Whether the rows that need attention come first: as toggled (`!`), else while anything is wrong."""
        if self.attention is not None:
            return self.attention
        return self.summary is not None and not self.summary.healthy

    def grouped(self) -> str | None:
        """How rows are grouped, each group under its line: "host", "model" or None (one flat list). `G`
        cycles it; it is apart from the sort, which orders the rows inside each group."""
        return self.grouping

    def choices(self) -> overview_order.Choices:
        """The operator's choices as the order reads them."""
        first = self.attention_first() and self.summary is not None and bool(self.summary.rank())
        return overview_order.Choices(
            self.sort_key,
            self.reverse,
            self.grouped(),
            first,
            self.filter_text,
            self.problems_only,
            frozenset(self.collapsed),
        )

    def shown(self, rows: dict[str, RowEntry]) -> list[str]:
        """The rows on screen, in order (overview_order.shown); counts what the filter and `p` leave out."""
        choices = self.choices()
        if overview_order.reads_words(choices):
            self.book.current()  # the words it reads are the rows' as the model has them
        shown = self.order_memo.shown(rows, self.book, choices)
        self.by_filter, self.by_problems = shown.by_filter, shown.by_problems
        self.engines_shown, self.hidden = shown.engines_shown, shown.engines - shown.engines_shown
        return shown.order

    def refresh_view(self) -> None:
        self.refresh_rows()

    def refresh_rows(self) -> None:
        """Apply the latest model to the table: the rows in view are built where their data changed and only
        their cells that differ are updated; the changed rows out of view are marked stale, built when they
        are drawn; rows are added and dropped as needed (keyed diffs). The others stay as drawn."""
        table = self.query_one(PoolGrid)
        table.mark_sorted(self.sort_key, (self.sort_key in TEXT_SORTS) != self.reverse)  # text A-Z, numbers high first
        self.summary = summarise(self.state, self._alerts())
        rows = self.rows()
        order = self.shown(rows)  # counts the engines shown and hidden (not the group lines, nor the hosts)
        top = int(table.scroll_y)
        in_view = set(order[top : top + max(1, table.size.height - 1)])
        self.book.restamp(in_view)  # their ages move with the clock, whatever changed
        with self.app.batch_update():
            self._draw_summary()
            self._draw_events()
            done = diff(self.book, order, in_view, self.rendered, table)
            self.rendered = done.rendered
            if done.new or done.stale or order != table.order:
                table.reorder(order, done.new, self.spans, done.stale)
            table.update_cells(done.changes)
        self._status_line()

    def selected(self) -> str | None:
        return self.query_one(PoolGrid).cursor_key

    def _filtering(self) -> bool:
        return self.query_one("#filter", Input).display

    def _draw_summary(self) -> None:
        self.panes.draw_summary(self.summary, self._filtering(), time.time())

    def _draw_events(self) -> None:
        self.panes.draw_events(self.summary, self._filtering())

    def on_resize(self) -> None:
        self.panes.forget()  # packed again to the new width
        if self.ready:
            self.call_after_refresh(self._draw_summary)
            self.call_after_refresh(self._draw_events)  # hidden or shown again for the new height
            self.call_after_refresh(self._status_line)  # cut again to the new width

    def on_pool_grid_columns_changed(self, event: PoolGrid.ColumnsChanged) -> None:
        """A new width folded or widened columns: every row's cells again, in the new columns."""
        self.rendered = {}
        if self.ready:
            self.refresh_rows()

    def _status_line(self) -> None:
        first = ", problems first" if self.attention_first() else ""
        sort = LABELS.get(self.sort_key, self.sort_key) + (", reversed" if self.reverse else "")
        grouping = self.grouped()
        sort += f", grouped by {grouping}" if grouping else ""
        line = overview_panes.status_words(
            engines_shown=self.engines_shown,
            hidden=self.hidden,
            by_filter=self.by_filter,
            by_problems=self.by_problems,
            filter_text=self.filter_text,
            problems_only=self.problems_only,
            rank=self.book.rank,
            alerts=len(self._alerts().active),
            read_only=self.read_only,
            sort=sort + first,
        )
        width = self.query_one("#status-line", Static).content_size.width
        if 0 < width < len(line):
            line = line[: width - 1] + "…"
        if line != self.status_text:
            self.status_text = line
            # One line of fixed height: no layout pass (one would also redraw the whole table).
            self.query_one("#status-line", Static).update(line, layout=False)

    # -- interaction ---------------------------------------------------------------------------------
    def on_input_changed(self, event: Input.Changed) -> None:
        self.filter_text = event.value.strip()
        self.refresh_rows()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.query_one(PoolGrid).focus()

    def clear_filter(self) -> bool:
        box = self.query_one("#filter", Input)
        if not box.display:
            return self.summary is not None and not self.summary.healthy
        box.value = ""
        box.display = False
        box.disabled = True
        self.filter_text = ""
        self.query_one(PoolGrid).focus()
        self.refresh_rows()
        return True

    def sort_by(self, column: str) -> None:
        """Sort by `column`; by the same column again, the other way round."""
        self.reverse = not self.reverse if column == self.sort_key else False
        self.sort_key = column
        self.refresh_rows()

    def on_pool_grid_header_clicked(self, event: PoolGrid.HeaderClicked) -> None:
        self.sort_by(event.column)

    def on_pool_grid_row_selected(self, event: PoolGrid.RowSelected) -> None:
        """A click selects its row (the grid moved the cursor there); on a group line it folds or unfolds it."""
        if event.key in self.spans:
            self.toggle_group(event.key)

    def on_pool_grid_row_activated(self, event: PoolGrid.RowActivated) -> None:
        """A double click opens the row, as Enter does; on a host's line its detail (the first click of the
        two folded the group: the second unfolds it again)."""
        if event.key in self.spans:
            self.toggle_group(event.key)
        if self.opener is not None:
            self.opener(event.key)

    # -- its actions (model.actions, target "overview": the app routes their keys and palette entries here) --
    def action_open_detail(self) -> None:
        """Enter: the selected row's detail; on a group line with rows under it, fold or unfold them."""
        key = self.selected()
        if key is not None and not self.toggle_group(key) and self.opener is not None:
            self.opener(key)

    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.display = True
        box.disabled = False
        box.focus()
        self._draw_summary()  # its lines: the events pane and the summary's totals may give way
        self._draw_events()

    def action_sort(self) -> None:
        self.sort_index = (self.sort_index + 1) % len(SORTS)
        self.sort_key, self.reverse = SORTS[self.sort_index][0], False
        self.refresh_rows()

    def action_group(self) -> None:
        """`G`: grouped by host, by model, then one flat list, and round again; the sort stays as chosen."""
        current = self.grouping or "engine"
        chosen = GROUPINGS[(GROUPINGS.index(current) + 1) % len(GROUPINGS)]
        self.grouping = None if chosen == "engine" else chosen
        self.refresh_rows()

    def action_collapse(self) -> None:
        self.toggle_group(self.selected(), from_member=True)

    def action_collapse_all(self) -> None:
        """`C`: fold every group, or, with all of them folded, unfold them all (the cursor stays in its group)."""
        table = self.query_one(PoolGrid)
        current = self.selected()
        foldable = {g for g in self.spans if [m for m in self.members.get(g, []) if m != g]}
        self.collapsed = set() if foldable <= self.collapsed else foldable
        self.refresh_rows()
        group = self.group_of.get(current or "")
        if current not in table.position and group in table.position:
            table.move_cursor(table.position[group])

    def action_problems(self) -> None:
        """`p`: only the rows that need attention, or every row again."""
        self.problems_only = not self.problems_only
        self.refresh_rows()

    def action_attention(self) -> None:
        """`!`: rows that need attention first, or not (from then on as chosen, whatever the pool does)."""
        self.attention = not self.attention_first()
        self.refresh_rows()

    def action_toggle_events(self) -> None:
        self.panes.toggle_events(self.summary, self._filtering(), time.time())

    def toggle_group(self, key: str | None, from_member: bool = False) -> bool:
        """Fold or unfold the group whose line is `key` (with `from_member`, the group of the row `key`);
        False when there is no such group with rows under it. The cursor goes to the group's line."""
        group = self.group_of.get(key or "") if from_member else key
        if not group or group not in self.spans or not [m for m in self.members.get(group, []) if m != group]:
            return False
        self.collapsed ^= {group}
        self.refresh_rows()
        table = self.query_one(PoolGrid)
        if group in table.position:
            table.move_cursor(table.position[group])
        return True
