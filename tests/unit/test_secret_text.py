"""The secret patterns (config.secret_text) on text anyone can write, a caller's prompt in an engine's log:
linear in it (issue 35 item 1: '-' * 4096 took 1.1 s to clean, 'a-' * 10768 7.3 s in the config check,
and they ran on the event loop), matching what the backtracking forms matched, and scrubbing what those
missed (item 7: `Authorization: Basic ...`, `token: abc`).

No test here measures time. The long inputs are sized so the linear patterns take milliseconds and the old
quadratic ones hours: a regression hangs the test until pytest-timeout fails it."""

from __future__ import annotations

import re
import threading
from types import SimpleNamespace
from typing import Any, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from poolconsole.collect import engine_logs
from poolconsole.collect.ssh import CommandResult, HostConnection
from poolconsole.config import secret_text
from poolconsole.config.models import Engine
from poolconsole.config.secret_text import secret_in
from poolconsole.model.redaction import redact

# -- linear: each would take from minutes to hours with the backtracking forms --------------------------------

LONG = 200_000
"""Characters: the old forms took 1.5 s on 4096 dashes, so (LONG / 4096)^2 x 1.5 s is about an hour."""


def test_runs_of_name_characters_with_no_secret_pass_through_whole() -> None:
    for text in ("-" * LONG, "a-" * (LONG // 2), "_" * LONG, "a_" * (LONG // 2), "key" * LONG, "KEY_" * LONG):
        assert redact(text) == text
        assert secret_in(text) is None


def test_a_secret_after_a_long_run_is_still_found() -> None:
    dashes = "-" * LONG
    assert redact(dashes + " --api-key sk-1 tail") == dashes + " --api-key <redacted> tail"
    assert redact("a-" * LONG + "--hf-token=hf_x") == "a-" * LONG + "--hf-token=<redacted>"  # one word
    assert redact("key" * LONG + "=v") == "key" * LONG + "=<redacted>"
    assert secret_in("a-" * LONG + " --api-key sk-1") == "--api-key"
    assert secret_in("x" * LONG + "_TOKEN=hf_1") == "x" * LONG + "_TOKEN"


def test_long_lines_of_the_new_shapes_are_linear_too() -> None:
    for text in ("token:" * LONG, '{"token":' * LONG, "Authorization:" * (LONG // 4), "a: " * LONG, "Bearer " * LONG):
        redact(text)  # the value is the rest of the line: one match
    assert redact("x" * LONG + "_token: " + "v" * LONG) == "x" * LONG + "_token: <redacted>"


def test_a_log_read_of_long_hostile_lines_is_cleaned_line_by_line() -> None:
    """The finding as it happened: the runtime reads an engine's newest 400 lines after a restart; 400 lines
    of 4 KB of dashes took 7 minutes to clean before."""
    out = "\n".join(["-" * 5000, "a-" * 3000, "\x1b[31m" + "-" * 5000 + "HF_TOKEN=hf_abc"] * 134) + "\n"
    lines, status, truncated = engine_logs.parse_read(out + engine_logs.EXIT_MARK + "0\n", 10**7)
    assert status == 0 and not truncated and len(lines) == 402
    assert lines[0] == "-" * engine_logs.MAX_LINE_CHARS and lines[1] == "a-" * (engine_logs.MAX_LINE_CHARS // 2)
    assert lines[2] == "-" * (engine_logs.MAX_LINE_CHARS - 5)  # cut (before its secret), then the escape gone


def test_clean_cuts_strips_escapes_and_redacts() -> None:
    assert engine_logs.clean("\x1b[1;31mERROR\x1b[0m Bearer abc\r") == "ERROR Bearer <redacted>"
    assert engine_logs.clean("\x1b[" + "1;" * LONG) == "[" + "1;" * 2047  # an escape that never ends: ESC goes


# -- off the event loop ----------------------------------------------------------------------------------------

ENGINE = Engine.model_validate(
    {"name": "e", "kind": "vllm", "url": "http://gpu:8000", "control": {"backend": "docker", "name": "c"}}
)
LOG = "INFO start\nHF_TOKEN=hf_1 loaded\nERROR torch.OutOfMemoryError: CUDA out of memory.\n"


class Stream:
    def __init__(self, chunks: list[str]) -> None:
        self.chunks = chunks

    async def read(self, _: int) -> str:
        return self.chunks.pop(0) if self.chunks else ""


class FakeHost:
    """A host connection that answers a log read, and a followed log in two chunks."""

    host = SimpleNamespace(name="gpu")

    async def run(self, command: str, timeout_s: float | None = None) -> CommandResult:
        return CommandResult(command, 0, LOG + engine_logs.EXIT_MARK + "0\n", "", 0.0)

    async def start(self, command: str) -> Any:
        process = SimpleNamespace(stdout=Stream([LOG[:20], LOG[20:]]), close=lambda: None)

        async def closed() -> None:
            return None

        process.wait_closed = closed
        return process


async def test_log_lines_are_cleaned_in_a_thread_not_on_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """The runtime reads an engine's newest 400 lines after every restart, the log screen reads and follows:
    cleaning them (a millisecond a long line) ran on the loop every poll shares."""
    loop_thread = threading.get_ident()
    threads: list[int] = []
    real = engine_logs.clean

    def clean(line: str) -> str:
        threads.append(threading.get_ident())
        return real(line)

    monkeypatch.setattr(engine_logs, "clean", clean)
    host = cast(HostConnection, FakeHost())
    read = await engine_logs.read_logs(host, ENGINE)
    assert read.lines == ("INFO start", "HF_TOKEN=<redacted> loaded", LOG.splitlines()[2])
    assert [f.pattern for f in read.findings] == ["cuda_out_of_memory"] and read.error is None
    followed: list[tuple[str, str | None]] = []
    await engine_logs.follow_logs(host, ENGINE, lambda line, f: followed.append((line, f.pattern if f else None)))
    assert followed == [(line, None) for line in read.lines[:2]] + [(read.lines[2], "cuda_out_of_memory")]
    assert len(threads) == 6 and loop_thread not in threads


# -- the same matches as the backtracking forms ---------------------------------------------------------------

OLD = {
    "SECRET_ASSIGNMENT": re.compile(
        r"(?<![A-Za-z0-9_])([A-Za-z0-9_]*(?:KEY|TOKEN|SECRET|PASSWORD)[A-Za-z0-9_]*)=('[^']*'|\"[^\"]*\"|\S+)", re.I
    ),
    "SECRET_FLAG": re.compile(r"(--?[A-Za-z0-9-]*(?:key|token|secret|password)[A-Za-z0-9-]*)([ =])('[^']*'|\S+)", re.I),
    "BEARER": re.compile(r"(Bearer\s+)\S+", re.I),
}
REPLACEMENT = {"SECRET_ASSIGNMENT": r"\1=<redacted>", "SECRET_FLAG": r"\1\2<redacted>", "BEARER": r"\1<redacted>"}
OLD_WRITTEN_FLAG = re.compile(r"(--?[A-Za-z0-9-]*(?:key|token|secret|password))([ =])('[^']*'|\S+)", re.I)
OLD_WRITTEN_ASSIGNMENT = re.compile(
    r"(?<![A-Za-z0-9_])([A-Za-z0-9_]*(?:KEY|TOKEN|SECRET|PASSWORD))=('[^']*'|\"[^\"]*\"|\S+)", re.I
)


def old_secret_in(text: str) -> str | None:
    for pattern in (OLD_WRITTEN_FLAG, OLD_WRITTEN_ASSIGNMENT):
        for found in pattern.finditer(text):
            if not secret_text.REFERENCE.match(found.group(found.lastindex or 0)):
                return found.group(1)
    token = re.search(r"Bearer\s+(\S+)", text, re.I)
    return "Bearer" if token is not None and not secret_text.REFERENCE.match(token.group(1)) else None


PIECES = [
    *"-_= '\"\t\n:$a",
    "--",
    "x1",
    "key",
    "KEY",
    "Token",
    "tokens",
    "secret",
    "password",
    "Bearer",
    "api",
    "-key",
    "_TOKEN",
    "$HF",
    "{",
    "}",
    "<redacted>",
    "\u212a",  # KELVIN SIGN, a 'k' to re.IGNORECASE
    "\u017f",  # LATIN SMALL LETTER LONG S, an 's' to it
    "é",
]
"""What the patterns turn on: name characters, separators, quotes, the words and their look-alikes."""


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=16).map("".join))
def test_the_linear_patterns_match_what_the_backtracking_ones_did(text: str) -> None:
    for name, old in OLD.items():
        new = getattr(secret_text, name)
        assert new.sub(REPLACEMENT[name], text) == old.sub(REPLACEMENT[name], text), name
    assert secret_in(text) == old_secret_in(text)


# -- what redact scrubs ---------------------------------------------------------------------------------------


def test_bearer_tokens_are_scrubbed_wherever_they_stand() -> None:
    assert redact("retry with Bearer sk-live-123 in 5 s") == "retry with Bearer <redacted> in 5 s"
    assert redact("bearer\tabc.def") == "bearer\t<redacted>"
    assert redact("curl -H 'Authorization: Bearer abc' x") == "curl -H 'Authorization: Bearer <redacted> x"  # its quote


def test_an_authorization_headers_credentials_are_scrubbed_whatever_the_scheme() -> None:
    assert redact("Authorization: Basic dXNlcjpodW50ZXIy") == "Authorization: Basic <redacted>"
    assert (
        redact('curl -H "authorization: basic dXNl==" http://x') == 'curl -H "authorization: basic <redacted>" http://x'
    )
    assert redact("{'Authorization': 'Token abc', 'Host': 'x'}") == "{'Authorization': 'Token <redacted>', 'Host': 'x'}"
    assert redact("Proxy-Authorization: sk-raw-key") == "Proxy-Authorization: <redacted>"
    assert redact("Authorization: Basic") == "Authorization: <redacted>"  # the scheme alone: said as the value


def test_a_secret_named_field_is_scrubbed_in_yaml_json_and_python_reprs() -> None:
    assert redact("token: abc") == "token: <redacted>"
    assert redact("  hf_token: 'hf abc'  # comment") == "  hf_token: <redacted>  # comment"
    assert redact('{"api_key": "sk-1", "n": 2}') == '{"api_key": <redacted>, "n": 2}'
    assert redact("args: {'api_key': 'sk-1'}") == "args: {'api_key': <redacted>}"
    assert redact("x-api-key: sk-1") == "x-api-key: <redacted>"
    assert redact('password = "a b"') == "password = <redacted>"
    assert redact('{"client_secret":"abc","n":2}') == '{"client_secret":<redacted>,"n":2}'  # the rest stays


def test_fields_that_only_look_like_secrets_stay_readable() -> None:
    look_alikes = ("max_tokens: 512", "keys: 3", "token:", "token: ", "tokens per s: 4", '"nodekey:1a2b": {')
    for text in look_alikes:
        assert redact(text) == text


def test_the_values_given_are_scrubbed_whatever_surrounds_them() -> None:
    assert redact("echo PLAIN=hunter22 done", ("hunter22",)) == "echo PLAIN=<redacted> done"
    assert redact("abc", ("abc",)) == "abc"  # under 4 characters: a value that short would scrub words
