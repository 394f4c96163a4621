"""What a secret looks like inside text: an assignment (`HF_TOKEN=...`), a flag (`--api-key X`), a Bearer
token, an `Authorization:` header, a secret-named field (`token: ...`, `"api_key": "..."`). model.redaction
scrubs these from what is shown, logged and stored; config.load refuses the first three written into hosts.toml
(a profile's args or an env value).

Every pattern here runs on text anyone can write (a caller's prompt in an engine's log), so each is linear in
its input: a name is taken whole and possessively (`*+`, no giving back), it may start only where a run of
name characters starts (a lookbehind), and its key word is found by a lookahead or lookbehind inside that run
rather than by backtracking over it. The old form (`-[A-Za-z0-9-]*(?:key|...)`) took a second on 4 KB of
dashes and tried again at each dash. tests/unit/test_secret_text.py checks them against the old forms."""

from __future__ import annotations

import re

WORDS = "KEY|TOKEN|SECRET|PASSWORD"
ENDS_IN_WORD = "(?:(?<=KEY)|(?<=TOKEN)|(?<=SECRET)|(?<=PASSWORD))"
"""Right after a name that ends in one of the words (a lookbehind has one width, hence one per word)."""
VALUE = r"""('[^']*+'|"[^"]*+"|\S+)"""
"""A quoted value whole, else the word."""

SECRET_ASSIGNMENT = re.compile(rf"(?<![A-Za-z0-9_])((?=[A-Za-z0-9_]*?(?:{WORDS}))[A-Za-z0-9_]*+)={VALUE}", re.I)
"""`NAME=value` where NAME has one of the words anywhere in it (HF_TOKEN_PATH too: scrubbing more is harmless)."""
SECRET_FLAG = re.compile(
    rf"(?<![A-Za-z0-9-])([A-Za-z0-9]*+-(?=[A-Za-z0-9-]*?(?:{WORDS}))[A-Za-z0-9-]*+)([ =])('[^']*+'|\S+)", re.I
)
"""`--flag value` / `--flag=value` where the flag has one of the words after its first dash. Group 1 is the
whole word the flag ends (`x-api-key`, not only `-api-key`): the scrub keeps it and the separator."""
BEARER = re.compile(r"(Bearer\s++)\S+", re.I)
AUTHORIZATION = re.compile(
    r"""(\bAuthorization["']?[ \t]*+[:=][ \t]*+["']?(?:[A-Za-z][A-Za-z0-9_-]*+[ \t]++(?=[^\s"',]))?)[^\s"',]++""",
    re.I,
)
"""An `Authorization:` header's credentials after its scheme (`Basic dXNl...`, `Token ...`), or the whole value
where it has no scheme."""
SECRET_FIELD = re.compile(
    rf"""(?<![A-Za-z0-9_-])([A-Za-z0-9_-]*+{ENDS_IN_WORD}(?:["'][ \t]*+:[ \t]*+|[ \t]*+(?::[ \t]++|=[ \t]*+)))"""
    r"""('[^']*+'|"[^"]*+"|[^\s,;}\]]++)""",
    re.I,
)
"""A field named for a secret in YAML, JSON, a Python dict or TOML (`token: abc`, `{"api_key":"sk-..."}`,
`password = "x"`): only names that end in one of the words, so `max_tokens: 512` stays readable, and a colon
needs a quoted name before it or a space after it (YAML's rule), so `nodekey:abc` is no field. The value is
a quoted string or a word up to a comma or a closing bracket: the rest of a one-line JSON document stays."""
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


BEARER_TOKEN = re.compile(r"Bearer\s++(\S+)", re.I)
WRITTEN_FLAG = re.compile(rf"(?<![A-Za-z0-9-])[A-Za-z0-9]*+(-[A-Za-z0-9-]*+{ENDS_IN_WORD})([ =])('[^']*+'|\S+)", re.I)
"""A flag whose name ends in one of the words (--api-key, --hf-token): not --max-num-batched-tokens or
--tokenizer-mode, which the redaction's wider pattern would scrub too (scrubbing more is harmless there; a
refusal must not be wrong). Group 1 is the flag from the word's first dash (`-api-key` in `x-api-key`)."""
WRITTEN_ASSIGNMENT = re.compile(rf"(?<![A-Za-z0-9_])([A-Za-z0-9_]*+{ENDS_IN_WORD})={VALUE}", re.I)
