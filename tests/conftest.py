from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

# In CI the property tests draw the same examples every run: a new disagreement they stumble on by chance
# would turn a clean checkout red for a change that did not cause it. Exploring is benchmarks/fuzz.py's job,
# and a developer's run (CI unset) still draws new examples.
settings.register_profile("ci", derandomize=True, database=None)
if os.environ.get("CI"):
    settings.load_profile("ci")

FIXTURES = Path(__file__).parent / "fixtures"
REAL = FIXTURES / "real"


@pytest.fixture
def real() -> Path:
    return REAL
