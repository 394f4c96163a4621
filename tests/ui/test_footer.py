"""The key footer shows whole keys only: at 80 columns Textual's Footer cut the last one mid-word ("m Smok"
against the palette's key). The keys that do not fit are left out, help, back and quit kept first (the
overview had lost "q Quit", the detail "q Back"), and come back when the terminal widens."""

from __future__ import annotations

from pathlib import Path

from poolconsole.ui.footer import FIRST, KeysFooter
from tests.ui.test_every_screen import app_for


async def test_the_footer_shows_only_keys_that_fit_whole(tmp_path: Path) -> None:
    app = app_for(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.pause(0.1)
        footer = app.screen.query_one(KeysFooter)
        keys = list(footer.query_children("FooterKey"))
        palette = [k for k in keys if k.has_class("-command-palette")]
        shown = [k for k in keys if k.display and k not in palette]
        hidden = [k for k in keys if not k.display]
        assert palette and shown and hidden  # 80 columns hold some of the overview's keys, not all
        kept = [k for k in shown if getattr(k, "action", None) in FIRST]
        assert {getattr(k, "action", None) for k in kept} == {"app.help", "app.quit"}  # help and quit kept
        rest = [k for k in keys if k not in palette and k not in kept]
        assert rest[: len(shown) - len(kept)] == [k for k in shown if k not in kept]  # then the others in order
        edge = palette[0].region.x
        for key in shown:  # each whole, left of the palette's key
            assert key.region.width == key.render().cell_len + key.styles.gutter.width  # type: ignore[union-attr]
            assert key.region.right <= edge, (key.region, edge)
        assert not hidden[0].region  # nothing of it drawn ("m Smok" was)

        app.open_detail("engine:qwen3-next-80b")  # a sub-screen keeps its way back
        await pilot.pause()
        await pilot.pause(0.1)
        there = app.screen.query_one(KeysFooter)
        actions = [getattr(k, "action", None) for k in there.query_children("FooterKey") if k.display]
        assert "app.close_screen" in actions and "app.help" in actions, actions
        await pilot.press("escape")
        await pilot.pause()

        await pilot.resize_terminal(200, 40)
        await pilot.pause()
        await pilot.pause(0.1)
        assert all(k.display for k in footer.query_children("FooterKey"))  # wide: every key again
