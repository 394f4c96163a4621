"""The exposure audit in the console (`S`): ops.exposure run over the pool's engines and gateways (a models
list, a one-token completion unless skipped, /metrics and llama.cpp's /slots, all without a key; `ss -ltn`
on each host over SSH), then one row per engine and gateway (answers without a key, where it listens, the
verdict) and every finding with its fix, the exposed engines' first, in a pane that scrolls (it takes the
keys; Tab reaches the table). Never destructive, so the same in --read-only; response bodies are
never shown (the audit keeps only status codes, model names and counts)."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Header, Static

from poolconsole.config.models import PoolConfig
from poolconsole.model.exposure import EngineExposure
from poolconsole.model.units import NA
from poolconsole.ui.footer import KeysFooter
from poolconsole.ui.tables import RowTable
from poolconsole.workflows.exposure import summary

COMPLETION_CHOICES = (
    "models list, one-token completion, /metrics, /slots (full audit)",
    "skip the completion: models list, /metrics, /slots only",
)
KEY_TEXT = {True: "answers without a key", False: "requires a key", None: NA}


RANK = {"EXPOSED": 0, "contained": 1}
"""The order of the findings pane: the exposed engines first, then the contained, then the rest (what
could not be checked)."""


def engine_lines(result: EngineExposure) -> list[str]:
    """One engine's findings, the exposed (`!!`) first, each with its fix (said once after a run of findings
    that share it), then what could not be checked (`??`)."""
    out = [f"{result.name} ({result.kind}, {result.url}): {result.verdict}"]
    ordered = sorted(result.findings, key=lambda f: not f.exposed)
    for i, f in enumerate(ordered):
        out.append(f"  {'!!' if f.exposed else '--'} {f.found}")
        if i + 1 == len(ordered) or ordered[i + 1].fix != f.fix:
            out.append(f"     fix: {f.fix}")
    return out + [f"  ?? {why}" for why in result.unchecked]


def finding_lines(results: list[EngineExposure]) -> list[str]:
    """Each engine's findings with their fixes: the exposed engines first, so an operator sees them
    without scrolling."""
    shown = [r for r in results if r.findings or r.unchecked]
    return [line for r in sorted(shown, key=lambda r: RANK.get(r.verdict, 2)) for line in engine_lines(r)]


class SecurityScreen(Screen[None]):
    CSS_PATH = Path(__file__).with_suffix(".tcss")
    AUTO_FOCUS = "#security-findings-pane"
    """The findings take the keys (arrows, PageUp/PageDown, Home/End); Tab moves to the table."""

    def __init__(self, config: PoolConfig, completion: bool = True) -> None:
        super().__init__()
        self.config = config
        self.completion = completion
        self.results: list[EngineExposure] | None = None
        """The audit's results once it has run."""
        self.problem: str | None = None

    def compose(self) -> ComposeResult:
        yield Header()
        probe = "with" if self.completion else "without"
        yield Static(
            f"exposure audit of {len(self.config.engines)} engines and gateways ({probe} the one-token completion) ...",
            id="security-summary",
            markup=False,
        )
        yield RowTable(id="security-table", cursor_type="row")
        with VerticalScroll(id="security-findings-pane"):
            yield Static("", id="security-findings", markup=False)
        yield KeysFooter()

    def on_mount(self) -> None:
        table = self.query_one("#security-table", DataTable)
        for key, label in (
            ("name", "Engine / gateway"),
            ("kind", "Kind"),
            ("key", "Without a key"),
            ("listen", "Listens on"),
            ("verdict", "Verdict"),
            ("findings", "Findings"),
        ):
            table.add_column(label, key=key)
        self._audit()

    @work(group="exposure", description="the exposure audit", exclusive=True, exit_on_error=False)
    async def _audit(self) -> None:
        from poolconsole.workflows.exposure import audit

        try:
            results = (await audit(self.config, self.completion)).results
        except Exception as exc:  # shown on the screen: the console keeps running
            self.problem = f"exposure audit stopped: {type(exc).__name__}: {exc}"
            self.query_one("#security-summary", Static).update(self.problem)
            return
        self.show(results)

    def show(self, results: list[EngineExposure]) -> None:
        self.results = results
        table = self.query_one("#security-table", DataTable)
        table.clear()
        for r in results:
            listen = NA if r.listen is None else ", ".join(r.listen) or "-"
            cells = (r.name, r.kind, KEY_TEXT[r.unauthenticated], listen, r.verdict, str(len(r.findings)))
            table.add_row(*(Text(c) for c in cells), key=r.name)
        probe = "with" if self.completion else "without"
        head = summary(results)
        self.query_one("#security-summary", Static).update(f"{head}; probed {probe} the one-token completion")
        self.query_one("#security-findings", Static).update("\n".join(finding_lines(results)) or "no findings")
