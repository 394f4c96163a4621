"""The console launched from a command (no command, `demo`): Textual loads in `open_console`, once the
first polls are out. Tests replace `open_console` here (`monkeypatch.setattr(launch, "open_console", ...)`):
its callers look it up through this module."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

from poolconsole.commands.common import EXIT_OK, user_config_file
from poolconsole.config import PoolConfig, load_config

DEMO_HINT = "Demo pool (simulated). Yours: --config FILE, $POOLCONSOLE_CONFIG or {user} (see hosts.toml)"


def _home_short(path: Path) -> str:
    home = Path.home()
    return f"~/{path.relative_to(home)}" if path.is_relative_to(home) else str(path)


def open_console(
    config: PoolConfig,
    read_only: bool,
    subtitle: str,
    hint: str | None = None,
    store: Path | None = None,
    stores: tuple[Path, Path] | None = None,
) -> int:
    """The console on `config`; `stores`: the audit log and smoke store its actions write (else the user's)."""
    from poolconsole.ui.launch import run_console  # Textual loads there, once the first polls are out

    asyncio.run(run_console(config, read_only=read_only, subtitle=subtitle, hint=hint, store=store, stores=stores))
    return EXIT_OK


@dataclasses.dataclass(frozen=True)
class DemoConsole:
    """The console on a demo pool: its config, titles, and the demo's own history store, audit log and smoke
    store beside its hosts.toml (never the user's: a restart on the simulated pool is no real action)."""

    config: PoolConfig
    subtitle: str
    hint: str
    store: Path
    stores: tuple[Path, Path]
    """The audit log and the smoke store."""


def demo_console(config_path: Path, scenario: str) -> DemoConsole:
    from poolconsole.sim.demo_files import demo_stores

    audit_log, smoke_db, history = demo_stores(config_path)
    hint = DEMO_HINT.format(user=_home_short(user_config_file()))
    return DemoConsole(load_config(config_path), f"demo pool ({scenario})", hint, history, (audit_log, smoke_db))
