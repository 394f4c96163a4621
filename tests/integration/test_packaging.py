"""The editable install (README's set-up command) writes the package's bytecode: without it every launch
compiled the sources where PYTHONDONTWRITEBYTECODE is set or the checkout is read-only (~0.15 s of start-up).
A wheel (`pip install .`, pipx) carries the themes: an installed console has no checkout to read them from."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from poolconsole.ui.themes import load_themes

ROOT = Path(__file__).resolve().parents[2]


def checkout_copy(tmp_path: Path) -> Path:
    """What a clone holds to build from: the package, its themes and the build's files."""
    checkout = tmp_path / "checkout"
    shutil.copytree(ROOT / "poolconsole", checkout / "poolconsole", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "themes", checkout / "themes")
    for name in ("pyproject.toml", "setup.py", "README.md", "MANIFEST.in"):
        shutil.copy(ROOT / name, checkout / name)
    return checkout


def test_an_editable_install_writes_the_packages_bytecode(tmp_path: Path) -> None:
    checkout = checkout_copy(tmp_path)
    sources = sorted((checkout / "poolconsole").rglob("*.py"))
    assert sources and not list((checkout / "poolconsole").rglob("*.pyc"))
    build = "from setuptools import build_meta; print(build_meta.build_editable('wheels'))"
    done = subprocess.run([sys.executable, "-c", build], cwd=checkout, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    missing = [p for p in sources if not Path(importlib.util.cache_from_source(str(p))).is_file()]
    assert not missing, f"{len(missing)} of {len(sources)} modules have no bytecode, e.g. {missing[:3]}"


def build(source: Path, what: str) -> Path:
    """setuptools' build backend run in `source` (no isolation: nothing is downloaded): the file it built."""
    code = f"from setuptools import build_meta; print(build_meta.{what}('dist'))"
    done = subprocess.run([sys.executable, "-c", code], cwd=source, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return source / "dist" / done.stdout.split()[-1]


@pytest.mark.parametrize("route", ["wheel", "sdist then wheel"])
def test_an_installed_console_has_its_themes(tmp_path: Path, route: str) -> None:
    """`pip install .` builds the wheel from the checkout; pipx and indexes build it from the sdist."""
    checkout = checkout_copy(tmp_path)
    source = checkout
    if route == "sdist then wheel":
        with tarfile.open(build(checkout, "build_sdist")) as sdist:
            sdist.extractall(tmp_path / "sdist", filter="data")
        [source] = (tmp_path / "sdist").iterdir()
    installed = tmp_path / "site"
    with zipfile.ZipFile(build(source, "build_wheel")) as wheel:
        wheel.extractall(installed)
    shutil.rmtree(checkout)  # as after `pip install .`: no checkout left to read themes from
    shutil.rmtree(tmp_path / "sdist", ignore_errors=True)
    read = (
        "import json; from poolconsole.ui import themes; "
        "print(json.dumps([themes.__file__, [t.name for t in themes.load_themes()]]))"
    )
    env = {"PYTHONPATH": str(installed), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", read], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    module, names = json.loads(done.stdout)
    assert Path(module).is_relative_to(installed), f"read the themes of {module}, not the installed package"
    assert names == [t.name for t in load_themes(ROOT / "themes")], "the installed console lacks themes"
