"""The demo keeps to itself: its console's actions go to an audit log (and smoke store) beside its generated
hosts.toml, never to the user data directory's, and finding its directory prints no platformdirs warning."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from poolconsole import cli
from poolconsole.cli import demo_console
from poolconsole.commands import launch
from poolconsole.ops import audit
from poolconsole.ops.smoke import runs as smoke_runs
from poolconsole.sim.demo import SimPool
from poolconsole.sim.demo_files import demo_stores
from poolconsole.ui.app import PoolApp
from poolconsole.ui.screens.action import ActionScreen, ConfirmAction
from poolconsole.ui.screens.ledger import LedgerScreen
from tests.ui.test_console import action_outcome, select_row

ROOT = Path(__file__).resolve().parents[2]


@contextlib.asynccontextmanager
async def demo_pool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int) -> AsyncIterator[tuple[SimPool, Path]]:
    """The simulated pool answering, with its hosts.toml as `poolconsole demo` writes it (demo-SEED.toml), and
    the user's data and config directories under tmp_path."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    pool = SimPool(seed=seed)
    await pool.start(tmp_path / f"demo-{seed}.toml.ssh")
    try:
        await pool.wait_ready()
        config_path = tmp_path / f"demo-{seed}.toml"
        config_path.write_text(pool.config_toml())
        yield pool, config_path
    finally:
        await pool.stop()


async def test_a_demo_restart_stays_out_of_the_users_audit_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with demo_pool(tmp_path, monkeypatch, 21) as (_, config_path):
        demo = demo_console(config_path, "normal")
        app = PoolApp(demo.config, theme_state=tmp_path / "ui.json", store=demo.store)
        app.audit_path, app.smoke_db = demo.stores  # as ui.launch gives them
        assert app.audit_path is not None and app.smoke_db is not None
        assert app.audit_path != audit.default_path() and app.smoke_db != smoke_runs.default_db()
        assert app.audit_path.parent == tmp_path and app.smoke_db.parent == tmp_path  # beside the demo's config
        assert app.store_path == tmp_path / "demo-21.history.sqlite3"  # its own history store: T has one to read
        async with app.run_test(size=(160, 45)) as pilot:
            await select_row(pilot, app, "engine:qwen3-30b-a3b")
            await pilot.press("R")
            await pilot.pause()
            assert isinstance(app.screen, ConfirmAction)
            await pilot.press("y")
            await pilot.pause()
            assert isinstance(app.screen, ActionScreen)
            assert await action_outcome(app, 160) == "ok"
            await pilot.press("escape")
            await pilot.pause()
            await pilot.press("T")
            for _ in range(40):
                await pilot.pause(0.1)
                if isinstance(app.screen, LedgerScreen):
                    break
            assert isinstance(app.screen, LedgerScreen), app.screen  # no "no history store" toast
    assert [(e.action, e.target) for e in audit.entries(app.audit_path)] == [("restart", "qwen3-30b-a3b")]
    assert not audit.default_path().exists() or audit.entries(audit.default_path()) == []


def test_the_demo_config_path_prints_no_runtime_dir_warning(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "XDG_RUNTIME_DIR"}
    env["PYTHONPATH"] = str(ROOT)
    env["TMPDIR"] = str(tmp_path)  # platformdirs' fallback, when /run/user/UID is not there, lands here
    env["PYTHONWARNINGS"] = "default"
    code = "from poolconsole.sim.demo_run import demo_config_path; print(demo_config_path())"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().endswith(".toml"), proc.stdout
    assert "XDG_RUNTIME_DIR" not in proc.stderr and "Warning" not in proc.stderr, proc.stderr


async def test_the_clis_commands_on_the_demos_hosts_toml_keep_to_its_stores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`poolconsole restart --config <the demo's hosts.toml>` (and smoke, plan, record, ledger, the console)
    wrote the user's audit log: a simulated restart is no real action. The demo's first line marks its
    config, and the commands take the stores beside it."""
    async with demo_pool(tmp_path, monkeypatch, 22) as (pool, config_path):
        own_audit, own_smoke, own_history = demo_stores(config_path)
        assert cli.demo_stores_of(str(config_path)) == (own_audit, own_smoke, own_history)
        argv = ["restart", "qwen3-30b-a3b", "--config", str(config_path), "--yes"]
        assert await asyncio.to_thread(cli.main, argv) == 0, capsys.readouterr()
        said = capsys.readouterr().err
        assert f"{config_path} is a hosts.toml the demo wrote: its own stores beside it are used" in said, said
    assert [(e.action, e.target) for e in audit.entries(own_audit)] == [("restart", "qwen3-30b-a3b")]
    assert not audit.default_path().exists() or audit.entries(audit.default_path()) == []
    opened: list[dict[str, object]] = []

    def console(*args: object, **kwargs: object) -> int:
        opened.append(kwargs)
        return 0

    monkeypatch.setattr(launch, "open_console", console)
    assert cli.main(["--config", str(config_path)]) == 0
    assert opened == [{"store": own_history, "stores": (own_audit, own_smoke)}], "the console took the user's stores"
    user_toml = tmp_path / "hosts.toml"
    user_toml.write_text(pool.config_toml().split("\n", 1)[1])  # the same pool without the demo's first line
    assert cli.demo_stores_of(str(user_toml)) is None
