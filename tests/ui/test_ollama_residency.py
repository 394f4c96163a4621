"""Ollama residency in the console on the demo pool: the detail screen lists each resident model (size,
share in VRAM, context, expiry) with the server's keep-alive and parallelism and the client's override;
`U` unloads a model (picked, confirmed with the exact request, audited) and it leaves /api/ps; the actions
are hidden and refused read-only."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
from textual.widgets import OptionList

from poolconsole.config import parse_config
from poolconsole.ops import audit
from poolconsole.ui import registry
from poolconsole.ui.app import PoolApp
from poolconsole.ui.screens.action import ActionScreen, ConfirmAction, ProfilePicker
from poolconsole.ui.screens.detail import DetailScreen, engine_text
from poolconsole.ui.screens.overview import OverviewScreen
from tests.ui.test_console import action_outcome, demo_pool, select_row

ENGINE = "embeddings"
NOMIC = "nomic-embed-text:latest"


async def test_residency_shown_and_unload_from_the_console(tmp_path: Path) -> None:
    async with demo_pool(31, tmp_path / "keys") as pool:
        app = PoolApp(parse_config(pool.config_toml()), theme_state=tmp_path / "ui.json")
        app.audit_path = tmp_path / "audit.sqlite3"
        async with app.run_test(size=(160, 45)) as pilot:
            await select_row(pilot, app, f"engine:{ENGINE}")
            track = app.state.engines[ENGINE]
            for _ in range(40):
                if track.ollama_server is not None and track.residency is not None:
                    break
                await asyncio.sleep(0.25)
            shown = engine_text(track).plain
            assert "OLLAMA_KEEP_ALIVE 5m00s  OLLAMA_NUM_PARALLEL 4" in shown
            assert f"{NOMIC}  0.50 GiB  100% in VRAM  ctx 8192  expires in " in shown
            assert "keep-alive override: kept forever: a client sent keep_alive -1" in shown
            # Ollama has no metrics: no counter to see a restart in, no draft tokens to call "off"
            assert "counter resets (restarts) seen: n/a (no counters)" in shown
            assert track.view is not None
            assert track.view.unknown["spec_decode_acceptance_rate"] == track.view.unknown["requests_running"]
            assert "no metrics endpoint" in track.view.unknown["spec_decode_acceptance_rate"]

            await pilot.press("enter")  # from the engine's detail, which shows the residency
            await pilot.pause()
            assert isinstance(app.screen, DetailScreen)
            await pilot.press("O")  # the preload picker marks what is resident already, in the detail's words
            await pilot.pause()
            assert isinstance(app.screen, ProfilePicker) and NOMIC in app.screen.profiles
            shown_options = [str(o.prompt) for o in app.screen.query_one(OptionList).options]
            resident = {m.name for m in track.residency.models}
            assert any(o.startswith(f"{NOMIC}  (resident, expires in ") for o in shown_options)
            assert "mxbai-embed-large:latest  (resident, never expires)" in shown_options  # its keep_alive -1
            on_disk_only = [o for o in shown_options if o.split()[0] not in resident]
            assert on_disk_only and all("resident" not in o for o in on_disk_only)
            app.screen.dismiss(None)
            await pilot.pause()
            await pilot.press("U")
            await pilot.pause()
            assert isinstance(app.screen, ProfilePicker) and NOMIC in app.screen.profiles
            app.screen.dismiss(NOMIC)
            await pilot.pause()
            assert isinstance(app.screen, ConfirmAction)
            assert f'/api/generate {{"model": "{NOMIC}", "keep_alive": 0, "stream": false}}' in app.screen.lines.plain
            await pilot.press("y")
            await pilot.pause()
            assert isinstance(app.screen, ActionScreen)
            assert await action_outcome(app, 80) == "ok"
            async with httpx.AsyncClient(trust_env=False) as client:
                listed = (await client.get(pool.engines[ENGINE].url + "/api/ps")).json()["models"]
            assert NOMIC not in {m["name"] for m in listed}
            for _ in range(20):  # the next poll shows it gone, and says it left before its expiry
                if track.residency is not None and NOMIC not in {m.name for m in track.residency.models}:
                    break
                await asyncio.sleep(0.25)
            assert f"{NOMIC} unloaded" in engine_text(track).plain
            assert "ago, by this console (U, in the audit log)" in engine_text(track).plain  # not "a client sent"
            await pilot.press("escape")  # the action's screen closes onto the detail it was started from
            await pilot.pause()
            assert isinstance(app.screen, DetailScreen)
            await pilot.press("escape")
            await pilot.pause()
            assert isinstance(app.screen, OverviewScreen)
        (entry,) = audit.entries(tmp_path / "audit.sqlite3")
        assert (entry.action, entry.target, entry.outcome) == ("ollama unload", ENGINE, "ok")


def test_residency_actions_are_mutating_and_hidden_read_only() -> None:
    ids = {a.id for a in registry.visible(read_only=True)}
    assert "ollama_unload" not in ids and "ollama_preload" not in ids
    assert {"ollama_unload", "ollama_preload"} <= {a.id for a in registry.visible(read_only=False)}
    assert {"ollama_unload", "ollama_preload"} <= registry.MUTATING
