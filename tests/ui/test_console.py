"""Pilot tests of the console: navigate, filter, sort, open detail, gateway drift, theme switch,
read-only mode, and a host that dies while the others keep updating."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from textual.geometry import Region
from textual.widgets import DataTable, Input

from poolconsole.config import parse_config
from poolconsole.sim.demo import SimPool
from poolconsole.ui import overview_rows
from poolconsole.ui.app import PoolApp
from poolconsole.ui.grid import PoolGrid
from poolconsole.ui.screens.detail import DetailScreen, engine_text
from poolconsole.ui.screens.others import GatewayScreen, HelpScreen
from poolconsole.ui.screens.overview import OverviewScreen
from tests.helpers import uipool
from tests.helpers.simpools import answering


@asynccontextmanager
async def demo_pool(seed: int, keys: Path | None) -> AsyncIterator[SimPool]:
    """The simulated pool, answering, for one test (hosts over SSH when `keys` is given)."""
    pool = SimPool(seed=seed)
    async with answering(pool, keys):
        yield pool


def static_app(tmp_path: Path, read_only: bool = False) -> PoolApp:
    return PoolApp(
        uipool.config(),
        live=False,
        clock=uipool.clock,
        theme_state=tmp_path / "ui.json",
        read_only=read_only,
        subtitle="test pool",
    )


async def feed(app: PoolApp) -> None:
    cfg = app.config
    for host in uipool.host_snapshots(cfg):
        app.apply_host(host)
    for snap in uipool.engine_snapshots(cfg):
        app.apply_engine(snap)


async def settle(pilot: object, app: PoolApp) -> None:
    await pilot.pause()  # type: ignore[attr-defined]
    app.refresh_screen()
    await pilot.pause()  # type: ignore[attr-defined]


async def open_audit(pilot: object, app: PoolApp) -> None:
    """`L`'s action, then wait for the audit screen (it reads the log in a thread first)."""
    from poolconsole.ui.screens.action import AuditScreen

    await app.run_action("audit_log")
    for _ in range(40):
        if isinstance(app.screen, AuditScreen):
            break
        await pilot.pause(0.05)  # type: ignore[attr-defined]
    assert isinstance(app.screen, AuditScreen)


def demo_app(pool: SimPool, tmp_path: Path) -> PoolApp:
    """The console on a demo pool, its audit log and smoke store in `tmp_path`."""
    app = PoolApp(parse_config(pool.config_toml()), theme_state=tmp_path / "ui.json")
    app.audit_path = tmp_path / "audit.sqlite3"
    app.smoke_db = tmp_path / "smoke.sqlite3"
    return app


async def select_row(pilot: object, app: PoolApp, key: str) -> None:
    """After the first polls of a live pool, put the overview's cursor on row `key`."""
    await asyncio.sleep(1.5)
    await settle(pilot, app)
    table = app.screen.query_one("#pool", PoolGrid)
    table.move_cursor(row=table_rows(app).index(key))


def table_rows(app: PoolApp) -> list[str]:
    table = app.screen.query_one("#pool", PoolGrid)
    return list(table.order)


async def test_overview_rows_filter_sort_and_cursor(tmp_path: Path) -> None:
    app = static_app(tmp_path)
    async with app.run_test(size=(160, 40)) as pilot:
        await feed(app)
        await settle(pilot, app)
        assert isinstance(app.screen, OverviewScreen)
        rows = table_rows(app)
        assert len(rows) == 15 and "engine:qwen3-next-80b" in rows  # 8 engines under their 7 host lines
        table = app.screen.query_one("#pool", PoolGrid)
        assert table.get_cell("engine:qwen3-next-80b", "state").plain == "ok"
        assert table.get_cell("engine:qwen3-next-80b", "queue").plain == "0/0"
        assert table.get_cell("engine:embeddings", "kv").plain == "n/a"  # Ollama exposes no KV: n/a, never 0
        await pilot.press("down", "down")
        selected = app.screen.selected()
        await feed(app)  # a new poll must not move the cursor
        await settle(pilot, app)
        assert app.screen.selected() == selected
        await pilot.press("slash", *"vllm")
        await settle(pilot, app)
        found = table_rows(app)  # the three vLLM engines, each under its host's line (the grouping kept)
        engines = [r for r in found if r.startswith("engine:")]
        assert len(engines) == 3 and all(found[found.index(e) - 1].startswith("host:") for e in engines), found
        assert len(found) == 6
        await pilot.press("escape")
        await settle(pilot, app)
        assert len(table_rows(app)) == 15
        await pilot.press("s")  # sort by tok/s
        await settle(pilot, app)
        assert "tok/s" in str(app.screen.query_one("#status-line").render())


async def test_typing_q_in_the_filter_filters_and_does_not_quit(tmp_path: Path) -> None:
    """`q` quits from the screens, but in a text box it is a letter ("qwen"): the box gets it."""
    app = static_app(tmp_path)
    async with app.run_test(size=(160, 40)) as pilot:
        await feed(app)
        await settle(pilot, app)
        await pilot.press("slash", *"qwen")
        await settle(pilot, app)
        assert app.is_running and app.screen.query_one("#filter", Input).value == "qwen"
        assert "engine:qwen3-next-80b" in table_rows(app) and "engine:embeddings" not in table_rows(app)
        await pilot.press("escape", "q")
        await pilot.pause()
        assert not app.is_running


async def test_detail_gateway_help_and_back(tmp_path: Path) -> None:
    app = static_app(tmp_path)
    async with app.run_test(size=(160, 45)) as pilot:
        await feed(app)
        await settle(pilot, app)
        keys = table_rows(app)
        app.screen.query_one("#pool", PoolGrid).move_cursor(row=keys.index("engine:qwen3-next-80b"))
        await pilot.press("enter")
        await settle(pilot, app)
        assert isinstance(app.screen, DetailScreen)
        panel = app.screen.query_one("#engine-info")
        info = " ".join(strip.text.strip() for strip in panel.render_lines(Region(0, 0, *panel.size)))
        assert "qwen3-next-80b" in info and "TTFT" in info
        assert app.screen.query_one("#gpus", DataTable).row_count == 4  # the TP node's four cards
        await pilot.press("escape")
        await pilot.press("g")
        await settle(pilot, app)
        assert isinstance(app.screen, GatewayScreen)
        drift = str(app.screen.query_one("#drift").render())
        assert "retired-model" in drift and "served by no engine" in drift
        await pilot.press("question_mark")
        await settle(pilot, app)
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert isinstance(app.screen, OverviewScreen)


async def test_theme_switch_is_remembered(tmp_path: Path) -> None:
    app = static_app(tmp_path)
    async with app.run_test(size=(120, 30)) as pilot:
        first = app.theme
        assert first == "pool-dark"  # the default
        await pilot.press("t")
        await pilot.pause()
        second = app.theme
        assert second != first and second in app.pool_themes
    assert (tmp_path / "ui.json").read_text().count(second) == 1
    again = static_app(tmp_path)
    async with again.run_test(size=(120, 30)):
        assert again.theme == second


async def test_the_audit_screen_names_its_log(tmp_path: Path) -> None:
    """The demo's audit log is its own: the screen says which file it reads, and the CLI line for it."""
    from poolconsole.ops import audit

    app = static_app(tmp_path)
    app.audit_path = tmp_path / "demo-7.audit.sqlite3"
    audit.record(app.audit_path, "restart", "qwen", ["docker restart qwen"], "ok", "serving after 2.0 s", 2.0)
    async with app.run_test(size=(160, 30)) as pilot:
        await open_audit(pilot, app)
        await pilot.pause()  # mounted: its Header's children too
        assert app.screen.sub_title == f"audit log {app.audit_path} (the CLI: poolconsole audit --db {app.audit_path})"


async def test_the_detail_screen_shows_a_logs_diagnosis_whole(tmp_path: Path) -> None:
    """What the log said and what to change are the most useful lines at 3 a.m.: the engine's panel is as
    tall as its text (it stopped at 9 lines, mid-sentence, before "change:")."""
    from poolconsole.model.failure_modes import Diagnosis, diagnose

    app = static_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await feed(app)
        name = "qwen3-next-80b"
        findings = diagnose(["torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"])
        assert findings
        app.state.engines[name].diagnosis = Diagnosis(uipool.T0, "went down", "journal", tuple(findings))
        app.open_detail(f"engine:{name}")
        await settle(pilot, app)
        assert isinstance(app.screen, DetailScreen)
        info = app.screen.query_one("#engine-info")
        shown = " ".join(strip.text.strip() for strip in info.render_lines(Region(0, 0, *info.size)))
        assert f"change: {findings[0].adjustment}"[:40] in shown
        assert findings[0].adjustment.split()[-1] in shown  # its last word too
        assert app.screen.query_one("#top").outer_size.height >= info.outer_size.height  # none of it clipped


async def test_a_route_whose_engine_is_down_names_the_engine(tmp_path: Path) -> None:
    """The gateway screen said "NONE" for a route whose engine is simply down (the overview knew which)."""
    from dataclasses import replace

    from poolconsole.model.snapshots import EngineState

    app = static_app(tmp_path)
    async with app.run_test(size=(160, 40)) as pilot:
        await feed(app)
        serving = next(s for s in uipool.engine_snapshots(app.config) if "gemma-3-27b-it" in s.models)
        down = replace(
            serving,
            state=EngineState.DOWN,
            error="connection refused",
            models=(),
            metrics=None,
            fetched_at=uipool.T0 + 4,
            monotonic=4.0,
        )
        app.apply_engine(down)
        await pilot.press("g")
        await settle(pilot, app)
        assert isinstance(app.screen, GatewayScreen)
        table = app.screen.query_one("#routes", DataTable)
        row = [str(c) for c in table.get_row("gateway:gemma-3-27b-it")]
        assert row[2:] == [serving.name, serving.host or "-", "down"], row
        drift = str(app.screen.query_one("#drift").render())
        assert f"gateway route 'gemma-3-27b-it': its engine {serving.name} is down" in drift
        assert "'gemma-3-27b-it' is served by no engine" not in drift


async def test_read_only_is_shown_and_refuses_mutating_actions(tmp_path: Path) -> None:
    app = static_app(tmp_path, read_only=True)
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.pause()
        assert "read-only" in app.sub_title
        shown = {b.binding.action for b in app.screen.active_bindings.values() if b.enabled}
        from poolconsole.ui import registry

        assert {"restart", "rollover"} <= registry.MUTATING
        assert not shown & {f"app.{a}" for a in registry.MUTATING}
        assert all(app.check_action(a, ()) is False for a in registry.MUTATING)
        await pilot.press("R")  # refused: nothing opens, and it says why
        await pilot.pause()
        assert isinstance(app.screen, OverviewScreen)
        told = [n.message for n in app._notifications]
        assert "read-only console (started with --read-only): Restart engine is refused" in told, told
        await pilot.press("question_mark")  # a key that changes nothing is not refused
        await pilot.pause()
        assert not any("Help" in m and "refused" in m for m in (n.message for n in app._notifications))
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert not any("Restart" in t or "Switch profile" in t for t in titles)


async def test_a_dead_host_does_not_stop_the_others(tmp_path: Path) -> None:
    async with demo_pool(9, tmp_path / "keys") as pool:
        config = parse_config(
            pool.config_toml()
            .replace("poll_interval_s = 1.0", "poll_interval_s = 0.5")
            .replace("http_timeout_s = 3.0", "http_timeout_s = 1.0")
        )
        app = PoolApp(config, theme_state=tmp_path / "ui.json")
        app.runtime.gc.settle_s, app.runtime.gc.full_every_s = 1.0, 2.0  # a long-running console's settings
        threshold = gc.get_threshold()
        async with app.run_test(size=(160, 40)) as pilot:
            await asyncio.sleep(2.5)
            await settle(pilot, app)
            table = app.screen.query_one("#pool", PoolGrid)
            assert table.get_cell("engine:qwen3-30b-a3b", "state").plain == "ok"
            await pool.host_down("ws48")
            polls_before = len(app.state.engines["qwen3-next-80b"].history.times)
            tasks_before = len(asyncio.all_tasks())
            await asyncio.sleep(3.0)
            await settle(pilot, app)
            # ~90 sleeps happened (15 loops, 0.5 s apart): none may leave a task behind
            assert len(asyncio.all_tasks()) < tasks_before + 30
            assert table.get_cell("engine:qwen3-30b-a3b", "state").plain == "down"
            view = app.state.engines["qwen3-30b-a3b"].view
            assert view is not None and "refused" in (view.error or "")
            assert app.state.hosts["ws48"].snapshot is not None
            assert app.state.hosts["ws48"].snapshot.state.value == "unreachable"
            assert len(app.state.engines["qwen3-next-80b"].history.times) >= polls_before + 3  # still updating
            assert table.get_cell("engine:qwen3-next-80b", "state").plain == "ok"
            assert ("qwen3-30b-a3b", "down") in app.alerts.active
            assert app.runtime.gc.settled and gc.get_freeze_count() > 0 and app.runtime.gc.full_collections >= 2
        gc.unfreeze()
        gc.set_threshold(*threshold)


async def test_smoke_action_runs_and_shows_results(tmp_path: Path) -> None:
    from poolconsole.ui.screens.smoke import SmokeScreen

    async with demo_pool(11, None) as pool:
        app = PoolApp(parse_config(pool.config_toml()), theme_state=tmp_path / "ui.json")
        app.smoke_db = tmp_path / "smoke.sqlite3"
        async with app.run_test(size=(160, 45)) as pilot:
            await select_row(pilot, app, "engine:qwen3-30b-a3b")
            await pilot.press("m")
            await pilot.pause()
            assert isinstance(app.screen, SmokeScreen)
            for _ in range(120):
                if app.screen.finished:
                    break
                await asyncio.sleep(0.25)
            assert app.screen.finished
            checks = {r.check for r in app.screen.results}
            assert {"models", "chat", "chat_stream", "completions"} <= checks
            assert all(r.passed for r in app.screen.results), [r.reason for r in app.screen.results]
            assert app.screen.query_one("#smoke-results", DataTable).row_count == len(app.screen.results)
            # a first run has no baseline: no "now vs baseline" with bars of 0 for it
            assert app.screen.chart_titles["ttft"].startswith("TTFT p95 (ms): now (no baseline yet for "), (
                app.screen.chart_titles
            )
        from poolconsole.ops.smoke.runs import list_runs

        (run,) = list_runs(tmp_path / "smoke.sqlite3")
        measured = run["conditions"]["qwen3-30b-a3b"]  # what the engine itself says it runs with, as the CLI stores
        assert measured["engine_reported"]["max_context"] is not None, measured["engine_reported"]


async def pick_profile(pilot: object, app: PoolApp, profile: str) -> None:
    """P on the 80B engine's row, then `profile` in the picker."""
    from textual.widgets import OptionList

    from poolconsole.ui.screens.action import ProfilePicker

    table = app.screen.query_one("#pool", PoolGrid)
    table.move_cursor(row=table_rows(app).index("engine:qwen3-next-80b"))
    await pilot.press("P")  # type: ignore[attr-defined]
    await pilot.pause()  # type: ignore[attr-defined]
    assert isinstance(app.screen, ProfilePicker)
    shown = [str(option.prompt) for option in app.screen.query_one(OptionList).options]
    marked = [line for line in shown if line.endswith("  (active)")]  # the profile it runs now, and no other
    assert app.screen.active is not None and marked == [f"{app.screen.active}  (active)"], shown
    app.screen.dismiss(profile)
    await pilot.pause()  # type: ignore[attr-defined]


async def action_outcome(app: PoolApp, tries: int) -> str | None:
    """The action screen's outcome once it has one (or None after `tries` quarter seconds)."""
    from poolconsole.ui.screens.action import ActionScreen

    for _ in range(tries):
        if isinstance(app.screen, ActionScreen) and app.screen.outcome:
            return app.screen.outcome
        await asyncio.sleep(0.25)
    return None


async def test_restart_and_rollover_from_the_console(tmp_path: Path) -> None:
    from poolconsole.ops import audit
    from poolconsole.ui.screens.action import ActionScreen, ConfirmAction

    async with demo_pool(12, tmp_path / "keys") as pool:
        app = demo_app(pool, tmp_path)
        async with app.run_test(size=(160, 45)) as pilot:
            await select_row(pilot, app, "engine:qwen3-30b-a3b")
            await pilot.press("R")
            await pilot.pause()
            assert isinstance(app.screen, ConfirmAction)
            assert "docker restart qwen3-30b-a3b" in app.screen.lines.plain  # the exact command, shown first
            await pilot.press("y")
            await pilot.pause()
            assert isinstance(app.screen, ActionScreen)
            for _ in range(160):
                if app.screen.outcome:
                    break
                await asyncio.sleep(0.25)
            assert app.screen.outcome == "ok"
            await pilot.press("escape")
            await pick_profile(pilot, app, "bf16-tp4")  # 149 GiB of weights over 4 x 24 GB: does not fit
            assert isinstance(app.screen, ConfirmAction) and "DOES NOT FIT" in app.screen.title_text
            assert not app.screen.query("#yes")  # the rollover would refuse it: no "Run it" is offered
            await pilot.press("y")
            await pilot.pause()
            assert not isinstance(app.screen, (ConfirmAction, ActionScreen))  # closed, nothing ran
            # a profile the live pool says fits: the confirmation says so, and the rollover goes through
            await pilot.press("escape")
            await pilot.pause()
            await pick_profile(pilot, app, "awq-4bit-tp4-long")
            assert isinstance(app.screen, ConfirmAction) and app.screen.title_text.endswith("?")
            assert "awq-4bit-tp4-long: fits" in app.screen.lines.plain
            await pilot.press("y")
            await pilot.pause()
            assert await action_outcome(app, 240) == "ok"
            said = app.screen.said  # the smoke test it was promoted on, check by check
            checks = [line for line in said if line.startswith("  smoke ")]
            assert checks and all(": PASS" in line for line in checks), said
            passed = next(line for line in said if line.startswith("smoke test: "))
            assert passed == f"smoke test: {len(checks)}/{len(checks)} checks passed", said
            assert said[-1].startswith("== ok: serving awq-4bit-tp4-long") and said[-1].endswith("smoke test passed")
            track = app.state.engines["qwen3-next-80b"]  # the overview and the detail say the profile it runs now
            assert overview_rows.engine_words(track)["model"].endswith(" · awq-4bit-tp4-long")
            assert "profile awq-4bit-tp4-long " in engine_text(track).plain
            # the active profile again: a re-apply, said as one ("Switch from X to X?" read as a no-op)
            await pilot.press("escape")
            await pilot.pause()
            await pick_profile(pilot, app, "awq-4bit-tp4-long")
            assert isinstance(app.screen, ConfirmAction)
            assert app.screen.title_text.startswith("Re-apply awq-4bit-tp4-long to qwen3-next-80b? It is the active")
            await pilot.press("n")
            await pilot.pause()
            assert not isinstance(app.screen, (ConfirmAction, ActionScreen))
            await pilot.press("escape")  # back on the overview, where E opens the timeline
            # the timeline has each action with its outcome, newest first (`E`, filtered to the actions)
            await pilot.press("E", *"action")
            await settle(pilot, app)
            log = app.screen.query_one("#event-log", DataTable)
            rows = [(str(log.get_row_at(i)[1]), str(log.get_row_at(i)[3])) for i in range(log.row_count)]
            assert [r[0] for r in rows] == ["qwen3-next-80b", "qwen3-30b-a3b"], rows
            assert rows[0][1] == "rollover ok" and rows[1][1] == "restart ok"
        entries = audit.entries(tmp_path / "audit.sqlite3")
        assert [(e.action, e.target, e.outcome) for e in entries] == [
            ("rollover", "qwen3-next-80b", "ok"),
            ("restart", "qwen3-30b-a3b", "ok"),
        ]
        again = PoolApp(parse_config(pool.config_toml()), theme_state=tmp_path / "ui.json")  # the next launch
        again.audit_path = tmp_path / "audit.sqlite3"
        async with again.run_test(size=(160, 45)) as pilot:
            track = again.state.engines["qwen3-next-80b"]
            for _ in range(40):
                if track.active_profile is not None:
                    break
                await pilot.pause(0.1)
            assert track.config.profile == "awq-4bit-tp4" and track.active_profile == "awq-4bit-tp4-long"
        assert pool.engines["qwen3-30b-a3b"].load is not None


async def test_r_polls_every_target_now(tmp_path: Path) -> None:
    async with demo_pool(13, None) as pool:
        config = parse_config(pool.config_toml().replace("poll_interval_s = 1.0", "poll_interval_s = 30.0"))
        app = PoolApp(config, theme_state=tmp_path / "ui.json")
        async with app.run_test(size=(160, 40)) as pilot:
            history = app.state.engines["qwen3-next-80b"].history
            for _ in range(100):  # the first poll of every loop, then they sleep for 30 s
                if len(history.times):
                    break
                await asyncio.sleep(0.1)
            await asyncio.sleep(1.0)
            assert len(history.times) == 1
            await pilot.press("r")
            for _ in range(50):
                if len(history.times) == 2:
                    break
                await asyncio.sleep(0.1)
            assert len(history.times) == 2  # polled again at once, not 30 s later
            assert not app.runtime.sleepers or all(not w.done() for w in app.runtime.sleepers)


async def test_escape_and_q_cancel_every_dialog_and_q_never_quits_from_one(tmp_path: Path) -> None:
    """The profile picker (P), and the same picker for an Ollama model (U, O), closed on neither Escape nor q;
    q quit the whole console from it. Escape and q now cancel it as its Cancel button does, and the yes/no
    confirmation (R) alike, back on the overview with no action started; q there still quits."""
    from poolconsole.ui.screens.action import ConfirmAction, ProfilePicker

    app = static_app(tmp_path)
    async with app.run_test(size=(160, 40)) as pilot:
        await feed(app)
        await settle(pilot, app)
        grid = app.screen.query_one("#pool", PoolGrid)
        grid.move_cursor(row=table_rows(app).index("engine:qwen3-next-80b"))
        for opener, dialog in (("P", ProfilePicker), ("R", ConfirmAction)):
            for closer in ("escape", "q"):
                await pilot.press(opener)
                await pilot.pause()
                assert isinstance(app.screen, dialog), (opener, app.screen)
                await pilot.press(closer)
                await pilot.pause()
                assert app.is_running, f"{closer} in the {dialog.__name__} quit the console"
                assert isinstance(app.screen, OverviewScreen), (opener, closer, app.screen)
        await pilot.press("q")
        await pilot.pause()
        assert not app.is_running


async def test_a_keys_table_check_config_refuses_is_said_on_screen_for_a_minute(tmp_path: Path) -> None:
    """The console starts on a [keys] table with an unknown id and a key given twice (an incident is no time
    to refuse a console over its keys), and says each problem as check-config does, long enough to be read."""
    text = (uipool.ROOT / "hosts.toml").read_text() + '\n[keys]\nfilter = "f"\nsmoke = "f"\nnosuch = "z"\n'
    app = PoolApp(parse_config(text), live=False, clock=uipool.clock, theme_state=tmp_path / "ui.json")
    async with app.run_test(size=(160, 40)) as pilot:
        await pilot.pause()
        said = {n.message: n for n in app._notifications}
        assert {m.split(" (")[0] for m in said} >= {"keys: 'f' is the key of both filter and smoke"}
        assert any(m.startswith("keys.nosuch: no action has this id") for m in said), list(said)
        assert all(n.severity == "error" and n.timeout >= 60 for n in said.values())
        assert app.is_running


async def test_the_audit_screen_shows_the_highlighted_entry_whole_with_why_it_failed(tmp_path: Path) -> None:
    """The table had no room for an outcome's detail (why a restart failed: `poolconsole audit` said it, the
    screen did not) and cut each command at 60 characters with no "…". Under it, the highlighted entry now
    reads as the CLI prints it; the table's long cells end in "…", the outcome before them."""
    from poolconsole.ops import audit

    app = static_app(tmp_path)
    app.audit_path = tmp_path / "audit.sqlite3"
    write = "umask 077 && head -c 267 > /srv/pool/gemma3-27b-nvfp4.env.poolconsole-new && mv -f x y"
    why = "SSH: connection refused by 127.0.0.1:41499 (is sshd running on that port?)"
    audit.record(app.audit_path, "restart", "qwen", ["docker restart qwen"], "failed", why, 0.0)
    audit.record(app.audit_path, "rollover", "gemma", [write, "docker restart gemma"], "ok", "serving", 9.0, "a", "b")
    async with app.run_test(size=(120, 30)) as pilot:
        await open_audit(pilot, app)
        await pilot.pause()
        shown = str(app.screen.query_one("#audit-entry").render())
        assert shown == audit.entries(app.audit_path)[0].text()  # the newest first, as `poolconsole audit` prints
        assert f"    $ {write}" in shown.splitlines()
        table = app.screen.query_one("#audit", DataTable)
        cell = str(table.get_row_at(0)[-1])  # cut to the width with "…" (it was cut mid-word, no mark)
        assert cell.endswith("…") and f"{write} ; docker restart gemma".startswith(cell[:-1]), cell
        assert [str(c) for c in table.get_row_at(0)[2:5]] == ["rollover", "gemma", "ok"]  # the outcome early
        await pilot.press("down")
        await pilot.pause()
        shown = str(app.screen.query_one("#audit-entry").render())
        assert shown.splitlines()[0].endswith(f" restart qwen: failed (0.0 s) {why}")


async def test_the_cursor_starts_on_the_first_engine_so_enter_opens_its_detail(tmp_path: Path) -> None:
    """Grouped by host, the first row is a host's line: the cursor started there and the first Enter folded
    the group where the footer said Detail. It starts on the first engine, the host's line still in view."""
    app = static_app(tmp_path)
    async with app.run_test(size=(160, 40)) as pilot:
        await feed(app)
        await settle(pilot, app)
        grid = app.screen.query_one("#pool", PoolGrid)
        assert grid.order[0].startswith("host:") and grid.cursor_key == grid.order[1]
        assert grid.cursor_key is not None and grid.cursor_key.startswith("engine:") and grid.scroll_y == 0
        await pilot.press("enter")
        await settle(pilot, app)
        assert isinstance(app.screen, DetailScreen)


async def test_the_status_line_puts_read_only_and_the_alerts_first_and_ends_in_an_ellipsis(tmp_path: Path) -> None:
    """At 120 columns the problems-only words pushed "active alerts" (and READ-ONLY, last) off the line,
    cut with no "…". What matters most now comes first, and a cut line ends in "…"."""
    app = static_app(tmp_path, read_only=True)
    async with app.run_test(size=(100, 40)) as pilot:
        await feed(app)
        await settle(pilot, app)
        await pilot.press("p")
        await settle(pilot, app)
        line = app.screen.query_one("#status-line")
        drawn = line.render_lines(Region(0, 0, line.region.width, 1))[0].text.rstrip()
        assert drawn.startswith(" 0 of 8 engines  READ-ONLY  active alerts: 0  problems only: nothing"), drawn
        assert drawn.endswith("…") and len(drawn) <= 100, drawn


async def test_the_gateway_routes_fit_a_narrow_screen_and_take_the_arrow_keys(tmp_path: Path) -> None:
    """At 80 columns the Engine state column was cut to one letter ("o", "d": down or degraded?) with no
    "…", and the arrow keys did nothing until Tab. Long model names are cut with "…" instead, the states
    stay whole, and the routes have the focus (the test pool's names are short: 64 columns cut them)."""
    from textual.widgets import DataTable

    app = static_app(tmp_path)
    async with app.run_test(size=(64, 24)) as pilot:
        await feed(app)
        await settle(pilot, app)
        await pilot.press("g")
        await settle(pilot, app)
        assert isinstance(app.screen, GatewayScreen)
        table = app.screen.query_one("#routes", DataTable)
        assert table.has_focus and table.row_count >= 2
        drawn = [s.text.rstrip() for s in table.render_lines(Region(0, 0, table.size.width, table.row_count + 1))]
        assert drawn[0].split()[-2:] == ["Engine", "state"], drawn[0]
        states = [str(table.get_row_at(i)[4]) for i in range(table.row_count)]
        assert all(line.endswith(f" {state}") for line, state in zip(drawn[1:], states, strict=True)), drawn
        assert any("…" in line for line in drawn[1:]), drawn  # what had to give was cut, and says so
        await pilot.press("down")
        await pilot.pause()
        assert table.cursor_row == 1


async def test_the_pool_smoke_test_asks_first(tmp_path: Path) -> None:
    """M had started minutes of real requests to every model at the keypress: it asks first, saying what it
    sends and to which engines; n leaves the pool alone."""
    from poolconsole.ui.screens.action import ConfirmAction
    from poolconsole.ui.screens.smoke import SmokeScreen

    app = static_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await feed(app)
        await settle(pilot, app)
        await pilot.press("M")
        await pilot.pause()
        dialog = app.screen
        assert isinstance(dialog, ConfirmAction) and dialog.title_text == "Smoke-test the whole pool?"
        said = dialog.lines.plain
        assert "engines: " in said and "qwen3-next-80b" in said and "spend tokens" in said
        await pilot.press("n")
        await pilot.pause()
        assert isinstance(app.screen, OverviewScreen) and not any(isinstance(s, SmokeScreen) for s in app.screen_stack)
        assert not [w for w in app.workers if w.group == "smoke"]
