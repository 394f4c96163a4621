"""Smoke-test results: checks as they finish (live progress: the cursor follows the newest row unless moved
back, the charts fill as the streamed checks land), then TTFT and tok/s against the baseline."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

from textual.app import ComposeResult
from textual.containers import Grid
from textual.screen import Screen
from textual.widgets import Header, Static
from textual_plotext import PlotextPlot

from poolconsole.model import units
from poolconsole.model.smoke import Change, CheckResult
from poolconsole.ui.fields import FieldLines
from poolconsole.ui.footer import KeysFooter
from poolconsole.ui.tables import Cell, FitTable

ELASTIC = {"model": 8, "reason": 24, "target": 12}
"""What gives way, in this order, when the results are wider than the screen (a cut cell ends in "…"), and
the least each keeps."""


MAX_REGRESSIONS_SHOWN = 4
"""The regressions named under the status line (which ones, not only how many); the rest counted."""


def _fmt(value: float | None) -> str:
    return units.num(value, 1)


class SmokeScreen(Screen[None]):
    """A smoke run's results as they land. The operator may close it while the run goes on: `m` or `M` opens
    it again (with every result) until the run ends, and the verdicts land in the events either way."""

    CSS_PATH = Path(__file__).with_suffix(".tcss")

    def __init__(self, targets: list[str]) -> None:
        super().__init__()
        self.targets = targets
        self.results: list[CheckResult] = []
        self.changes: list[Change] = []
        self.finished = False
        self.error: str | None = None
        """Why the run stopped, when it did (said under the status)."""
        self.chart_titles: dict[str, str] = {}
        """What each chart (ttft, tps) is titled as drawn: whether it has a baseline to show."""

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(id="smoke-status", markup=False)
        yield FitTable(ELASTIC, id="smoke-results")
        yield Static(id="smoke-reason", markup=False)  # the highlighted check's reason whole, wrapped
        with Grid(id="smoke-charts"):
            yield PlotextPlot(id="chart-ttft")
            yield PlotextPlot(id="chart-tps")
        yield KeysFooter()

    def on_mount(self) -> None:
        table = self.query_one("#smoke-results", FitTable)
        for key, label in (
            ("target", "Target"),
            ("model", "Model"),
            ("check", "Check"),
            ("c", "Conc."),
            ("ok", "Result"),
            ("ttft", "TTFT p50/p95"),
            ("tps", "tok/s stream/aggr"),
            ("reason", "Reason"),
        ):
            table.add_column(label, key=key)
        self.ready = True
        table.show(dict(self._rows()))  # the results that came before the columns did (or while it was closed)
        self._status()
        self._show_reason()
        if self.finished:
            self._charts()

    def on_unmount(self) -> None:
        self.ready = False  # closed while the run goes on: its results are kept, and shown when it is reopened

    def add(self, result: CheckResult) -> None:
        """A check's result: a row, once the screen is mounted (the run starts as the screen is pushed, and its
        first result could come before the table had its columns: 'More values provided than there are
        columns' stopped the run after one check). Closed meanwhile (Escape, q), it keeps the result for
        when it is opened again: the run goes on ("No nodes match '#smoke-status'" had stopped it)."""
        self.results.append(result)
        if not getattr(self, "ready", False):
            return
        table = self.query_one("#smoke-results", FitTable)
        following = table.cursor_row >= table.row_count - 1  # on the newest row (or none yet): it follows
        key, cells = self._row(len(self.results), result)
        table.show({**table.wanted, key: cells})  # plain text, never markup
        if following:
            table.move_cursor(row=table.row_count - 1)
        self._status()
        self._show_reason()
        if result.check == "chat_stream" and result.ttft_s:
            self._charts()  # the figures so far; against the baseline once the run ends

    def _rows(self) -> list[tuple[str, tuple[Cell, ...]]]:
        return [self._row(i, r) for i, r in enumerate(self.results, start=1)]

    @staticmethod
    def _row(index: int, result: CheckResult) -> tuple[str, tuple[Cell, ...]]:
        t = result.ttft_s
        ttft = units.seconds_pair(t.get("p50"), t.get("p95")) if t else "-"
        tps = result.output_tokens_per_s
        speed = f"{_fmt(tps.get('per_stream'))}/{_fmt(tps.get('aggregate'))}" if tps else "-"
        cells: tuple[Cell, ...] = (
            result.target,
            result.model,
            result.check,
            str(result.concurrency or "-"),
            "PASS" if result.passed else "FAIL",
            ttft,
            speed,
            result.reason,
        )
        return str(index), cells

    def on_data_table_row_highlighted(self, event: FitTable.RowHighlighted) -> None:
        self._show_reason()

    def _show_reason(self) -> None:
        """Under the table, the highlighted check with its reason whole: the column cuts a long one, a figure
        in the middle ("TTFT p50 54.3 ms, p95 108.…")."""
        key = self.query_one("#smoke-results", FitTable).highlighted()
        r = self.results[int(key) - 1] if key is not None and key.isdigit() and int(key) <= len(self.results) else None
        if r is None:
            self.query_one("#smoke-reason", Static).update("")
            return
        head = f"{r.target} {r.check} (concurrency {r.concurrency or '-'}): {'PASS' if r.passed else 'FAIL'}"
        parts = r.reason.split("; ") if r.reason else []  # wrapped between its figures: "1.12" / "s" read wrong
        fields = [f"{head}:" if parts else head] + [f"{part};" for part in parts[:-1]] + parts[-1:]
        self.query_one("#smoke-reason", Static).update(FieldLines([tuple(fields)]))

    def finish(self, changes: list[Change], error: str | None = None) -> None:
        self.finished = True
        self.changes = changes
        self.error = error
        if getattr(self, "ready", False):
            self._status()
            self._charts()

    def _status(self) -> None:
        failed = sum(not r.passed for r in self.results)
        state = (
            ("stopped" if self.error else "finished") if self.finished else "running"
        )  # never "finished" after an error
        regressions = [c for c in self.changes if c.regression]
        text = (
            f"smoke test of {', '.join(self.targets) or 'the pool'}: {state}, {len(self.results)} checks, "
            f"{failed} failed" + (f", {len(regressions)} regression(s) against the baseline" if self.changes else "")
        )
        shown = regressions[:MAX_REGRESSIONS_SHOWN]
        text += "".join(f"\n  regression: {c.words()}" for c in shown)
        if len(regressions) > len(shown):
            text += f"\n  and {len(regressions) - len(shown)} more"
        if self.error:
            text += f"\n{self.error}"
        self.query_one("#smoke-status", Static).update(text)

    def _charts(self) -> None:
        streams = [r for r in self.results if r.check == "chat_stream" and r.ttft_s]
        models: dict[str, set[str]] = {}
        for r in streams:
            models.setdefault(r.target, set()).add(r.model)

        def label(r: CheckResult) -> str:  # through a gateway every bar's target is the gateway: its model tells
            name = r.model if len(models[r.target]) > 1 else r.target
            return f"{name if len(name) <= 12 else name[:11] + '…'} c{r.concurrency}"

        labels = [label(r) for r in streams]
        base = {(c.target, c.model, c.concurrency, c.figure): c.baseline for c in self.changes}
        for chart, title, figure, attr, key in (
            ("ttft", "TTFT p95 (ms)", "ttft_p95", "ttft_s", "p95"),
            ("tps", "tok/s per stream", "tps_per_stream", "output_tokens_per_s", "per_stream"),
        ):
            plt = self.query_one(f"#chart-{chart}", PlotextPlot).plt
            plt.clear_figure()
            scale = 1000 if chart == "ttft" else 1
            now = [((getattr(r, attr) or {}).get(key) or 0) * scale for r in streams]
            baseline = [base.get((r.target, r.model, r.concurrency, figure)) for r in streams]
            if labels and not self.finished:  # compared with the baseline when the run is saved, at its end
                self.chart_titles[chart] = f"{title}: so far (against the baseline when the run ends)"
                cast(Any, plt).bar(labels, now)
            elif labels and all(b is not None for b in baseline):
                self.chart_titles[chart] = f"{title}: now vs baseline"
                before = [(b or 0.0) * scale for b in baseline]
                cast(Any, plt).multiple_bar(labels, [now, before], labels=["now", "baseline"])
            elif labels:  # no bar of 0 for a baseline that does not exist
                missing = sum(b is None for b in baseline)
                self.chart_titles[chart] = f"{title}: now (no baseline yet for {missing} of {len(labels)})"
                cast(Any, plt).bar(labels, now)
            else:
                self.chart_titles[chart] = title
            plt.title(self.chart_titles[chart])
            self.query_one(f"#chart-{chart}", PlotextPlot).refresh()
