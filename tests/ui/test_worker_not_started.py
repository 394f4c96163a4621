"""A worker cancelled before it starts (an exclusive one replaced at once, or one the quit cancels) leaves no
coroutine that was never awaited: Python would print a RuntimeWarning on the operator's terminal when the
collector finds it. The console hands Textual the worker's function, not a coroutine made in advance."""

from __future__ import annotations

import gc
import warnings
from pathlib import Path

from tests.helpers import bigpool
from tests.ui.test_overview_scale import big_app


async def test_a_fill_replaced_before_it_starts_leaves_no_coroutine_unawaited(tmp_path: Path) -> None:
    app = big_app(tmp_path, bigpool.config(4))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        async with app.run_test(size=(80, 24)):
            until = app.state.clock()
            for _ in range(3):  # exclusive: each replaces the last before it ran
                app.history._fill(None, until)
            app.history.load_audit(tmp_path / "audit.jsonl")
            app.history.load_audit(tmp_path / "audit.jsonl")
        gc.collect()
    unawaited = [str(w.message) for w in caught if "never awaited" in str(w.message)]
    assert not unawaited, unawaited
