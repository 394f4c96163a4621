"""Textual's own leaks the console works around (ui.leaks): each shown to happen, then to be let go."""

from __future__ import annotations

import asyncio
import gc
import weakref
from pathlib import Path

import pytest
from textual.app import App, ComposeResult
from textual.containers import Vertical
from textual.widgets import Label

from poolconsole.config import parse_config
from poolconsole.ui import leaks
from poolconsole.ui.app import PoolApp


class Cards(App[None]):
    def compose(self) -> ComposeResult:
        yield Vertical(id="cards")


async def test_the_strips_of_a_widget_gone_are_let_go() -> None:
    """Textualize/textual#6665: a removed widget's StylesCache (the strips of its last frame) stays in an
    lru_cache on an instance method until 1,024 are held; each toast the console shows is such a widget.
    leaks.release lets them go. When the first assertion fails, Textual fixed it and ui.leaks can go."""
    app = Cards()
    async with app.run_test(size=(80, 24)) as pilot:
        leaks.release()
        cards = app.query_one("#cards")
        await cards.mount(*(Label(f"eng{i}: restarted (exit 137)") for i in range(5)))
        await pilot.pause()
        widgets = [weakref.ref(card) for card in cards.children]
        caches = [weakref.ref(card._styles_cache) for card in cards.children]
        await cards.remove_children()
        await cards.mount(Label("eng9: restarted (exit 0)"))
        await pilot.pause()
        gc.collect()
        assert [ref() for ref in widgets] == [None] * 5
        assert sum(ref() is not None for ref in caches) == 5, "Textual no longer pins them: ui.leaks can go"
        leaks.release()
        gc.collect()
        assert [ref() for ref in caches] == [None] * 5


async def test_the_console_lets_them_go_every_so_often(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    released = asyncio.Event()
    monkeypatch.setattr(leaks, "RELEASE_EVERY_S", 0.05)
    monkeypatch.setattr(leaks, "release", released.set)
    config = parse_config('[[engines]]\nname = "e"\nkind = "vllm"\nurl = "http://127.0.0.1:9"\n')
    app = PoolApp(config, live=False, theme_state=tmp_path / "ui.json")
    async with app.run_test(size=(120, 30)):
        await asyncio.wait_for(released.wait(), timeout=30)
