"""`[keys]`: ids are checked against the action registry (check-config exits 2 naming the key), and two
actions on one key are refused."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from poolconsole.ui.registry import keymap_problems


def test_unknown_ids_and_clashes_are_problems() -> None:
    assert keymap_problems({"filter": "f"}) == []
    problems = keymap_problems({"filtr": "f", "sort": "g"})
    assert any(p.startswith("keys.filtr: no action has this id") for p in problems)
    assert any("'g'" in p and "sort" in p and "gateway" in p for p in problems)
    assert keymap_problems({"help": " "}) == ["keys.help: the key is empty"]


def test_check_config_refuses_a_bad_keys_table(tmp_path: Path) -> None:
    config = tmp_path / "pool.toml"
    config.write_text('[keys]\nfiltr = "f"\n')
    proc = subprocess.run(
        [sys.executable, "-m", "poolconsole", "check-config", str(config)], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2 and "keys.filtr: no action has this id" in proc.stderr and str(config) in proc.stderr
    config.write_text('[keys]\nfilter = "f"\n')
    ok = subprocess.run(
        [sys.executable, "-m", "poolconsole", "check-config", str(config)], capture_output=True, text=True, timeout=60
    )
    assert ok.returncode == 0, ok.stderr
