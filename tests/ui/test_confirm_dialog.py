"""The rollover's confirmation at 80x24, as an operator on a laptop terminal sees it: the question and the
buttons stay on screen however long the fit report is (it scrolls between them), and the report wraps
between its fields, so a number is never split from its unit."""

from __future__ import annotations

import asyncio
from pathlib import Path

from textual.containers import VerticalScroll
from textual.widgets import Button, Static

from poolconsole.ui.screens.action import ConfirmAction, ProfilePicker
from tests.ui.test_console import demo_app, demo_pool, select_row


async def test_the_rollover_question_and_its_buttons_stay_on_an_80x24_screen(tmp_path: Path) -> None:
    async with demo_pool(12, tmp_path / "keys") as pool:
        app = demo_app(pool, tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            await select_row(pilot, app, "engine:gemma3-27b-nvfp4")  # SGLang: it gives its own KV capacity
            await pilot.press("P")
            await pilot.pause()
            assert isinstance(app.screen, ProfilePicker)
            app.screen.dismiss(app.screen.active)
            for _ in range(40):
                if isinstance(app.screen, ConfirmAction):
                    break
                await asyncio.sleep(0.1)
            await pilot.pause()
            dialog = app.screen
            assert isinstance(dialog, ConfirmAction)
            screen = dialog.region
            for widget in (dialog.query_one("#confirm-title", Static), dialog.query_one("#yes", Button)):
                assert screen.contains_region(widget.region), widget  # on screen, not cut off above or below
            report = dialog.query_one("#commands", Static)
            assert report.region.height > dialog.query_one("#commands-box").region.height  # long here: it scrolls
            width = report.content_region.width
            drawn = [
                "".join(segment.text for segment in line).rstrip()
                for line in app.console.render_lines(dialog.lines, app.console.options.update_width(width))
            ]
            said = dialog.lines.plain
            # what the engine serves now, from its last poll, and that the rollover drains it first
            [now] = [line for line in said.splitlines() if line.startswith(("now: ", "requests in flight: "))]
            gemma = next(e for e in app.config.engines if e.name == "gemma3-27b-nvfp4")
            assert gemma.control is not None
            drained = (  # the demo's drain_timeout_s is 0: its rollovers switch at once, and say so
                "(drain_timeout_s) for them to finish, then switches"
                if gemma.control.drain_timeout_s > 0
                else "the restart drops them (their clients get errors)"
            )
            assert now.endswith((drained, "(no request running or waiting)")), now
            # the demo's gateway routes the model to this engine alone: the switch leaves its callers without one
            assert "gateway gateway routes gemma-3-27b-it: no other engine in the pool serves it" in said, said
            assert "the engine's own KV cache holds 120,000 tokens" in said and "KV n/a" not in said
            rows = [line for line in dialog.lines.lines if isinstance(line, tuple)]
            fields = [str(f) for row in rows for f in row if len(f) <= width]
            assert fields and all(any(f in row for row in drawn) for f in fields), drawn  # each field on one row
            # what is below is said, and the keys reach it (the arrows had moved the buttons' focus only)
            box = dialog.query_one("#commands-box", VerticalScroll)
            more = dialog.query_one("#commands-more", Static)
            await pilot.pause()
            below = round(box.max_scroll_y)
            assert below > 0 and str(more.render()) == f"{below} more lines below: ↓ / PgDn / End"
            await pilot.press("end")
            await pilot.pause()
            assert box.scroll_y == box.max_scroll_y and str(more.render()) == ""
            await pilot.press("up")
            await pilot.pause()
            assert box.scroll_y == box.max_scroll_y - 1 and str(more.render()).startswith("1 more line below")
            assert isinstance(app.screen, ConfirmAction)  # scrolling answered nothing
