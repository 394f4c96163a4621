"""The history store's writer and a poll of the same view again (an engine read from Prometheus between two
scrapes, issue 39): the row at its own time holds the same bytes, encoded once."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from poolconsole.runtime.store import Reader, Store, codec
from poolconsole.runtime.store import writer as store_writer
from tests.integration.test_store import sample_view


def test_the_same_view_again_is_stored_without_encoding_it_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An engine read from Prometheus between two scrapes is applied again as the same view: its row at its
    own time holds the same bytes, encoded once; other totals, or another view, are encoded."""
    encoded: list[str] = []
    real = codec.poll_json

    def counting(item: Any, totals: Any) -> bytes:
        encoded.append(item.name)
        return real(item, totals)

    monkeypatch.setattr(store_writer, "poll_json", counting)
    view = sample_view()
    path = tmp_path / "history.sqlite3"
    store = Store(path, background=False)
    t0 = time.time()
    store.engine(view, {"generation_tokens_total": 5.0}, t0)
    store.engine(view, {"generation_tokens_total": 5.0}, t0 + 2)
    store.flush()
    store.engine(view, {"generation_tokens_total": 5.0}, t0 + 4)  # the next commit still knows it
    store.engine(view, {"generation_tokens_total": 9.0}, t0 + 6)
    store.engine(replace(view), {"generation_tokens_total": 9.0}, t0 + 8)
    store.close()
    assert len(encoded) == 3
    with Reader(path) as reader:
        rows = list(reader.rows())
    assert [row.at for row in rows] == [t0 + 2 * i for i in range(5)]
    assert rows[0].values == rows[1].values == rows[2].values
    assert [row.values["totals"] for row in rows] == [{"generation_tokens_total": v} for v in (5.0, 5.0, 5.0, 9.0, 9.0)]
