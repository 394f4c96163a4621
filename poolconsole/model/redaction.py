"""Secrets out of text that is shown, logged or stored: the audit log, action progress, engine logs."""

from __future__ import annotations

import re

SECRET_ASSIGNMENT = re.compile(
    r"(?<![A-Za-z0-9_])([A-Za-z0-9_]*(?:KEY|TOKEN|SECRET|PASSWORD)[A-Za-z0-9_]*)=('[^']*'|\"[^\"]*\"|\S+)", re.I
)
SECRET_FLAG = re.compile(r"(--?[A-Za-z0-9-]*(?:key|token|secret|password)[A-Za-z0-9-]*)([ =])('[^']*'|\S+)", re.I)
BEARER = re.compile(r"(Bearer\s+)\S+", re.I)


def redact(text: str, values: tuple[str, ...] = ()) -> str:
    """For the audit log and progress: the given secret values, the values of secret-looking assignments
    (`HF_TOKEN=...`, anywhere in a line), secret-looking flags (`--api-key X`) and Bearer tokens never land
    on disk or screen."""
    for value in sorted(values, key=len, reverse=True):
        if len(value) >= 4:
            text = text.replace(value, "<redacted>")
    text = SECRET_ASSIGNMENT.sub(r"\1=<redacted>", text)
    text = SECRET_FLAG.sub(r"\1\2<redacted>", text)
    return BEARER.sub(r"\1<redacted>", text)
