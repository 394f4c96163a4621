"""Every command, every path option, given what an operator mistypes: a directory, a file that is not a store,
a missing file, a place that cannot be written. Each answers one sentence on stderr naming the path, and exit
2; never a traceback, never 'no runs stored' with exit 0 for a file that is not there."""

from __future__ import annotations

import contextlib
import io
import uuid
from pathlib import Path

import pytest

from poolconsole import cli

CONFIG = """\
[[hosts]]
name = "h1"
address = "127.0.0.1"
port = 1

[[engines]]
name = "e1"
kind = "llamacpp"
url = "http://127.0.0.1:9"
host = "h1"
[engines.control]
backend = "systemd"
name = "x.service"
profile_file = "/tmp/x.env"
[[engines.profiles]]
name = "p"
format = "GGUF"
args = ["-m", "x"]
"""

COMMANDS: dict[str, list[str]] = {
    "status": [],
    "check-config": [],
    "smoke": ["e1"],
    "plan": ["--offline"],
    "audit": [],
    "logs": ["e1"],
    "exposure": [],
    "tailnet": [],
    "restart": ["e1", "--yes"],
    "rollover": ["e1", "p", "--yes"],
    "record": [],
    "export": [],
    "ledger": [],
    "runs": [],
    "replay": [],
    "prometheus-config": [],
}
STORES = {
    "--db": ("smoke", "audit", "runs"),
    "--audit-db": ("smoke", "plan", "restart", "rollover"),
    "--store": ("record", "export", "ledger", "replay"),
}
KINDS = ("directory", "not-a-store", "missing", "unwritable")
CREATES = {
    ("smoke", "--db"),
    ("smoke", "--audit-db"),
    ("restart", "--audit-db"),
    ("rollover", "--audit-db"),
    ("record", "--store"),
}
"""Where a missing file is created (the command writes there): not a mistake, so not in the table."""


def cases() -> list[tuple[str, str, str]]:
    found = []
    for command in COMMANDS:
        for option in ("--config", *STORES):
            if option != "--config" and command not in STORES[option]:
                continue
            for kind in KINDS:
                if kind == "missing" and (command, option) in CREATES:
                    continue
                found.append((command, option, kind))
    return found


def bad_path(tmp_path: Path, kind: str) -> Path:
    if kind == "directory":
        (tmp_path / "adir").mkdir(exist_ok=True)
        return tmp_path / "adir"
    if kind == "not-a-store":
        garbage = tmp_path / "garbage.bin"
        garbage.write_bytes(b"garbage\x00\x01 neither SQLite nor TOML [[[\n" * 40)
        return garbage
    if kind == "missing":
        return tmp_path / "nowhere" / uuid.uuid4().hex / "x.sqlite"
    blocker = tmp_path / "a-file"  # root writes anywhere, but not below a file
    blocker.write_text("x")
    return blocker / "x.sqlite"


@pytest.mark.parametrize(("command", "option", "kind"), cases())
def test_a_bad_path_is_one_sentence_naming_it_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str, option: str, kind: str
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    config = tmp_path / "hosts.toml"
    config.write_text(CONFIG)
    path = bad_path(tmp_path, kind)
    if command == "check-config":
        argv = [command, str(path)]
    else:
        argv = [command, *COMMANDS[command], option, str(path)]
        if option != "--config":
            argv += ["--config", str(config)]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(argv)
    said = err.getvalue()
    assert code == 2, (argv, code, said, out.getvalue())
    assert "Traceback" not in said
    named = str(path) in said or (kind == "unwritable" and str(path.parent) in said)
    assert named, said
    if option != "--config" or kind != "not-a-store":  # a config's problems are a list, one per line
        assert said.strip().count("\n") == 0, said


@pytest.mark.parametrize(
    ("yes", "tty", "answer", "expected"),
    [
        (True, False, None, None),
        (False, False, None, 2),
        (False, True, "y", None),
        (False, True, "", 1),
        (False, True, "no", 1),
    ],
)
def test_restart_and_rollover_ask_at_a_terminal_and_refuse_elsewhere_with_2(
    monkeypatch: pytest.MonkeyPatch, yes: bool, tty: bool, answer: str | None, expected: int | None
) -> None:
    monkeypatch.setattr("sys.stdin.isatty", lambda: tty)
    asked: list[str] = []

    def reply(prompt: str) -> str:
        asked.append(prompt)
        assert answer is not None, "asked where it must not ask"
        return answer

    monkeypatch.setattr("builtins.input", reply)
    assert cli.confirm(yes) == expected
    assert bool(asked) == (tty and not yes)
