"""The actions' data (model.actions) lives below ui/: `check-config` checks a `[keys]` table against it without
loading the console at all (no poolconsole.ui, no Textual, no Rich)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from poolconsole.model import actions

ROOT = Path(__file__).resolve().parents[2]


def test_check_config_loads_no_console(tmp_path: Path) -> None:
    config = tmp_path / "hosts.toml"
    config.write_text('[keys]\nrestart = "X"\n\n[[engines]]\nname = "a"\nkind = "vllm"\nurl = "http://127.0.0.1:9"\n')
    code = (
        "import argparse, sys\n"
        "from poolconsole.commands import check_config\n"
        f"assert check_config.run(argparse.Namespace(file={str(config)!r}, config=None)) == 0\n"
        "loaded = [m for m in sys.modules if m.startswith(('poolconsole.ui', 'textual', 'rich'))]\n"
        "assert not loaded, loaded\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr


def test_every_action_names_its_runner() -> None:
    """A targeted action's method is the same everywhere it is bound (log_next and log_previous share one)."""
    screens = {"overview", "log", "alerts"}
    assert {a.target for a in actions.ACTIONS} <= {actions.APP, actions.RUNNER} | screens
    for a in actions.ACTIONS:
        assert actions.TARGET_OF[actions.method(a)] == a.target, a.id
    assert {"smoke", "smoke_all", "poll_now", "logs", "security"} == actions.LIVE_ONLY
