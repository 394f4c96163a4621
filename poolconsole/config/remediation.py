"""hosts.toml's `[remediation]` and `[engines.remediation]`: what `poolconsole watch` may do by itself.
Split from config/models.py by size; config.models imports them back as the one schema module."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from poolconsole.config.strict import Strict


class EngineRemediation(Strict):
    """`[engines.remediation]`: this engine's own remediation policy, over `[remediation]`'s defaults (a key
    left out takes the default). Acted on only by `poolconsole watch`, and only with `[remediation]`
    enabled."""

    on_stalled: Literal["notify", "restart"] | None = None
    """When the stalled rule fires on this engine: notify only, or restart it (after `grace_s`)."""
    on_down: Literal["notify", "restart"] | None = None
    """When the down rule fires on this engine: notify only, or restart it (only with `[engines.control]`)."""
    on_crash_loop: Literal["notify", "rollback"] | None = None
    """When the restart_loop rule fires on this engine: notify only, or roll it back to the profile it ran
    before the last rollover the audit log promoted (with `[engines.control]` and its `profile_file`). It
    also lets a restart that did not bring the engine back climb to a rollback."""


class Remediation(Strict):
    """`[remediation]`: what `poolconsole watch` may do by itself when a rule fires on an engine (off by
    default). It notifies first, acts after `grace_s` if the condition still holds, through the same
    restart and rollover as an operator's (audited as automatic, with the rule), checks that the engine
    serves, and climbs one rung when it does not: restart, then roll back, then "gave up: needs a person".
    Never two engines of one host at once, never past the budget (the next case is a notification that it
    is spent). The console never acts on it."""

    enabled: bool = False
    """Act at all; without it the watcher only notifies."""
    max_actions_per_hour: Annotated[int, Field(ge=1, le=100)] = 3
    """The budget: automatic actions on one engine in any hour (the watcher's restarts keep it)."""
    cooldown_s: Annotated[float, Field(ge=0, le=86400)] = 300.0
    """Seconds between two automatic actions on one engine (a climb to the next rung waits for it too)."""
    grace_s: Annotated[float, Field(ge=0, le=86400)] = 60.0
    """Seconds between the notification that it will act and the action; it acts only if the condition
    still holds then."""
    on_stalled: Literal["notify", "restart"] = "notify"
    """Every engine's default when the stalled rule fires: notify only, or restart."""
    on_down: Literal["notify", "restart"] = "notify"
    """Every engine's default when the down rule fires: notify only, or restart (where the engine has
    `[engines.control]`)."""
    on_crash_loop: Literal["notify", "rollback"] = "notify"
    """Every engine's default when the restart_loop rule fires: notify only, or roll back to the profile it
    ran before the last rollover the audit log promoted."""
