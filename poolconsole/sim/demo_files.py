"""What marks a hosts.toml as the demo's and where the demo keeps its stores. Light on purpose: the CLI reads
these on every launch, and `sim.demo` loads asyncssh, httpx and the simulated engines (about 0.3 s of a launch)."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

SCENARIOS = ("normal", "overload", "node-down", "restart", "oom", "wedge", "gpu-fault")
"""What `poolconsole demo --scenario` offers (here, light, for the command's parser; sim.demo plays them)."""

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


KEEP_ENDED = 2
"""How many ended demos' files stay in the runtime directory: the newest, which `poolconsole audit` points at,
and the one before it. Every launch left its history store, audit log and smoke store (17 history stores after
15 launches had piled up, never cleaned)."""

_DEMO_FILE = re.compile(r"demo-(\d+)\.")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


def prune_ended(directory: Path, keep: int = KEEP_ENDED) -> list[Path]:
    """Removes the files of the demos that ended (their PID is gone), all but the newest `keep` demos'; returns
    what it removed. A demo still running (another terminal) keeps everything."""
    ended: dict[int, list[Path]] = {}
    for path in directory.glob("demo-*"):
        found = _DEMO_FILE.match(path.name)
        if found is not None and not _alive(int(found.group(1))):
            ended.setdefault(int(found.group(1)), []).append(path)

    def newest(paths: list[Path]) -> float:
        return max((p.stat().st_mtime for p in paths if p.exists()), default=0.0)

    removed: list[Path] = []
    for paths in sorted(ended.values(), key=newest, reverse=True)[keep:]:
        for path in paths:
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
            removed.append(path)
    return removed
