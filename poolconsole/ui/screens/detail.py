"""Node detail: the engine's metrics, its host's GPUs with their processes mapped to engines, and
history charts (tok/s, KV %, running / waiting, VRAM) over 5 minutes or an hour, restarts marked."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Grid, Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import Header, Static
from textual_plotext import PlotextPlot

from poolconsole.config.models import EngineKind
from poolconsole.model import ollama, units
from poolconsole.model.failure_modes import Diagnosis
from poolconsole.model.pool_state import EngineTrack, History, HostTrack, PoolState
from poolconsole.ui import cells, overview_rows
from poolconsole.ui.fields import FieldLines, Line
from poolconsole.ui.footer import KeysFooter
from poolconsole.ui.tables import FitTable

WINDOWS = ((300.0, "5 min"), (3600.0, "1 h"))


GPU_ELASTIC = {"procs": 16, "name": 8}
"""What gives way when the GPU table is wider than the screen (a cut cell ends in "…"), in this order, and the
least each keeps: the processes (each names its engine first), then the card's name. At 80 columns the
table was cut at "Proce", the processes out of sight to the right."""


def resets_seen(track: EngineTrack) -> str:
    """How many counter resets (restarts) were seen; n/a for an engine with no token counters to reset
    (Ollama, a gateway), where 0 would claim a watch that never was."""
    seen = len(track.history.restarts)
    v = track.view
    if not seen and v is not None and v.generation_tokens_total is None and v.prompt_tokens_total is None:
        return "n/a (no counters)"
    return str(seen)


def engine_text(track: EngineTrack, now: float | None = None) -> FieldLines:
    v = track.view
    cfg = track.config
    if v is None:
        return FieldLines([f"{cfg.name}: waiting for the first poll"])
    lines: list[Line] = [
        (Text(cfg.name, "bold"), f"{cfg.kind.value} {v.version or ''}".rstrip(), f"on {cfg.host or '?'}",
         Text.assemble("state ", (v.state, "bold"))),
        (f"model {', '.join(v.models) or cfg.model or 'n/a'}", f"profile {track.active_profile or cfg.profile or '-'}",
         v.url),
        (f"running {units.num(v.requests_running)}", f"waiting {units.num(v.requests_waiting)}",
         f"KV {units.pct(v.kv_cache_usage)}", f"ranks {units.num(v.ranks)}",
         f"preemptions {units.num(v.preemptions_total)}"),
        (f"tok/s {units.num(v.generation_tokens_per_s, 1)}", f"prompt tok/s {units.num(v.prompt_tokens_per_s, 1)}",
         f"TTFT mean {units.seconds(v.ttft_mean_s)} p50 {units.seconds(v.ttft_p50_s)} "
         f"p95 {units.seconds(v.ttft_p95_s)} ({v.ttft_window or 'n/a'})",
         f"ITL mean {units.seconds(v.itl_mean_s)} p95 {units.seconds(v.itl_p95_s)}"),
        (f"prefix-cache hit {units.pct(v.prefix_cache_hit_rate)}",
         f"spec-decode acceptance {units.pct(v.spec_decode_acceptance_rate)}",
         f"counter resets (restarts) seen: {resets_seen(track)}"),
    ]  # fmt: skip
    if v.error:
        lines.append(Text.assemble(("error:", "bold"), f" {v.error}"))
    if track.diagnosis is not None:
        lines += diagnosis_lines(track.diagnosis)
    if cfg.kind is EngineKind.OLLAMA:
        lines += residency_lines(track, time.time() if now is None else now)
    unknown = [f"{k}: {r}" for k, r in v.unknown.items() if k in ("kv_cache_usage", "ttft_mean_s", "requests_running")]
    if unknown:
        lines.append("unknown: " + "; ".join(unknown))
    return FieldLines(lines)


def diagnosis_lines(diagnosis: Diagnosis) -> list[Line]:
    """What the engine's log showed when it went down or restarted: each failure mode with what it means,
    what to change and the line that showed it."""
    head = f"log ({diagnosis.source}, read when it {diagnosis.reason})"
    if diagnosis.error:
        return [f"{head}: {diagnosis.error}"]
    if not diagnosis.findings:
        return [f"{head}: no known failure mode"]
    out: list[Line] = [head + ":"]
    for f in diagnosis.findings:
        out.append(Text.assemble((f"{f.title}:", "bold"), f" {f.diagnosis}"))
        out.append(f"  change: {f.adjustment}")
        out.append(f"  line {f.line_no}: {f.line[:200]}")
    return out


def residency_lines(track: EngineTrack, now: float) -> list[Line]:
    """Ollama: the server's keep-alive and parallelism, then each resident model with its size, the share in
    VRAM (the rest offloaded to system RAM), context and expiry counted down; a client's keep-alive
    override and early unloads pointed out. U / O unload and preload (hidden read-only)."""
    server = track.ollama_server
    if server is None:
        settings = "OLLAMA_KEEP_ALIVE n/a  OLLAMA_NUM_PARALLEL n/a (not read from its log yet)"
    elif server.error:
        settings = f"OLLAMA_KEEP_ALIVE n/a  OLLAMA_NUM_PARALLEL n/a ({server.error})"
    else:
        settings = f"OLLAMA_KEEP_ALIVE {server.keep_alive_text()}  OLLAMA_NUM_PARALLEL {server.parallel_text()}"
    residency = track.residency
    if residency is None:
        return [f"resident: n/a (no /api/ps answered yet)   {settings}"]
    rows = ollama.rows(residency, server, now)
    out: list[Line] = [Text.assemble((f"resident models ({len(rows)})", "bold"), f"   {settings}")]
    for r in rows:
        share = "n/a" if r.vram_share is None else f"{r.vram_share * 100:.0f}% in VRAM"
        context = "n/a" if r.context is None else f"{r.context}"
        left = ollama.duration_text(r.expires_in_s)
        expiry = "never expires" if left == "forever" else f"expires in {left}"
        out.append(f"  {r.name}  {units.gib(r.size_bytes, 2, ' GiB')}  {share}  ctx {context}  {expiry}")
        if r.override:
            out.append(Text.assemble("    ", ("keep-alive override:", "bold"), f" {r.override}"))
    out += [f"  · {note}" for note in ollama.notes(residency, server, now, unloaded_here=track.unloaded_here)]
    return out


def host_text(track: HostTrack) -> FieldLines:
    snap = track.snapshot
    if snap is None:
        return FieldLines([f"{track.config.name}: waiting for the first poll"])
    memory = cells.system_memory(snap.system_memory).split(", ")  # its swap a field of its own
    kind = f"memory: {snap.memory_kind or units.NA}"  # "dedicated memory" read as a label with no value
    lines: list[Line] = [
        (Text(f"host {snap.name}", "bold"), f"({snap.address})", cells.state_word(snap.state),
         f"source {snap.source or units.NA}", kind, f"rtt {units.num(snap.rtt_ms, 1, ' ms')}"),
        (*(part + "," for part in memory[:-1]), memory[-1]),
    ]  # fmt: skip
    if snap.error:
        lines.append(Text.assemble(("error:", "bold"), f" {snap.error}"))
    lines += [f"· {n}" for n in snap.notes[:4]]
    return FieldLines(lines)


class DetailScreen(Screen[None]):
    CSS_PATH = Path(__file__).with_suffix(".tcss")

    def __init__(
        self, state: PoolState, key: str, window_index: int = 0, fill: Callable[[str], None] | None = None
    ) -> None:
        super().__init__()
        self.state = state
        self.key = key
        self.window_index = window_index
        self.fill = fill
        """Reads an engine's older points back when its rings were short (ui.history.History.fill_detail)."""

    @property
    def engine(self) -> EngineTrack | None:
        return self.state.engines.get(self.key.removeprefix("engine:")) if self.key.startswith("engine:") else None

    @property
    def host(self) -> HostTrack | None:
        name = overview_rows.host_of_row(self.state, self.key)
        return self.state.hosts.get(name or "")

    def compose(self) -> ComposeResult:
        yield Header()
        with VerticalScroll(id="detail-body"):  # a short terminal scrolls to the charts rather than crushing them
            with Horizontal(id="top"):
                yield Static(id="engine-info", markup=False)
                yield Static(id="host-info", markup=False)
            yield FitTable(GPU_ELASTIC, id="gpus")
            with Grid(id="charts"):
                for chart in ("tps", "kv", "queue", "vram"):
                    yield PlotextPlot(id=f"chart-{chart}")
        yield KeysFooter()

    def on_mount(self) -> None:
        table = self.query_one("#gpus", FitTable)
        for key, label in (
            ("gpu", "GPU"),
            ("name", "Name"),
            ("mem", "Memory"),
            ("util", "Util"),
            ("temp", "Temp"),
            ("power", "Power/limit"),
            ("procs", "Processes"),
        ):
            table.add_column(label, key=key)
        engine = self.engine
        # full resolution for the engine shown (issue 39): what it has is drawn at once, the rest when read
        if engine is not None and self.state.keep_full(engine.config.name) and self.fill is not None:
            self.fill(engine.config.name)
        self.refresh_view()
        self.ready = True

    def toggle_window(self) -> None:
        self.window_index = (self.window_index + 1) % len(WINDOWS)
        self.refresh_view()

    def refresh_view(self) -> None:
        engine = self.engine
        host = self.host
        self.query_one("#engine-info", Static).update(engine_text(engine, self.state.clock()) if engine else "")
        self.query_one("#host-info", Static).update(host_text(host) if host else "no host configured")
        self._gpu_table(host)
        self._charts(engine, host)

    def _gpu_table(self, host: HostTrack | None) -> None:
        snap = host.snapshot if host else None
        rows: dict[str, tuple[str, ...]] = {}
        for g in snap.gpus if snap else ():
            procs = [cells.process(p) for p in snap.processes if p.gpu_uuid == g.uuid] if snap else []
            rows[str(g.index)] = (
                str(g.index),
                cells.card_name(g.name) if g.name else units.NA,  # "RTX 5090" (cut: "NVIDIA GeFor…")
                cells.gpu_memory(g),
                units.num(g.utilization_pct) + "%",
                units.num(g.temperature_c) + "C",
                f"{units.num(g.power_w)} / {units.num(g.power_limit_w)} W",
                ", ".join(procs) or "-",
            )
        self.query_one("#gpus", FitTable).show(rows)  # keyed: the cursor stays on its GPU

    def _charts(self, engine: EngineTrack | None, host: HostTrack | None) -> None:
        seconds, label = WINDOWS[self.window_index]
        now = self.state.clock()
        history = engine.history if engine else None
        specs: list[tuple[str, str, list[tuple[str, Any]]]] = []
        if history is not None:
            specs = [
                ("tps", f"generation tok/s ({label})", [("tok/s", history.tokens_per_s)]),
                ("kv", f"KV cache % ({label})", [("KV %", [None if v is None else v * 100 for v in history.kv])]),
                ("queue", f"running / waiting ({label})", [("running", history.running), ("waiting", history.waiting)]),
                ("vram", f"VRAM % ({label})", [("VRAM %", [None if v is None else v * 100 for v in history.vram])]),
            ]
        for chart, title, series in specs or [(c, "no engine on this row", []) for c in ("tps", "kv", "queue", "vram")]:
            widget = self.query_one(f"#chart-{chart}", PlotextPlot)
            plt = widget.plt
            plt.clear_data()
            plt.clear_figure()
            plt.title(title)
            if history is not None:
                self._plot(plt, history, series, seconds, now)
            widget.refresh()

    @staticmethod
    def _plot(plt: Any, history: History, series: list[tuple[str, Any]], seconds: float, now: float) -> None:
        indices = history.window(seconds, now)
        times = history.times.raw_tail(len(history.times))
        for name, values in series:
            values = list(values)
            points = [(times[i] - now, values[i]) for i in indices if values[i] is not None]
            if points:
                plt.plot([p[0] for p in points], [p[1] for p in points], label=name, marker="braille")
        for at in history.restarts:
            if now - at <= seconds:
                plt.vline(at - now, "red")
        plt.xlabel("seconds ago (red line: restart, counters reset)")
        plt.xlim(-seconds, 0)
        if any(name.endswith("%") for name, _ in series):
            plt.ylim(0, 100)  # a percentage chart keeps its scale, so 40 % never looks like a full bar
