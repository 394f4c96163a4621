"""No third-party warning reaches an operator's terminal: each command, run as a user runs it (a fresh
interpreter, warnings shown as Python shows them by default), prints nothing on stderr that Python or a
library wrote. cryptography 51's DSA deprecation, raised from asyncssh's imports, printed ten lines around
every command and the console."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.test_bad_paths import CONFIG

COMMANDS = [
    ["status"],
    ["status", "--json"],
    ["check-config"],
    ["plan", "--offline"],
    ["tailnet"],
    ["audit"],
    ["logs", "e1"],
    ["exposure"],
    ["runs"],
]


@pytest.mark.parametrize("argv", COMMANDS, ids=" ".join)
def test_a_command_prints_no_python_warning(tmp_path: Path, argv: list[str]) -> None:
    config = tmp_path / "hosts.toml"
    config.write_text(CONFIG)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHONWARNINGS", "POOLCONSOLE_"))}
    env |= {"XDG_DATA_HOME": str(tmp_path / "data"), "XDG_CONFIG_HOME": str(tmp_path / "config")}
    args = [*argv, str(config)] if argv == ["check-config"] else [*argv, "--config", str(config)]
    proc = subprocess.run(
        [sys.executable, "-m", "poolconsole", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    assert "Warning" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode in (0, 1, 2), proc.stderr  # what each says of an unreachable pool is tested elsewhere
