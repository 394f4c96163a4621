"""The demo's files in the runtime directory do not pile up: an ended demo's are removed at the next launch,
all but the newest two demos' (the newest is where `poolconsole audit` points)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from poolconsole import cli
from poolconsole.commands import launch
from poolconsole.config import load_config, parse_config
from poolconsole.config.example import names_example_hosts
from poolconsole.sim.demo_files import prune_ended
from tests.unit.test_bad_paths import CONFIG


def ended_pid() -> int:
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(proc.stdout)


def test_ended_demos_files_are_pruned_but_the_newest_and_running_ones_stay(tmp_path: Path) -> None:
    pids = [ended_pid() for _ in range(5)]
    for age, pid in enumerate(pids):
        for suffix in (".history.sqlite3", ".audit.sqlite3", ".smoke.sqlite3", ".history.sqlite3-wal"):
            path = tmp_path / f"demo-{pid}{suffix}"
            path.write_text("x")
            os.utime(path, (1_000_000 + age, 1_000_000 + age))  # the last pid is the newest
        (tmp_path / f"demo-{pid}.toml.ssh").mkdir()
    running = tmp_path / f"demo-{os.getpid()}.history.sqlite3"
    running.write_text("x")
    os.utime(running, (1, 1))  # the oldest of all, and still running
    other = tmp_path / "ui.json"
    other.write_text("{}")
    removed = prune_ended(tmp_path)
    left = {p.name.split(".")[0] for p in tmp_path.glob("demo-*")}
    assert left == {f"demo-{pids[-1]}", f"demo-{pids[-2]}", f"demo-{os.getpid()}"}, left
    assert len(removed) == 3 * 5 and other.exists()
    assert prune_ended(tmp_path) == []


def test_the_example_pool_is_never_recorded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`poolconsole --config hosts.toml` opens the checkout's example of fictional hosts: its console keeps
    no history store, and `record` refuses it with exit 2."""
    example = Path(__file__).resolve().parents[2] / "hosts.toml"
    assert names_example_hosts(load_config(example))
    assert not names_example_hosts(parse_config(CONFIG))
    opened: list[dict[str, object]] = []
    monkeypatch.setattr(launch, "open_console", lambda *args, **kwargs: opened.append(kwargs) or 0)  # type: ignore[func-returns-value]
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert cli.main(["--config", str(example)]) == 0
    assert opened and opened[0]["store"] is None
    assert cli.main(["record", "--config", str(example)]) == 2
    assert not list(tmp_path.rglob("*.sqlite3"))
