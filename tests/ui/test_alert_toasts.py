"""An alert storm in the console: one toast per rule and tick, not one per target."""

from __future__ import annotations

from pathlib import Path

from poolconsole.config import parse_config
from poolconsole.runtime.live import Update
from poolconsole.ui.app import PoolApp
from tests.unit.test_notices import fired


async def test_the_console_toasts_a_burst_once(tmp_path: Path) -> None:
    config = parse_config('[[engines]]\nname = "e"\nkind = "vllm"\nurl = "http://127.0.0.1:9"\n')
    app = PoolApp(config, live=False, theme_state=tmp_path / "ui.json")
    async with app.run_test(size=(120, 30)) as pilot:
        app.clear_notifications()
        for i in range(32):
            app._heard(Update(f"eng{i}", "engine", (fired(f"eng{i}", "queue", "9 requests waiting"),)))
        app._redraw()
        await pilot.pause()
        messages = [n.message for n in app._notifications]
        assert messages == ["32 targets queueing: eng0, eng1, eng10 and 29 more"]
