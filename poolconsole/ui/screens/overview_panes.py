"""The overview's panes around its table, drawn as plain functions: the summary (its verdict, then its totals
packed to the width, or folded to one line of figures on a short terminal), the events pane under the table,
and how many lines each may take so the table keeps ROWS_KEPT lines of rows."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping

from rich.text import Text

from poolconsole.model.events import CRITICAL, OK, WARNING, EventLog
from poolconsole.model.summary import Summary
from poolconsole.ui import cells

ROWS_KEPT = 16
"""Lines of rows the table keeps on a short terminal (a host line over each engine: about 8 engines). The
events pane gives way first (hidden while it would leave fewer), then the summary folds to its verdict and
one line of figures. At 120x40 neither happens; at 80x24 both do."""
CHROME = 4
"""The overview's lines that are not the summary, the events pane or the table's rows: the header, the
table's header, the status line and the keys."""
FOLDED = ("engines", "generation", "running", "waiting", "hosts", "alerts")
"""The figures a folded summary keeps, most wanted first (as many as fit its one line), each a part of
summarise()'s lines up to its ": " (the names after it are the verdict's)."""


def events_lines(height: int) -> int:
    """How many lines the events pane takes on a terminal `height` lines tall (its title included)."""
    return 3 if height < 30 else 5 if height < 45 else 7


def room(height: int, chrome: int, summary: int, pane: int, show_events: bool | None) -> tuple[bool, bool]:
    """(whether the events pane fits, whether the whole summary does) on a terminal `height` lines tall, with
    `chrome` lines of neither, a summary of `summary` lines and an events pane of `pane`: each only while the
    table keeps ROWS_KEPT lines of rows with it; the events pane gives way first. The pane as `e` left it
    (`show_events`), when it was pressed."""
    left = height - chrome - summary
    events = left - pane >= ROWS_KEPT if show_events is None else show_events
    whole = left - (pane if events else 0) >= ROWS_KEPT
    return events, whole


def pack(line: str, width: int) -> list[str]:
    """A summary line (parts joined by " · ") wrapped to `width` at its parts, a part too long on its own
    ending in "…": each screen line reads whole, nothing is cut mid-figure but an overlong name."""
    out: list[str] = []
    for part in line.split(" · "):
        if len(part) > width:
            part = part[: max(0, width - 1)] + "…"
        if out and len(out[-1]) + 3 + len(part) <= width:
            out[-1] += " · " + part
        else:
            out.append(part)
    return out


def folded_figures(lines: Iterable[str], width: int) -> str:
    """The one line of figures a folded summary shows: the FOLDED parts of summarise()'s lines (each up to
    its ": "), most wanted first, each whole, as many as fit `width`."""
    parts: dict[str, str] = {}
    for line in lines:
        for part in line.split(" · "):
            word = part.split(" ", 1)[0]
            if word in FOLDED and word not in parts:
                parts[word] = part.split(": ", 1)[0]
    out = ""
    for word in FOLDED:
        figure = parts.get(word)
        if figure is None:
            continue
        joined = f"{out} · {figure}" if out else figure
        if len(joined) <= width:
            out = joined
    return out


def summary_text(summary: Summary, width: int, c: cells.Colors, folded: bool = False) -> Text:
    """The verdict on one line (cut with "…" past the width: the most severe problems come first), in
    the colour of its worst problem, then the totals packed to the width; `folded` (a short terminal),
    one line of the main figures instead of the totals."""
    verdict = summary.verdict if len(summary.verdict) <= width else summary.verdict[: max(0, width - 1)] + "…"
    critical = any(p.severity == "critical" for p in summary.problems)
    colour = c.ok if summary.healthy else c.bad if critical else c.warn
    text = Text()
    text.append(verdict, style=f"bold {colour}")
    if folded:
        figures = folded_figures(summary.lines, width)
        if figures:
            text.append("\n" + figures)
        return text
    for line in summary.lines:
        for packed in pack(line, width):
            text.append("\n" + packed)  # in the widget's own (muted) colour
    return text


def summary_lines(summary: Summary, width: int) -> int:
    """How many lines the whole summary takes at `width`: its verdict and its totals packed."""
    return 1 + sum(len(pack(line, width)) for line in summary.lines)


def _clock(at: float) -> str:
    return dt.datetime.fromtimestamp(at, dt.UTC).strftime("%H:%M:%S")


def events_text(log: EventLog, width: int, lines: int, c: cells.Colors) -> Text:
    """The events pane: its title, then the newest events, as many as its `lines` hold after the title, each
    cut with "…" at `width` and coloured by its severity."""
    colour = {CRITICAL: c.bad, WARNING: c.warn, OK: c.ok}
    title = "Events, newest first (e hides, E opens them all with a filter)"
    if not log.live:
        title = "Events in the recording: restarts and alerts (actions and smoke runs are live-only)"
    text = Text()
    text.append(title[: width - 1] + "…" if len(title) > width else title, style="bold")
    shown = log.newest(limit=lines - 1)
    if not shown:
        text.append("\nnothing has happened yet" if log.live else "\nnone so far in the recording")
    for event in shown:
        line = f"{_clock(event.at)}  {event.target}  {event.text()}"
        text.append("\n")
        text.append(line if len(line) <= width else line[: width - 1] + "…", style=colour.get(event.severity, ""))
    return text


def status_words(
    *,
    engines_shown: int,
    hidden: int,
    by_filter: int,
    by_problems: int,
    filter_text: str,
    problems_only: bool,
    rank: Mapping[str, int],
    alerts: int,
    read_only: bool,
    sort: str,
) -> str:
    """The status line: how many engines are shown of how many (and what hides the others), the active
    alerts, the filter and the sort (`sort`: in words, as the status line names it)."""
    mode = "  READ-ONLY" if read_only else ""
    filt = f"  filter: {filter_text!r}" if filter_text else ""
    filt += f" ({by_filter} hidden)" if by_filter else ""
    words = f"  problems only: {by_problems} hidden" if problems_only else ""
    folded = hidden - by_filter - by_problems
    if problems_only and not engines_shown:
        problems = sum(1 for k, need in rank.items() if need < 2 and k.startswith("engine:"))
        words = f"  problems only: nothing needs attention ({by_problems} hidden, p shows them)"
        if problems and filter_text:  # the filter hides them: "nothing needs attention" would be false
            words = f"  problems only: none of the {problems} match the filter"
        elif problems:  # folded away, not absent
            words = f"  problems only: {problems} in folded groups (c / C opens them)"
            folded = 0
    words += f"  {folded} hidden in folded groups (c / C opens them)" if folded > 0 else ""
    total = engines_shown + hidden
    shown_of = f"{engines_shown} of " if hidden else ""  # "0 engines" read as an empty pool
    rows = f"{shown_of}{total} engine" + ("" if total == 1 else "s")
    # what matters most first: the line ends in "…" where the width runs out (READ-ONLY and the alerts
    # were last, and cut away at 120 columns with the problems-only words)
    return f"{rows}{mode}  active alerts: {alerts}{filt}{words}  sorted by {sort}"
