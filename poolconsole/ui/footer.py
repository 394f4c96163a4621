"""The key footer: Textual's Footer, recomposed only when the keys it shows change.

Textual's Footer recomposes, after the next refresh, every time the screen's bindings are said to have
changed: each focus change, each screen stack update, the terminal reporting focus. Each recompose mounts
a FooterKey per key and styles it (about 2-3 ms a key here). At launch that was three to five recomposes of
a dozen keys before the first frame with data (about 0.1 s of CPU), and one more for every focus move
afterwards. This one queues at most one recompose at a time and skips it when the keys shown (key, label,
enabled, tooltip) are those already composed.

It also shows only the keys that fit whole before the palette's key (`fit_keys`): on an 80-column terminal
Textual's Footer cut the last one mid-word ("m Smok"). Help, back and quit are kept first; the keys left out
are in `?` (help) and the palette.
"""

from __future__ import annotations

from rich.text import Text
from textual import events
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Footer

from poolconsole.ui import registry

Shown = tuple[tuple[str, str, bool, str], ...]

FIRST = frozenset(a.action for a in registry.ACTIONS if a.id in registry.FOOTER_KEPT)
"""The action strings of the keys the footer keeps first."""


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
        self.fit_keys()

    def on_resize(self, event: events.Resize) -> None:
        self.fit_keys()

    def on_mount(self) -> None:
        self.call_after_refresh(self.fit_keys)

    def fit_keys(self) -> None:
        """Show the keys that fit whole in the width the palette's key leaves: those of registry.FOOTER_KEPT
        first (help, back, quit), then the others in order while they fit; hide the rest. Shown in order."""
        keys = list(self.query_children("FooterKey"))  # Textual's own key widget (its module is private)
        palette = [k for k in keys if k.has_class("-command-palette")]
        room = self.size.width - sum(_width(k) for k in palette)
        others = [k for k in keys if k not in palette]
        first = [k for k in others if getattr(k, "action", None) in FIRST]
        shown: set[Widget] = set()
        for key in first + [k for k in others if k not in first]:
            width = _width(key)
            if 0 <= width <= room:
                shown.add(key)
                room -= width
            elif key not in first:
                room = -1  # the others only while they fit in order: none after the first that does not
        for key in others:
            key.display = key in shown


def _width(key: Widget) -> int:
    """The cells a key takes: its text (key and label, with their padding) and its own gutter (-1: unknown)."""
    text = key.render()
    return text.cell_len + key.styles.gutter.width if isinstance(text, Text) else -1
