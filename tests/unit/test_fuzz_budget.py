"""CI's short budget of benchmarks/fuzz.py (issue 35, deliverable 2): every target, a few seconds or a few
thousand inputs each (whichever ends first; about 50 s for all on 2 cores), and not one crash. The long run's
counts are in BENCHMARKS.md. No clock is asserted: the time only bounds how much is tried."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _fuzz() -> ModuleType:
    spec = importlib.util.spec_from_file_location("poolconsole_fuzz", ROOT / "benchmarks" / "fuzz.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


FUZZ = _fuzz()
TARGETS = FUZZ.targets()


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_a_short_fuzz_budget_finds_no_crash(name: str) -> None:
    result = FUZZ.run_target(TARGETS[name], count=5000, seconds=2.5, seed=35, hang_s=0)
    assert result.inputs > 0
    assert result.crashes == 0, "\n".join(result.examples)


def test_the_driver_says_what_it_ran(capsys: pytest.CaptureFixture[str]) -> None:
    assert FUZZ.main(["--target", "meminfo", "--count", "50"]) == 0
    out = capsys.readouterr().out
    assert "meminfo" in out and " 50 " in out and "crashes" in out
