"""The key footer: Textual's Footer, recomposed only when the keys it shows change.

Textual's Footer recomposes, after the next refresh, every time the screen's bindings are said to have
changed: each focus change, each screen stack update, the terminal reporting focus. Each recompose mounts
a FooterKey per key and styles it (about 2-3 ms a key here). At launch that was three to five recomposes of
a dozen keys before the first frame with data (about 0.1 s of CPU), and one more for every focus move
afterwards. This one queues at most one recompose at a time and skips it when the keys shown (key, label,
enabled, tooltip) are those already composed.
"""

from __future__ import annotations

from textual.screen import Screen
from textual.widgets import Footer

Shown = tuple[tuple[str, str, bool, str], ...]


class KeysFooter(Footer):
    def __init__(self) -> None:
        super().__init__()
        self._composed: Shown | None = None
        self._queued = False

    def shown(self) -> Shown:
        """What compose would show now: the screen's active bindings that are shown, in order."""
        return tuple(
            (binding.key, binding.description, enabled, tooltip)
            for (_, binding, enabled, tooltip) in self.screen.active_bindings.values()
            if binding.show
        )

    def bindings_changed(self, screen: Screen[object]) -> None:
        self._bindings_ready = True
        if not screen.app.app_focus or not self.is_attached or screen is not self.screen or self._queued:
            return
        self._queued = True
        self.call_after_refresh(self._recompose_if_changed)

    async def _recompose_if_changed(self) -> None:
        self._queued = False
        if not self.is_attached:
            return
        shown = self.shown()
        if shown == self._composed:
            return
        self._composed = shown
        await self.recompose()
