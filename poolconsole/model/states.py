"""A state word as stored in the history or shown on screen, ranked by its state's severity: the one
ranking of engine and host states (EngineState.severity, HostState.severity)."""

from __future__ import annotations

from poolconsole.model.hosts import HostState
from poolconsole.model.snapshots import FAILING, EngineState


def severity_of(word: object) -> int:
    """0 ok, 1 degraded, 2 not answering; a word neither enum knows (or none) counts as not answering."""
    text = str(word)
    for states in (EngineState, HostState):
        if text in states.__members__.values():
            return states(text).severity
    return FAILING
