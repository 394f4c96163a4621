"""The key footer shows whole keys only: at 80 columns Textual's Footer cut the last one mid-word ("m Smok"
against the palette's key). The keys that do not fit are left out, in order, and come back when the
terminal widens."""

from __future__ import annotations

from pathlib import Path

from poolconsole.ui.footer import KeysFooter
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
        assert [k for k in keys if k not in palette] == shown + hidden  # in order: the first ones shown
        edge = palette[0].region.x
        for key in shown:  # each whole, left of the palette's key
            assert key.region.width == key.render().cell_len + key.styles.gutter.width  # type: ignore[union-attr]
            assert key.region.right <= edge, (key.region, edge)
        assert not hidden[0].region  # nothing of it drawn ("m Smok" was)

        await pilot.resize_terminal(200, 40)
        await pilot.pause()
        await pilot.pause(0.1)
        assert all(k.display for k in footer.query_children("FooterKey"))  # wide: every key again
