"""The layer boundary, types and lint, checked on every run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_core_layers_import_without_textual_or_rich() -> None:
    """Everything but ui/ imports with Textual and Rich made unimportable: the runtime, the CLI, the demo."""
    code = (
        "import sys; sys.modules['textual'] = None; sys.modules['rich'] = None\n"
        "import poolconsole.cli, poolconsole.config, poolconsole.runtime.sampling, poolconsole.model.view\n"
        "import poolconsole.sim.demo, poolconsole.collect.engines.poll, poolconsole.collect.hosts.sampling\n"
        "import poolconsole.ops.lifecycle, poolconsole.ops.smoke.runner, poolconsole.ops.planning\n"
        "import poolconsole.model.alerts, poolconsole.model.gateway, poolconsole.runtime.live\n"
        "assert not [m for m in sys.modules if m.startswith(('textual', 'rich')) and sys.modules[m] is not None]\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr


def test_check_config_loads_neither_textual_nor_rich(tmp_path: Path) -> None:
    """`check-config` (its command module's run, on a file with a `[keys]` table the registry checks) imports
    neither Textual nor Rich: validating a file in CI or a pre-commit hook needs no terminal toolkit."""
    config = tmp_path / "hosts.toml"
    config.write_text('[keys]\nquit = "q"\n\n[[engines]]\nname = "a"\nkind = "vllm"\nurl = "http://127.0.0.1:9"\n')
    code = (
        "import argparse, sys\n"
        "from poolconsole.commands import check_config\n"
        f"assert check_config.run(argparse.Namespace(file={str(config)!r}, config=None)) == 0\n"
        "loaded = [m for m in sys.modules if m.split('.')[0] in ('textual', 'rich')]\n"
        "assert not loaded, loaded\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("ok: 0 host(s), 1 engine(s)"), result.stdout


def test_layer_contracts() -> None:
    """import-linter's contracts in pyproject.toml: config <- model <- collect <- runtime | ops | sim <- workflows
    <- ui <- commands <- cli, each layer importing only those below it (lazy imports inside functions included), and
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


def test_the_console_starts_without_the_action_and_ssh_libraries(tmp_path: Path) -> None:
    """Start-up imports only what the first frame needs: httpx and the openai SDK (actions, smoke tests)
    and asyncssh (hosts, the demo's simulated pool) load when first used, so a console's first poll is not
    held back by them; so do the charts (plotext), prometheus_client's strict parser, the actions and every
    screen but the overview, and, for a pool without `[prometheus]`, the modules that read one. Walked
    through the CLI as `poolconsole --config FILE` launches (the app's run replaced by 0.2 s of its
    runtime polling)."""
    later = (
        "httpx",
        "openai",
        "asyncssh",
        "plotext",
        "prometheus_client",
        "poolconsole.sim.demo",
        "poolconsole.ops.lifecycle",
        "poolconsole.ui.screens.detail",
        "poolconsole.ui.screens.action",
        "poolconsole.ui.screens.ledger",
        "poolconsole.collect.prometheus.source",
        "poolconsole.collect.prometheus.hosts",
        "poolconsole.collect.prometheus.exporters",
        "poolconsole.collect.prometheus.api",
        "poolconsole.collect.prometheus.batch",
        "poolconsole.collect.prometheus.range",
        "poolconsole.runtime.prometheus_history",
    )
    config = tmp_path / "hosts.toml"
    config.write_text('[[engines]]\nname = "a"\nkind = "vllm"\nurl = "http://127.0.0.1:9"\n')
    code = (
        "import asyncio, sys; import poolconsole.cli, poolconsole.ui.app\n"
        "async def run_async(self, *, headless=False):\n"
        "    await asyncio.sleep(0.2)\n"
        "poolconsole.ui.app.PoolApp.run_async = run_async\n"
        f"assert poolconsole.cli.main(['--config', {str(config)!r}]) == 0\n"
        f"loaded = [m for m in {later!r} if m in sys.modules]\n"
        "assert not loaded, loaded\n"
    )
    env = {**os.environ, **{f"XDG_{kind}_HOME": str(tmp_path / kind) for kind in ("CONFIG", "DATA", "STATE", "CACHE")}}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env)
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


def test_no_module_over_500_lines() -> None:
    """Small modules (issue 36): a module that outgrows 500 lines is split by what its parts do."""
    long = {
        str(path.relative_to(ROOT)): lines
        for path in sorted((ROOT / "poolconsole").rglob("*.py"))
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > 500
    }
    assert not long, long
