"""A silence created in Alertmanager (`POST {url}/api/v2/silences`): matchers on the alert's labels, startsAt
now, endsAt after the chosen time, createdBy the operator, a comment. One step that returns data: the
silence's id, or what went wrong in words (never the token)."""

from __future__ import annotations

import os

import httpx

from poolconsole.config.models import Notify
from poolconsole.model.notify import Silence, bearer_target, rfc3339


def silence_body(silence: Silence) -> dict[str, object]:
    """Alertmanager's PostableSilence."""
    return {
        "matchers": [
            {"name": k, "value": v, "isRegex": False, "isEqual": True} for k, v in sorted(silence.matchers.items())
        ],
        "startsAt": rfc3339(silence.starts_at),
        "endsAt": rfc3339(silence.ends_at),
        "createdBy": silence.created_by,
        "comment": silence.comment,
    }


def silences_url(notify: Notify) -> str:
    return notify.url.rstrip("/") + "/api/v2/silences"


async def create_alertmanager_silence(notify: Notify, silence: Silence) -> tuple[str | None, str | None]:
    """(Alertmanager's silenceID, None) once created, else (None, what went wrong in words)."""
    headers = {"Content-Type": "application/json"}
    if notify.token_env:
        token = os.environ.get(notify.token_env)
        if not token:
            return None, f"the environment variable {notify.token_env} (its token_env) is not set"
        headers["Authorization"] = f"Bearer {token}"
    url = bearer_target(silences_url(notify), headers.get("Authorization"))
    try:
        async with httpx.AsyncClient(timeout=notify.timeout_s) as client:
            response = await client.post(url, json=silence_body(silence), headers=headers)
    except httpx.TimeoutException:
        return None, f"no answer within {notify.timeout_s:g} s"
    except httpx.HTTPError as exc:
        return None, f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}".rstrip(": ")
    if response.status_code != 200:
        return None, f"HTTP {response.status_code}: {response.text.strip()[:300]}"
    try:
        found = response.json().get("silenceID")
    except ValueError:
        found = None
    return (str(found), None) if found else (None, "Alertmanager answered without a silenceID")
