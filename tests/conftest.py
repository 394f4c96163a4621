from __future__ import annotations

from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
REAL = FIXTURES / "real"


@pytest.fixture
def real() -> Path:
    return REAL
