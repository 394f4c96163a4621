"""The layer boundary, types and lint, checked on every run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_core_layers_import_without_textual_or_rich() -> None:
    """Everything but ui/ imports with Textual and Rich made unimportable: the runtime, the CLI, the demo."""
    code = (
        "import sys; sys.modules['textual'] = None; sys.modules['rich'] = None\n"
        "import poolconsole.cli, poolconsole.config, poolconsole.collect.engine_sampling, poolconsole.model.view\n"
        "import poolconsole.sim.demo, poolconsole.collect.engines.poll, poolconsole.collect.hosts.sampling\n"
        "import poolconsole.ops.lifecycle, poolconsole.ops.smoke.runner, poolconsole.ops.planning\n"
        "import poolconsole.model.alerts, poolconsole.model.gateway, poolconsole.runtime.live\n"
        "assert not [m for m in sys.modules if m.startswith(('textual', 'rich')) and sys.modules[m] is not None]\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr


def test_layer_contracts() -> None:
    """import-linter's contracts in pyproject.toml: config <- model <- collect <- runtime | ops | sim <- ui
    <- cli, each layer importing only those below it (lazy imports inside functions included), and
    Textual, Rich and textual-plotext nowhere outside ui/."""
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stdout[-3000:]


def test_the_console_starts_without_the_action_and_ssh_libraries() -> None:
    """Start-up imports only what the first frame needs: httpx and the openai SDK (actions, smoke tests)
    and asyncssh (hosts) load when first used, so a console's first poll is not held back by them; so do
    the charts (plotext), prometheus_client's strict parser, the actions and every screen but the overview,
    and, for a pool without `[prometheus]`, the modules that read one (checked with its runtime started)."""
    later = (
        "httpx",
        "openai",
        "asyncssh",
        "plotext",
        "prometheus_client",
        "poolconsole.ops.lifecycle",
        "poolconsole.ui.screens.detail",
        "poolconsole.ui.screens.action",
        "poolconsole.ui.screens.ledger",
        "poolconsole.collect.prometheus_source",
        "poolconsole.collect.prometheus_hosts",
        "poolconsole.collect.prometheus_batch",
        "poolconsole.collect.prometheus_range",
        "poolconsole.runtime.prometheus_history",
    )
    code = (
        "import asyncio, sys; import poolconsole.cli, poolconsole.ui.app\n"
        "from poolconsole.config import parse_config\n"
        "from poolconsole.runtime.live import LivePool\n"
        'toml = \'[[engines]]\\nname = "a"\\nkind = "vllm"\\nurl = "http://127.0.0.1:9"\\n\'\n'
        "async def started():\n"
        "    live = LivePool(parse_config(toml, 'hosts.toml'))\n"
        "    live.start(settle_gc=False)\n"
        "    await asyncio.sleep(0.2)\n"
        "    await live.stop()\n"
        "asyncio.run(started())\n"
        f"loaded = [m for m in {later!r} if m in sys.modules]\n"
        "assert not loaded, loaded\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr


def test_mypy_strict() -> None:
    result = subprocess.run([sys.executable, "-m", "mypy"], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stdout[-3000:]


def test_ruff() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "poolconsole", "tests", "benchmarks"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stdout[-3000:]
