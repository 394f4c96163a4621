"""What marks a hosts.toml as the demo's and where the demo keeps its stores. Light on purpose: the CLI reads
these on every launch, and `sim.demo` loads asyncssh, httpx and the simulated engines (about 0.3 s of a launch)."""

from __future__ import annotations

from pathlib import Path

CONFIG_HEADER = "# hosts.toml of the simulated pool written by `poolconsole demo`"
"""The first line of the demo's hosts.toml: the CLI keeps its commands on such a pool to the demo's stores."""


def demo_stores(config_path: Path) -> tuple[Path, Path, Path]:
    """The demo's own audit log, smoke store and history store, beside its hosts.toml
    (`demo-PID.audit.sqlite3`, `demo-PID.smoke.sqlite3`, `demo-PID.history.sqlite3`): actions, smoke runs
    and polls of the simulated pool never reach the user's, and its ledger (T) has a store to read."""
    return (
        config_path.with_name(config_path.stem + ".audit.sqlite3"),
        config_path.with_name(config_path.stem + ".smoke.sqlite3"),
        config_path.with_name(config_path.stem + ".history.sqlite3"),
    )
