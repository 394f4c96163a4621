"""The package's metadata lives in pyproject.toml; this file adds one step to the editable install and one to
the wheel.

`pip install -e .` leaves the sources where they are and writes no bytecode, so the first launch compiles
them, and every launch does where PYTHONDONTWRITEBYTECODE is set or the checkout is read-only: ~0.15 s of a
first frame that takes ~0.6 s (benchmarks/first_frame_bench.py). The editable install writes the package's
bytecode into the checkout once; Python validates it against each source's mtime and size as usual, so an
edited module is compiled afresh (in memory, or written back where bytecode may be written).

The wheel carries the checkout's top-level themes/ as poolconsole/ui/theme_files/ (ui/themes.py reads it there):
themes are data kept beside the package, and an installed console (`pip install .`, pipx) has no checkout."""

from __future__ import annotations

import compileall
import shutil
from pathlib import Path
from py_compile import PycInvalidationMode

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.editable_wheel import editable_wheel

ROOT = Path(__file__).resolve().parent


class build_py_with_themes(build_py):
    def run(self) -> None:
        super().run()
        if self.editable_mode:  # the checkout's themes/ is read where it is
            return
        themes = sorted((ROOT / "themes").glob("*.toml"))
        if not themes:
            raise SystemExit(f"no themes in {ROOT / 'themes'}: the wheel would have none")
        target = Path(self.build_lib) / "poolconsole" / "ui" / "theme_files"
        shutil.rmtree(target, ignore_errors=True)  # a build/ reused from an earlier build keeps no removed theme
        target.mkdir(parents=True)
        for theme in themes:
            shutil.copyfile(theme, target / theme.name)


class compiled_editable_wheel(editable_wheel):
    def run(self) -> None:
        super().run()
        # A module it cannot write (a read-only checkout) is left to the launches, as before.
        # Checked against each source's mtime, as Python's own writes are (also where SOURCE_DATE_EPOCH is set,
        # which would make compileall hash every source at every import).
        compileall.compile_dir(ROOT / "poolconsole", quiet=2, invalidation_mode=PycInvalidationMode.TIMESTAMP)


setup(cmdclass={"build_py": build_py_with_themes, "editable_wheel": compiled_editable_wheel})
