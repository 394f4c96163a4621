"""What the console does about a leak of Textual's own: each with the upstream issue and the test that shows
it (tests/ui/test_leaks.py)."""

from __future__ import annotations

from textual._styles_cache import StylesCache

RELEASE_EVERY_S = 60.0


def release() -> None:
    """Let go of the StylesCaches Textual pins. Textual 8.2.8's `StylesCache.get_inner_outer` is an
    `lru_cache(1024)` on an instance method (Textualize/textual#6665, open), so it keeps every widget's
    StylesCache that ever drew, and with it the strips of that widget's last frame, until 1,024 are held:
    every toast the console showed stayed (a restart, a problem and each alert notice is one). The cache
    holds two Style objects a key, made again at the next frame. The console clears it every RELEASE_EVERY_S.
    """
    clear = getattr(StylesCache.get_inner_outer, "cache_clear", None)
    if clear is not None:  # a Textual other than the pinned one, where it is no lru_cache: nothing to let go
        clear()
