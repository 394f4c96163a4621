"""An exposure audit that could not reach an engine says so, and does not exit 0: 'nothing exposed (8
checked)' with exit 0 had been the answer for a pool none of whose endpoints answered."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

from poolconsole import cli
from tests.unit.test_bad_paths import CONFIG


def run(argv: list[str]) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = cli.main(argv)
    return code, out.getvalue()


def test_an_unreachable_pool_is_not_checked_and_exits_1(tmp_path: Path) -> None:
    config = tmp_path / "hosts.toml"
    config.write_text(CONFIG)  # e1 at 127.0.0.1:9, where nothing listens
    code, said = run(["exposure", "--config", str(config), "--no-completion"])
    assert code == 1, said
    last = said.strip().splitlines()[-1]
    assert last.startswith("NOT CHECKED: e1 (1 of 1") and "nothing exposed" not in said, said
    code, said = run(["exposure", "--config", str(config), "--no-completion", "--json"])
    assert code == 1 and json.loads(said)["not_checked"] == ["e1"]
