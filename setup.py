"""The package's metadata lives in pyproject.toml; this file only adds one step to the editable install.

`pip install -e .` leaves the sources where they are and writes no bytecode, so the first launch compiles
them, and every launch does where PYTHONDONTWRITEBYTECODE is set or the checkout is read-only: ~0.15 s of a
first frame that takes ~0.6 s (benchmarks/first_frame_bench.py). The editable install writes the package's
bytecode into the checkout once; Python validates it against each source's mtime and size as usual, so an
edited module is compiled afresh (in memory, or written back where bytecode may be written)."""

from __future__ import annotations

import compileall
from pathlib import Path
from py_compile import PycInvalidationMode

from setuptools import setup
from setuptools.command.editable_wheel import editable_wheel


class compiled_editable_wheel(editable_wheel):
    def run(self) -> None:
        super().run()
        # A module it cannot write (a read-only checkout) is left to the launches, as before.
        # Checked against each source's mtime, as Python's own writes are (also where SOURCE_DATE_EPOCH is set,
        # which would make compileall hash every source at every import).
        compileall.compile_dir(
            Path(__file__).resolve().parent / "poolconsole", quiet=2, invalidation_mode=PycInvalidationMode.TIMESTAMP
        )


setup(cmdclass={"editable_wheel": compiled_editable_wheel})
