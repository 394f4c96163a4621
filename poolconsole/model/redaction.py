"""Secrets out of text that is shown, logged or stored: the audit log, action progress, engine logs."""

from __future__ import annotations

from poolconsole.config.secret_text import AUTHORIZATION, BEARER, SECRET_ASSIGNMENT, SECRET_FIELD, SECRET_FLAG


def redact(text: str, values: tuple[str, ...] = ()) -> str:
    """For the audit log and progress: the given secret values, the values of secret-looking assignments
    (`HF_TOKEN=...`, anywhere in a line), secret-looking flags (`--api-key X`), Bearer tokens, an
    `Authorization:` header's credentials (`Basic ...`) and secret-named fields (`token: abc`,
    `"api_key": "..."`) never land on disk or screen. Linear in the text (config.secret_text)."""
    for value in sorted(values, key=len, reverse=True):
        if len(value) >= 4:
            text = text.replace(value, "<redacted>")
    text = SECRET_ASSIGNMENT.sub(r"\1=<redacted>", text)
    text = SECRET_FLAG.sub(r"\1\2<redacted>", text)
    text = BEARER.sub(r"\1<redacted>", text)
    text = AUTHORIZATION.sub(r"\1<redacted>", text)
    return SECRET_FIELD.sub(r"\1<redacted>", text)
