"""An engine's API key as the header every client sends (polls, health checks, smoke tests, audits)."""

from __future__ import annotations

import os

from poolconsole.config.models import Engine


def auth_headers(engine: Engine) -> dict[str, str]:
    """The engine's Bearer key, read from its api_key_env when a request is made (none when unset)."""
    key = os.environ.get(engine.api_key_env) if engine.api_key_env else None
    return {"Authorization": f"Bearer {key}"} if key else {}
