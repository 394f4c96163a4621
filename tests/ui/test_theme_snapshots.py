"""The overview in every theme of themes/ (issue 18 item 7) at 80x24, 120x40 and 200x50, from the
deterministic capture-based pool with a fixed clock: a colour mistake in a non-default theme fails here,
not only one that breaks the default. (Update with `scripts/test.sh tests/ui/test_theme_snapshots.py
--snapshot-update`, then look at every changed SVG.)"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from poolconsole.ui import themes
from poolconsole.ui.app import PoolApp
from tests.helpers import uipool
from tests.ui.test_snapshots import keys

SIZES = [(80, 24), (120, 40), (200, 50)]
THEMES = [t.name for t in themes.load_themes()]


def test_every_theme_is_snapshotted() -> None:
    assert sorted(THEMES) == ["pool-colorblind", "pool-dark", "pool-high-contrast", "pool-light"]


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("theme", THEMES)
def test_overview_theme(snap_compare: Any, tmp_path: Path, theme: str, size: tuple[int, int]) -> None:
    state = tmp_path / "ui.json"
    state.write_text(json.dumps({"theme": theme}))  # remembered: the console opens in it
    app = PoolApp(uipool.config(), live=False, clock=uipool.clock, theme_state=state, subtitle="snapshot pool")
    assert snap_compare(app, terminal_size=size, run_before=keys())
