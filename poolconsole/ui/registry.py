"""The console's side of the one action registry (the data is model.actions, which `check-config` reads
without Textual): the key bindings, and how a screen is named in `Action.screens` and `Action.target`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from poolconsole.model.actions import (
    ACTIONS,
    APP,
    ENGINE,
    FOOTER_KEPT,
    LIVE_ONLY,
    LOG,
    MUTATING,
    OVERVIEW,
    REPLAY,
    RUNNER,
    SCREENS_OF,
    SUBSCREENS,
    TARGET_OF,
    Action,
    allowed,
    applies,
    key_label,
    keymap_problems,
    method,
    on_screen,
    refusal,
    visible,
)

if TYPE_CHECKING:
    from textual.binding import Binding

__all__ = [
    "ACTIONS",
    "APP",
    "ENGINE",
    "FOOTER_FIRST",
    "FOOTER_KEPT",
    "LIVE_ONLY",
    "LOG",
    "MUTATING",
    "OVERVIEW",
    "REPLAY",
    "RUNNER",
    "SCREENS_OF",
    "SUBSCREENS",
    "TARGET_OF",
    "Action",
    "allowed",
    "applies",
    "bindings",
    "key_label",
    "keymap_problems",
    "method",
    "on_screen",
    "refusal",
    "screen_name",
    "visible",
]

FOOTER_FIRST = "help"
"""The footer shows Help first: at 80 columns it is cut after about seven keys, and a new operator finds the
rest from there (the help screen and the palette keep the registry's order)."""


def bindings() -> list[Binding]:
    """Every action's key binding; --read-only disables the mutating ones through App.check_action."""
    from textual.binding import Binding  # imported here: `check-config` reads the registry without Textual

    ordered = sorted(ACTIONS, key=lambda a: a.id != FOOTER_FIRST)  # stable: the rest keep their order
    return [
        Binding(a.key, a.action, a.footer or a.title, show=a.show, id=a.id, priority=a.id in ("quit", "close"))
        for a in ordered
    ]


def screen_name(screen: object) -> str:
    """How `screens` names a screen: its class's name less "Screen", lower case (OverviewScreen: overview)."""
    return type(screen).__name__.removesuffix("Screen").lower()
