"""The overview as an operator reads it at 80x24, 120x40 and 200x50: a verdict in words that names what is
wrong (a down node with its reason), totals that add up to the rows, the rows that need attention first
with their "why", and columns that fit: every one but the trend at 120 (the model reads), folding in the
stated order (never State) at 80, the extra width to the trend at 200, no cell drawn into its neighbour, a
version never cut."""

from __future__ import annotations

import asyncio
import re
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType

import pytest
from textual.widgets import Static

from poolconsole.config import parse_config
from poolconsole.model.hosts import HostSnapshot, HostState
from poolconsole.model.snapshots import EngineState
from poolconsole.ui import overview_rows
from poolconsole.ui.app import PoolApp
from poolconsole.ui.grid import PoolGrid
from poolconsole.ui.screens.overview import OverviewScreen
from tests.helpers import uipool
from tests.ui.test_console import demo_pool, feed, settle, static_app

SIZES = [(80, 24), (120, 40), (200, 50)]
REFUSED = "connection refused by 127.0.0.1:8000 (is the engine running and listening on that port?)"


def summary(app: PoolApp) -> list[str]:
    return str(app.screen.query_one("#summary", Static).render()).splitlines()


def grid(app: PoolApp) -> PoolGrid:
    return app.screen.query_one("#pool", PoolGrid)


def summary_tps(app: PoolApp) -> float | None:
    found = re.search(r"generation (\d+|n/a)", " ".join(summary(app)))
    assert found, summary(app)
    return None if found.group(1) == "n/a" else float(found.group(1))


def rows_tps(app: PoolApp) -> float:
    table = grid(app)
    values = [table.get_cell(k, "tps").plain for k in table.order if not table.is_span(k)]  # not host lines
    return sum(float(v) for v in values if v != "n/a")


def assert_cells_fit(app: PoolApp) -> None:
    """Every cell drawn within its column: the text fits (prose may end in "…"), one blank before each
    column, and what the line shows there is the cell's own text. A host line (one line across the
    columns) is drawn whole within the columns' width, or ends in "…" at its edge."""
    table = grid(app)
    pad_left, pad_right = table.pad
    for line, key in enumerate(table.order[: table.size.height - 1], start=1):
        drawn = table.render_line(line).text
        if table.is_span(key):
            text, inner = table.get_cell(key, "line").plain, table.row_width - pad_left
            assert drawn[:pad_left] == " " * pad_left, (key, drawn)
            if len(text) > inner:
                assert drawn[pad_left : pad_left + inner] == text[: inner - 1] + "…", (key, drawn)
            else:
                assert drawn[pad_left : pad_left + inner] == text.ljust(inner), (key, drawn)
            continue
        x = 0
        for column in table.columns:
            text = table.get_cell(key, column.key).plain
            shown = drawn[x + pad_left : x + pad_left + column.width]
            assert drawn[x : x + pad_left] == " " * pad_left, (key, column.key, drawn)
            if column.ellipsis and len(text) > column.width:
                assert shown == text[: column.width - 1] + "…", (key, column.key, shown)
            else:
                assert len(text) <= column.width, f"{key} {column.key}: {text!r} overflows {column.width} cells"
                assert shown == text.ljust(column.width), (key, column.key, shown)
            x += column.width + pad_left + pad_right


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_the_summary_adds_up_and_the_columns_fit(tmp_path: Path, size: tuple[int, int]) -> None:
    app = static_app(tmp_path)
    async with app.run_test(size=size) as pilot:
        await feed(app)
        await settle(pilot, app)
        lines = summary(app)
        assert lines[0] == "healthy: 8/8 engines up, 7/7 hosts up"
        assert all(len(line) <= size[0] - 2 for line in lines)
        text = " ".join(lines)
        if size[1] < 30:  # short: the verdict and one line of the main figures, the rows keep the lines
            assert len(lines) == 2 and lines[1].startswith("engines 8/8 ok · generation "), lines
        else:
            for part in ("engines 8/8 ok", "running", "waiting", "VRAM dedicated", "unified", "power", "gateway"):
                assert part in text
        assert summary_tps(app) == rows_tps(app) > 0
        table = grid(app)
        keys = [c.key for c in table.columns]
        assert "state" in keys
        folded = [key for key in overview_rows.FOLD_ORDER if key not in keys]
        assert folded == list(overview_rows.FOLD_ORDER[: len(folded)])  # in the stated order, nothing else
        if size[0] >= 124:
            assert folded == [] and "age" in keys
        elif size[0] >= 120:  # the trend alone gives way, so the model reads (14 cells of its name)
            assert folded == ["spark"] and "age" in keys and "model" in keys
        else:
            assert folded and "spark" in folded
        width = sum(c.width + sum(table.pad) for c in table.columns)
        assert width == table.content_width()  # the whole width used, none past it
        assert_cells_fit(app)
        for key in (k for k in table.order if not table.is_span(k)):
            kind = table.get_cell(key, "kind").plain if "kind" in keys else None
            assert kind is None or kind in ("llamacpp", "llamacpp b1-0c1e570") or "b1-" not in kind
            if "spark" in keys and key.startswith("engine:"):
                assert len(table.get_cell(key, "spark").plain) == table.columns[keys.index("spark")].width
        if size[0] == 200:  # wide: the model with the profile it runs whole, what is left to the trend
            models = [table.get_cell(k, "model").plain for k in table.order if k.startswith("engine:")]
            assert any(" · " in m for m in models) and not [m for m in models if m.endswith("…")], models
            spark = table.columns[keys.index("spark")].width
            assert spark > next(s.min for s in overview_rows.SPECS if s.key == "spark")  # the spare width: the trend
            assert table.get_cell("engine:qwen2.5-coder-3090", "kind").plain == "llamacpp b1-0c1e570"


def down(app: PoolApp) -> None:
    """ws48 stops answering: its host unreachable over SSH, its engine refusing connections."""
    at = uipool.T0 + 3
    app.apply_host(
        HostSnapshot(
            "ws48", "ws48", HostState.UNREACHABLE, "connection refused by ws48:22 (is sshd running?)", fetched_at=at
        )
    )
    snap = next(s for s in uipool.engine_snapshots(app.config) if s.name == "qwen3-30b-a3b")
    app.apply_engine(replace(snap, fetched_at=at, state=EngineState.DOWN, error=REFUSED, metrics=None))


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_a_down_node_is_named_with_its_reason_and_comes_first(tmp_path: Path, size: tuple[int, int]) -> None:
    app = static_app(tmp_path)
    async with app.run_test(size=size) as pilot:
        await feed(app)
        down(app)
        await settle(pilot, app)
        verdict = summary(app)[0]
        assert verdict.startswith("1 problem: ws48 unreachable (connection refused)"), verdict
        assert "engines 7/8 ok" in " ".join(summary(app))
        table = grid(app)
        # attention first (on by default, something is wrong): its group first, the host line over its engine
        assert table.order[:2] == ["host:ws48", "engine:qwen3-30b-a3b"]
        line = table.get_cell("host:ws48", "line").plain
        assert line.startswith("ws48  unreachable  refused"), line
        assert table.get_cell("engine:qwen3-30b-a3b", "state").plain == "down"
        assert table.get_cell("engine:qwen3-30b-a3b", "why").plain == "host down"
        assert table.get_cell("engine:qwen3-next-80b", "why").plain == ""
        assert "problems first" in str(app.screen.query_one("#status-line").render())
        assert summary_tps(app) == rows_tps(app)
        assert_cells_fit(app)
        await pilot.press("exclamation_mark")  # the registry's key: back to the plain sort
        await settle(pilot, app)
        assert isinstance(app.screen, OverviewScreen) and app.screen.attention is False
        assert table.order[:2] != ["host:ws48", "engine:qwen3-30b-a3b"]
        assert "problems first" not in str(app.screen.query_one("#status-line").render())


async def test_firing_alerts_name_the_row_and_the_verdict(tmp_path: Path) -> None:
    """A queue past the threshold (once it held for waiting_for_s) and swap on unified memory."""
    app = static_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await feed(app)
        snap = [s for s in uipool.engine_snapshots(app.config) if s.name == "qwen3-next-80b"][-1]  # no reset
        assert snap.metrics is not None
        for later in (10, 20, 30):  # held 20 s: past the default waiting_for_s
            # queueing, still generating (a counter standing still for stall_s with requests in is the stall rule's)
            generated = (snap.metrics.values.get("generation_tokens_total") or 0.0) + 500.0 * later
            values = dict(snap.metrics.values) | {"requests_waiting": 47.0, "generation_tokens_total": generated}
            queued = replace(snap, metrics=replace(snap.metrics, values=MappingProxyType(values)))
            app.apply_engine(replace(queued, fetched_at=snap.fetched_at + later, monotonic=snap.monotonic + later))
        spark = next(h for h in uipool.host_snapshots(app.config) if h.name == "spark")
        assert spark.system_memory is not None
        swapping = replace(spark, system_memory=replace(spark.system_memory, swap_used_bytes=2 * 2**30))
        for later in (0, 10, 20):
            app.apply_host(replace(swapping, fetched_at=spark.fetched_at + later))
        await settle(pilot, app)
        verdict = summary(app)[0]
        assert verdict.startswith("2 problems: "), verdict
        assert "qwen3-next-80b queueing 47 (degrade to qwen3-30b-a3b)" in verdict and "spark swap in use" in verdict
        table = grid(app)
        assert table.get_cell("engine:qwen3-next-80b", "why").plain == "47 waiting"
        assert table.get_cell("engine:gpt-oss-120b-spark", "why").plain == "swap in use"
        engines = [key for key in table.order if key.startswith("engine:")]
        assert set(engines[:2]) == {"engine:qwen3-next-80b", "engine:gpt-oss-120b-spark"}
        assert "swap 2.0G!" in table.get_cell("host:spark", "line").plain  # flagged on its host line
        assert "alerts 2 warning" in " ".join(summary(app))


async def test_the_demo_pool_names_its_down_node(tmp_path: Path) -> None:
    """The live demo (hosts over SSH) with ws48 going down, as `--scenario node-down` does: the verdict
    names it with its reason, the summary's tok/s is the sum of the rows of the same refresh, at 80x24."""
    async with demo_pool(21, tmp_path / "keys") as pool:
        config = parse_config(
            pool.config_toml()
            .replace("poll_interval_s = 1.0", "poll_interval_s = 0.5")
            .replace("http_timeout_s = 3.0", "http_timeout_s = 1.0")
        )
        app = PoolApp(config, theme_state=tmp_path / "ui.json")
        async with app.run_test(size=(80, 24)) as pilot:
            await asyncio.sleep(2.5)
            await settle(pilot, app)
            assert summary_tps(app) == rows_tps(app) > 0
            await pool.host_down("ws48")
            for _ in range(40):
                await asyncio.sleep(0.25)
                await settle(pilot, app)
                if summary(app)[0].startswith("1 problem: ws48 unreachable"):
                    break
            verdict = summary(app)[0]
            assert verdict.startswith("1 problem: ws48 unreachable ("), verdict
            assert "refused" in verdict or "lost" in verdict or "timed out" in verdict, verdict
            assert grid(app).order[:2] == ["host:ws48", "engine:qwen3-30b-a3b"]
            assert "state" in grid(app).column_keys
            assert summary_tps(app) == rows_tps(app)
            assert_cells_fit(app)
