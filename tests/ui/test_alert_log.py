"""The alert log (`a`): a long message (a log finding's diagnosis and its change) is cut by the table's
column; the highlighted alert is shown whole under the table, and follows the cursor."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import DataTable, Static

from poolconsole.model.failure_modes import MODES, diagnose
from poolconsole.ui.screens.others import AlertsScreen
from tests.helpers import uipool
from tests.ui.test_every_screen import app_for


async def test_the_highlighted_alert_is_shown_whole(tmp_path: Path) -> None:
    app = app_for(tmp_path)
    example = next(m.example for m in MODES if m.id == "cuda_out_of_memory")
    (oom,) = app.alerts.log_findings("qwen3-next-80b", diagnose([example]), uipool.T0, "qwen3-next-80b went down")
    app.alerts._set("gemma3-27b-nvfp4", "queue", True, "6 requests waiting", uipool.T0 + 5, "")
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("a")
        await pilot.pause()
        assert isinstance(app.screen, AlertsScreen)
        shown = app.screen.query_one("#alert-message", Static)
        assert str(shown.render()).endswith("gemma3-27b-nvfp4  fired: 6 requests waiting  (rule queue)")  # newest first
        table = app.screen.query_one("#alert-log", DataTable)
        await pilot.press("down")
        await pilot.pause()
        assert table.cursor_row == 1
        text = " ".join(str(shown.render()).split())
        assert oom.message.split()[-1] in text and " ".join(oom.message.split()) in text  # the change at its end
        assert len(oom.message) > 100  # a message the 100-column table cannot show in its cell
        # and its cell ends in "…" where the column cuts it, not mid-word with no mark
        cell = str(table.get_row_at(1)[-1])
        assert cell.endswith("…") and len(cell) < len(oom.message), cell
