"""The capacity ledger: output tokens per day per engine as a chart, the day-by-engine table, the costs
and the decision. It reads the history store in a thread (poolconsole.runtime.ledger) and only draws;
nothing here changes the pool, so it is the same in --read-only and in a replay (on the recording's clock)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, cast

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.color import Color
from textual.screen import Screen
from textual.widgets import DataTable, Header, Static
from textual_plotext import PlotextPlot

from poolconsole.config.models import LedgerSettings
from poolconsole.model.ledger import GATEWAY_KINDS, short
from poolconsole.model.units import NA, seconds_pair
from poolconsole.ui.fields import FieldLines
from poolconsole.ui.footer import KeysFooter
from poolconsole.ui.tables import RowTable

DAYS = 14
"""The window the screen shows: the decision's two weeks."""


SERIES = ("primary", "secondary", "accent", "success", "text-primary", "text-secondary")
"""The theme's colours of the chart's bars, in order (a seventh engine, or "N others": its foreground). Not
warning or error: a red bar read as a fault."""
CHART_ENGINES = len(SERIES)
"""The engines the chart draws a bar for each, those with the most output tokens; the rest share one (one
left over is drawn as itself: "1 others" said less than its name)."""


def _tokens(value: float | None) -> str:
    return NA if value is None else short(value)


def _hours(value: float | None) -> str:
    return NA if value is None else f"{value / 3600:.1f} h" if value >= 3600 else f"{value / 60:.0f} min"


def _kwh(value: float | None) -> str:
    return NA if value is None else f"{value:.3f}"


class LedgerScreen(Screen[None]):
    CSS_PATH = Path(__file__).with_suffix(".tcss")

    def __init__(self, store: Path, now: float, settings: LedgerSettings, days: int = DAYS) -> None:
        super().__init__()
        self.store = store
        self.now = now
        self.settings = settings
        self.days = days
        self.doc: dict[str, Any] | None = None
        """The ledger once read (the `ledger --json` document)."""
        self.problem: str | None = None

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(f"reading the ledger from {self.store} ...", id="ledger-decision", markup=False)
        yield Static("", id="ledger-legend", markup=False)
        yield PlotextPlot(id="ledger-chart")
        yield RowTable(id="ledger-table", cursor_type="row")
        yield RowTable(id="ledger-hosts", cursor_type="row")
        yield Static("", id="ledger-hints", markup=False)
        yield KeysFooter()

    def on_mount(self) -> None:
        table = self.query_one("#ledger-table", DataTable)
        for key, label in (
            ("date", "Date (UTC)"),
            ("engine", "Engine"),
            ("prompt", "Prompt"),
            ("output", "Output"),
            ("requests", "Requests"),
            ("busy", "Busy"),
            ("idle", "Idle"),
            ("ttft", "TTFT p50/p95"),
            ("kwh", "kWh"),
            ("idle_kwh", "Idle kWh"),
        ):
            table.add_column(label, key=key)
        hosts = self.query_one("#ledger-hosts", DataTable)
        for key, label in (
            ("host", "Host (today)"),
            ("idle", "Idle"),
            ("busy", "Busy"),
            ("unknown", "Unknown"),
            ("idle_w", "Power idle"),
            ("load_w", "Power under load"),
            ("idle_kwh", "Idle kWh"),
            ("kwh", "kWh"),
        ):
            hosts.add_column(label, key=key)
        self._read()

    @work(group="ledger", description="reading the ledger", exclusive=True, exit_on_error=False)
    async def _read(self) -> None:
        from poolconsole.runtime.ledger import read_ledger
        from poolconsole.runtime.store import StoreProblem

        try:
            doc = await asyncio.to_thread(read_ledger, self.store, self.days, self.now, self.settings)
        except StoreProblem as exc:
            self.problem = str(exc)
            self.query_one("#ledger-decision", Static).update(f"no ledger: {exc}")
            return
        self.show(doc)

    def show(self, doc: dict[str, Any]) -> None:
        self.doc = doc
        entries = doc["entries"]
        table = self.query_one("#ledger-table", DataTable)
        table.clear()
        for e in entries:
            p50, p95 = e["ttft_p50_s"], e["ttft_p95_s"]
            ttft = NA if p50 is None and p95 is None else seconds_pair(p50, p95)  # one unknown: n/a, not 0
            cells = (
                e["date"],
                e["engine"] + (" (gateway)" if e["kind"] in GATEWAY_KINDS else ""),
                _tokens(e["prompt_tokens"]),
                _tokens(e["output_tokens"]),
                NA if e["requests"] is None else str(e["requests"]),
                _hours(e["busy_s"]),
                _hours(e["idle_s"]),
                ttft,
                _kwh(e["energy_kwh"]),
                _kwh(e["idle_energy_kwh"]),
            )
            table.add_row(*(Text(c) for c in cells), key=f"{e['date']}/{e['engine']}")
        c = doc["costs"]
        money = f" {c['currency']}" if c["currency"] else ""
        figures = [f"GPU energy {c['gpu_energy_kwh']:.3f} kWh, idle burn {c['idle_energy_kwh']:.3f} kWh"]
        for key, label in (("value", "value"), ("energy_cost", "energy cost"), ("payback_days", "payback")):
            if c[key] is not None:
                figures.append(
                    f"{label} {c[key]:.1f} days" if key == "payback_days" else f"{label} {c[key]:.2f}{money}"
                )
        gateway = [f"gateway mismatch: {m['reason']}" for m in doc.get("mismatches") or ()]
        if doc.get("gateway"):  # the gateway's own accounting (a LiteLLM gateway with its prometheus callback)
            gateway.append(f"callers now: {doc['callers_now']['reason']}")
        self.query_one("#ledger-decision", Static).update(
            f"{doc['decision']['reason']}\n{'; '.join(figures)}"
            + f"  (window {doc['from']} .. {doc['to']}, store {doc['store']})"
            + "".join("\n" + line for line in gateway)
        )
        self._chart(entries)
        self._hosts(doc)

    def _hosts(self, doc: dict[str, Any]) -> None:
        """Idle burn per host today: hours idle and busy, power at idle against under load, with the hint."""
        table = self.query_one("#ledger-hosts", DataTable)
        table.clear()
        today = [e for e in doc.get("hosts") or () if e["date"] == doc["to"]]
        for e in today:
            cells = (
                e["host"],
                _hours(e["idle_s"]),
                _hours(e["busy_s"]),
                _hours(e["unknown_s"]) if e["unknown_s"] else "-",
                NA if e["idle_power_w"] is None else f"{e['idle_power_w']:.0f} W",
                NA if e["load_power_w"] is None else f"{e['load_power_w']:.0f} W",
                _kwh(e["idle_energy_kwh"]),
                _kwh(e["energy_kwh"]),
            )
            table.add_row(*(Text(c) for c in cells), key=e["host"])
        hints = [f"{e['host']}: {e['hint']}" for e in today if e["hint"]]
        self.query_one("#ledger-hints", Static).update("\n".join(hints))

    def _chart(self, entries: list[dict[str, Any]]) -> None:
        """Output tokens per day, a bar per engine in the theme's colours, its axis in tokens ("12k"); the
        legend is a line above it (plotext draws its own over the tallest bars at the top left). Past
        CHART_ENGINES engines, the rest are one bar, "N others"."""
        widget = self.query_one("#ledger-chart", PlotextPlot)
        plt = widget.plt
        plt.clear_figure()
        plt.title("output tokens per day, per engine")
        dates = sorted({e["date"] for e in entries})
        totals: dict[str, float] = {}
        for e in entries:
            if e["output_tokens"] and e["kind"] not in GATEWAY_KINDS:
                totals[e["engine"]] = totals.get(e["engine"], 0) + e["output_tokens"]
        ranked = sorted(totals, key=lambda name: -totals[name])
        cut = CHART_ENGINES if len(ranked) > CHART_ENGINES + 1 else len(ranked)
        shown, rest = sorted(ranked[:cut]), ranked[cut:]
        others = f"{len(rest)} others"
        got: dict[tuple[str, str], float] = {}
        for e in entries:
            name = e["engine"] if e["engine"] in shown else others if e["engine"] in rest else None
            if name is not None:
                got[(e["date"], name)] = got.get((e["date"], name), 0) + (e["output_tokens"] or 0)
        names = shown + ([others] if rest else [])
        variables = self.app.theme_variables
        colours = [variables.get(v, variables["foreground"]) for v in (*SERIES, "foreground")[: len(shown)]]
        colours += [variables["foreground"]] if rest else []
        legend: list[Text] = []  # fields: a swatch is never wrapped apart from its name
        if dates and names:
            series = [[got.get((d, name), 0) for d in dates] for name in names]
            rgb = [Color.parse(c).rgb for c in colours]
            cast(Any, plt).multiple_bar([d[5:] for d in dates], series, color=rgb)
            top = max(max(s) for s in series) or 1.0
            ticks = [top * i / 4 for i in range(5)]
            plt.yticks(ticks, [short(t) for t in ticks])
            legend = [Text.assemble(("██", colour), f" {name}") for name, colour in zip(names, colours, strict=True)]
        self.query_one("#ledger-legend", Static).update(FieldLines([tuple(legend)]) if legend else "")
        widget.refresh()
