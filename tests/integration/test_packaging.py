"""The editable install (README's set-up command) writes the package's bytecode: without it every launch
compiled the sources where PYTHONDONTWRITEBYTECODE is set or the checkout is read-only (~0.15 s of start-up)."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_an_editable_install_writes_the_packages_bytecode(tmp_path: Path) -> None:
    checkout = tmp_path / "checkout"
    shutil.copytree(ROOT / "poolconsole", checkout / "poolconsole", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy(ROOT / name, checkout / name)
    sources = sorted((checkout / "poolconsole").rglob("*.py"))
    assert sources and not list((checkout / "poolconsole").rglob("*.pyc"))
    build = "from setuptools import build_meta; print(build_meta.build_editable('wheels'))"
    done = subprocess.run([sys.executable, "-c", build], cwd=checkout, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    missing = [p for p in sources if not Path(importlib.util.cache_from_source(str(p))).is_file()]
    assert not missing, f"{len(missing)} of {len(sources)} modules have no bytecode, e.g. {missing[:3]}"
