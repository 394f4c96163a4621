"""The console's first frames: the overview is pushed once Textual's start-up is done, so the first frame
it renders is shown (benchmarks/first_frame_bench.py measures the time to the first frame with data)."""

from __future__ import annotations

from pathlib import Path

from rich.console import RenderableType
from textual.screen import Screen

from poolconsole.ui.screens.overview import OverviewScreen
from tests.ui.test_console import feed, settle, static_app


async def test_no_frame_of_the_overview_is_rendered_and_thrown_away_during_start_up(tmp_path: Path) -> None:
    """Textual holds every repaint back until its start-up is over (App._batch_count): a screen pushed
    from on_mount was laid out and rendered inside it and that frame dropped, then rendered again with the
    first data (~13 ms of a 160x48 frame at 32 engines before the first frame with data)."""
    # Textual's private App._display and App._batch_count (Textual is pinned, 8.2.8): what the start-up
    # batch holds back is only visible there.
    app = static_app(tmp_path)
    held: list[int] = []  # for each overview frame rendered: how many batches held repaints back then
    show = app._display

    def display(screen: Screen[object], renderable: RenderableType | None) -> None:
        if isinstance(screen, OverviewScreen) and renderable is not None:
            held.append(app._batch_count)
        show(screen, renderable)

    app._display = display  # type: ignore[method-assign]
    async with app.run_test(size=(160, 48)) as pilot:
        await feed(app)
        await settle(pilot, app)
        assert isinstance(app.screen, OverviewScreen)
    assert held, "the overview rendered no frame"
    assert held == [0] * len(held), f"frames rendered while Textual held repaints back: {held}"
