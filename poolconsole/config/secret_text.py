"""What a secret looks like inside text: an assignment (`HF_TOKEN=...`), a flag (`--api-key X`), a Bearer
token. model.redaction scrubs these from what is shown, logged and stored; config.load refuses them written
into hosts.toml (a profile's args or an env value)."""

from __future__ import annotations

import re

SECRET_ASSIGNMENT = re.compile(
    r"(?<![A-Za-z0-9_])([A-Za-z0-9_]*(?:KEY|TOKEN|SECRET|PASSWORD)[A-Za-z0-9_]*)=('[^']*'|\"[^\"]*\"|\S+)", re.I
)
SECRET_FLAG = re.compile(r"(--?[A-Za-z0-9-]*(?:key|token|secret|password)[A-Za-z0-9-]*)([ =])('[^']*'|\S+)", re.I)
BEARER = re.compile(r"(Bearer\s+)\S+", re.I)
REFERENCE = re.compile(r"^['\"]?(\$\{?[A-Za-z_][A-Za-z0-9_]*\}?|<redacted>)['\"]?$")
"""A value that names a variable (`$HF_TOKEN`, `${HF_TOKEN}`) rather than holding a secret."""


def secret_in(text: str) -> str | None:
    """The first secret-looking flag or assignment in `text` whose value is written out (not `$VAR`), by its
    name ("--api-key", "HF_TOKEN", "Bearer"); None when there is none."""
    for pattern in (WRITTEN_FLAG, WRITTEN_ASSIGNMENT):
        for found in pattern.finditer(text):
            if not REFERENCE.match(found.group(found.lastindex or 0)):  # the value: the last group
                return found.group(1)
    token = BEARER_TOKEN.search(text)
    return "Bearer" if token is not None and not REFERENCE.match(token.group(1)) else None


BEARER_TOKEN = re.compile(r"Bearer\s+(\S+)", re.I)
WRITTEN_FLAG = re.compile(r"(--?[A-Za-z0-9-]*(?:key|token|secret|password))([ =])('[^']*'|\S+)", re.I)
"""A flag whose name ends in one of the words (--api-key, --hf-token): not --max-num-batched-tokens or
--tokenizer-mode, which the redaction's wider pattern would scrub too (scrubbing more is harmless there; a
refusal must not be wrong)."""
WRITTEN_ASSIGNMENT = re.compile(
    r"(?<![A-Za-z0-9_])([A-Za-z0-9_]*(?:KEY|TOKEN|SECRET|PASSWORD))=('[^']*'|\"[^\"]*\"|\S+)", re.I
)
