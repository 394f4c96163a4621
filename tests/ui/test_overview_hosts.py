"""The overview grouped by host (issue 18 item 2) and sorted as a mouse user expects (item 5): each host's
line over its engines shows a bar per GPU (the 4-GPU tensor-parallel node four), unified memory drawn
apart in the theme's `unified` colour; an engine shows its own memory where its processes are known, and
never repeats its host's total when it shares the cards. A click on a header sorts by that column, a
second click reverses it, inside each group while rows are grouped (`G` groups apart from the sort: the
sort chosen is kept); `:` opens the command palette."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from rich.style import Style
from textual.command import CommandPalette

from poolconsole.model.snapshots import EngineState
from poolconsole.ui.app import PoolApp
from poolconsole.ui.grid import PoolGrid
from poolconsole.ui.screens.overview import OverviewScreen
from poolconsole.ui.screens.overview_book import GATEWAYS
from tests.helpers import uipool
from tests.ui.test_console import feed, settle, static_app
from tests.ui.test_overview_summary import assert_cells_fit


def grid(app: PoolApp) -> PoolGrid:
    return app.screen.query_one("#pool", PoolGrid)


def status(app: PoolApp) -> str:
    return str(app.screen.query_one("#status-line").render())


async def test_host_lines_show_a_bar_per_card_and_engines_their_own_share(tmp_path: Path) -> None:
    app = static_app(tmp_path)
    async with app.run_test(size=(200, 50)) as pilot:
        await feed(app)
        await settle(pilot, app)
        table = grid(app)
        assert "grouped by host" in status(app)
        hosts = [k for k in table.order if k.startswith("host:")]
        assert len(hosts) == 7 and all(table.is_span(k) for k in hosts)
        for host in hosts:  # each host line over its own engines
            at = table.order.index(host)
            engines = [e.name for e in app.config.engines if e.host == host[5:]]
            assert sorted(table.order[at + 1 : at + 1 + len(engines)]) == sorted(f"engine:{e}" for e in engines)

        tp4 = table.get_cell("host:tp4", "line").plain
        assert tp4.startswith("tp4  ok  4× H200") and tp4.count("▕") == 4, tp4  # four cards, four bars
        one = table.get_cell("host:ws48", "line").plain
        assert one.count("▕") == 1, one

        spark = table.get_cell("host:spark", "line")
        at = spark.plain.index("◆")
        styles = [s.style for s in spark.spans if s.start <= at < s.end]
        unified = app.theme_variables["unified"]
        assert any(Style.parse(str(s)).color == Style.parse(unified).color for s in styles), (styles, unified)
        assert "unified" in spark.plain and "swap" not in spark.plain  # no swap in use: nothing flagged

        # tp4's engine: its four processes' 40 GiB each, of the four cards, not the host's used total
        snaps = {h.name: h for h in uipool.host_snapshots(app.config)}
        total = sum(g.memory_total_bytes or 0 for g in snaps["tp4"].gpus) / 2**30
        own = table.get_cell("engine:qwen3-next-80b", "vram").plain
        assert own.endswith(f" 160/{total:.0f}G"), own
        assert own.split()[-1] not in tp4  # the host line's used figure differs
        # rig3090's two engines share its card and their processes are not known: neither repeats 21/140G
        for name in ("engine:qwen2.5-coder-3090", "engine:embeddings"):
            assert table.get_cell(name, "vram").plain == "shared"
        assert "/140G" in table.get_cell("host:rig3090", "line").plain  # the card's use is on its host line
        # alone on its card, processes unknown: the card's memory is the engine's
        assert table.get_cell("engine:qwen3-30b-a3b", "vram").plain.endswith("/140G")
        assert_cells_fit(app)


async def test_a_click_on_a_header_sorts_by_it_and_again_reverses(tmp_path: Path) -> None:
    app = static_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await feed(app)
        await settle(pilot, app)
        table = grid(app)

        async def click(column: str) -> None:
            x = 0
            for c in table.columns:
                if c.key == column:
                    break
                x += c.width + sum(table.pad)
            await pilot.click("#pool", offset=(x + 2, 0))
            await settle(pilot, app)

        def kv_of(key: str) -> float | None:
            view = app.state.engines[key[7:]].view
            return view.kv_cache_usage if view else None

        def kv_order() -> list[float | None]:
            return [kv_of(k) for k in table.order if k.startswith("engine:")]

        def highest_first(values: list[float | None]) -> bool:
            known = [v for v in values if v is not None]
            return values[: len(known)] == sorted(known, reverse=True)  # and the unknown ones last

        await click("kv")  # grouped by host still: each host's engines by KV, the hosts by their fullest
        assert "sorted by KV, grouped by host" in status(app) and "reversed" not in status(app)
        groups: list[list[str]] = []
        for key in table.order:
            if table.is_span(key):
                groups.append([])
            else:
                groups[-1].append(key)
        assert len(groups) == 7 and all(highest_first([kv_of(k) for k in g]) for g in groups)
        known = [v for v in kv_order() if v is not None]
        assert len(known) >= 3 and kv_of(groups[0][0]) == max(known)  # the first engine row is the pool's top
        assert highest_first([kv_of(g[0]) if g else None for g in groups])

        await pilot.press("G", "G")  # by model, then one flat list: the sort is kept, ranked across the pool
        await settle(pilot, app)
        assert "sorted by KV" in status(app) and "grouped" not in status(app), status(app)
        assert not any(table.is_span(k) for k in table.order)
        assert highest_first(kv_order())
        await click("kv")
        assert "sorted by KV, reversed" in status(app)
        assert kv_order()[: len(known)] == sorted(known) and all(v is None for v in kv_order()[len(known) :])
        await click("engine")
        assert "sorted by Engine" in status(app)  # the header's word
        assert [k for k in table.order if k.startswith("engine:")] == sorted(table.order)
        await pilot.press("G")  # grouped by host again, the engines by name in each group
        await settle(pilot, app)
        assert "sorted by Engine, grouped by host" in status(app) and table.order[0].startswith("host:")
        groups = [[]]
        for key in table.order[1:]:
            groups.append([]) if table.is_span(key) else groups[-1].append(key)
        assert len(groups) == 7 and all(g == sorted(g) for g in groups)

        await pilot.press("colon")
        await pilot.pause()
        assert isinstance(app.screen, CommandPalette)
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, OverviewScreen)


async def test_grouped_by_model_the_gateway_is_not_a_second_engine_of_a_model(tmp_path: Path) -> None:
    """Grouped by model, the LiteLLM gateway sat under the first model it routes ("qwen3-next-80b  2 engines"),
    its tok/s summed in with the engine it routes to. It has a group of its own."""
    app = static_app(tmp_path)
    async with app.run_test(size=(160, 45)) as pilot:
        await feed(app)
        await settle(pilot, app)
        await pilot.press("G")
        await settle(pilot, app)
        table = grid(app)
        assert "grouped by model" in status(app)
        screen = app.screen
        assert isinstance(screen, OverviewScreen)
        groups = {g: [k for k in keys if k != g] for g, keys in screen.members.items() if g.startswith("model:")}
        gateways = [e.name for e in app.config.engines if e.kind.value == "litellm"]
        assert gateways and groups[f"model:{GATEWAYS}"] == [f"engine:{n}" for n in gateways]
        for group, keys in groups.items():
            if group != f"model:{GATEWAYS}":
                assert not {f"engine:{n}" for n in gateways} & set(keys), (group, keys)
        line = table.get_cell(f"model:{GATEWAYS}", "line").plain
        assert f"{len(gateways)} engine" in line


async def test_problems_only_with_a_filter_shows_no_group_line_alone(tmp_path: Path) -> None:
    """rig3090 holds a healthy Ollama and a down llama.cpp engine. Filtered to "ollama" with `p` on, its host
    line was shown alone (its group has a problem, though not among what the filter left): it read as a host
    with no engines."""
    app = static_app(tmp_path)
    async with app.run_test(size=(160, 45)) as pilot:
        await feed(app)
        for snap in uipool.engine_snapshots(app.config):
            if snap.name == "qwen2.5-coder-3090":
                app.apply_engine(replace(snap, state=EngineState.DOWN, error="connection refused"))
        await settle(pilot, app)
        await pilot.press("p")
        await settle(pilot, app)
        assert "engine:qwen2.5-coder-3090" in grid(app).order  # the problem, under its host's line
        await pilot.press("slash", *"ollama", "enter")
        await settle(pilot, app)
        assert grid(app).order == [], grid(app).order
        assert "problems only: none of the 1 match the filter" in status(app), status(app)
