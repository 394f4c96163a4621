"""The console's screens, each in its own module with a sibling .tcss."""

from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class RefreshingView(Protocol):
    """A screen drawn from the model: the app calls `refresh_view` once a tick while it is on top, once it is
    mounted (`ready`, set as it mounts: before that it draws itself when it mounts)."""

    ready: bool

    def refresh_view(self) -> None: ...
