#!/usr/bin/env python3
"""Regenerate tests/fixtures/golden/ from tests/fixtures/real/ (issue 35): every capture's normalized
`status --json` view, one JSON file per capture; orphaned golden files are removed. Review the diff
(`git diff tests/fixtures/golden`) before committing: a changed value is a changed mapping or parser."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.unit.test_golden import GOLDEN, unaccounted, write_all  # noqa: E402


def main() -> int:
    missing = unaccounted()
    if missing:
        print("captures neither normalized nor listed in NOT_NORMALIZED:", *missing, sep="\n  ", file=sys.stderr)
        return 1
    written = write_all()
    print(f"{len(written)} golden files under {GOLDEN.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
