"""What an engine's series' labels decide, kept per layout (prometheus.layout, issue 39): a new scrape with
the same labels reads its values through the kept plan; a label that changed (not only a series more) makes
the layout again; two scrape targets under one selection and SGLang's duplicate TP ranks are told from the
labels as before."""

from __future__ import annotations

import tracemalloc
from typing import Any

from poolconsole.collect.engines.poll import SPEC
from poolconsole.collect.prometheus import layout as layout_module
from poolconsole.collect.prometheus.api import Answer, Series
from poolconsole.collect.prometheus.layout import layout_key, layout_of
from poolconsole.collect.prometheus.source import PrometheusAPI, PrometheusEnginePoller
from poolconsole.config import parse_config
from poolconsole.config.models import EngineKind
from poolconsole.model.snapshots import EngineState

NO_BATCH: Any = None  # only a stale target (up == 0) asks the batch for its scrape error


def poller(kind: str = "vllm") -> PrometheusEnginePoller:
    config = parse_config(
        '[prometheus]\nurl = "http://127.0.0.1:9"\n'
        f'[[engines]]\nname = "e"\nkind = "{kind}"\nurl = "http://127.0.0.1:8000"\nread = "prometheus"\n'
    )
    return PrometheusEnginePoller(config.engines[0], PrometheusAPI(config.prometheus))  # type: ignore[arg-type]


def read(at: float, *series: tuple[str, dict[str, str], float]) -> tuple[Answer, Answer]:
    values = tuple(Series.of({"__name__": name, **labels}, value, at + 1) for name, labels, value in series)
    return Answer(values, elapsed_s=0.01), Answer((Series.of({}, at, at + 1),), elapsed_s=0.01)


TARGET = {"instance": "127.0.0.1:8000", "job": "vllm"}


async def test_a_changed_label_makes_the_layout_again() -> None:
    engine = poller()
    try:
        first = await engine._snapshot(
            *read(1000.0, ("up", TARGET, 1), ("vllm:num_requests_running", {**TARGET, "model_name": "a"}, 2)),
            NO_BATCH,
        )
        kept = engine.seen.layout
        later = await engine._snapshot(
            *read(1005.0, ("up", TARGET, 1), ("vllm:num_requests_running", {**TARGET, "model_name": "a"}, 3)),
            NO_BATCH,
        )
        assert engine.seen.layout is kept  # the same labels: the same layout, new values
        assert first.models == later.models == ("a",)
        assert later.metrics is not None and later.metrics.values["requests_running"] == 3
        renamed = await engine._snapshot(
            *read(1010.0, ("up", TARGET, 1), ("vllm:num_requests_running", {**TARGET, "model_name": "b"}, 4)),
            NO_BATCH,
        )
        assert engine.seen.layout is not kept and renamed.models == ("b",)
        assert renamed.metrics is not None and renamed.metrics.values["requests_running"] == 4
    finally:
        await engine.aclose()


async def test_two_scrape_targets_under_one_selection_are_named() -> None:
    engine = poller()
    try:
        other = {"instance": "127.0.0.1:8000", "job": "vllm-copy"}
        both = await engine._snapshot(
            *read(1000.0, ("up", TARGET, 1), ("up", other, 1), ("vllm:num_requests_running", TARGET, 2)),
            NO_BATCH,
        )
        assert both.state is EngineState.DEGRADED
        assert both.error is not None and "matches 2 scrape targets (vllm/127.0.0.1:8000, vllm-copy/" in both.error
    finally:
        await engine.aclose()


async def test_sglang_ranks_past_the_first_are_skipped_as_on_its_page() -> None:
    engine = poller("sglang")
    try:
        ranks = [("sglang:num_running_reqs", {**TARGET, "tp_rank": str(r)}, 2.0) for r in range(4)]
        once = await engine._snapshot(*read(1000.0, ("up", TARGET, 1), *ranks), NO_BATCH)
        again = await engine._snapshot(*read(1005.0, ("up", TARGET, 1), *ranks), NO_BATCH)
        for snapshot in (once, again):
            assert snapshot.metrics is not None and snapshot.metrics.values["requests_running"] == 2.0
    finally:
        await engine.aclose()


def test_the_key_tells_labels_and_their_order_apart() -> None:
    a = (Series.of({"__name__": "x", "k": "1"}, 1.0, 0.0), Series.of({"__name__": "y", "k": "1"}, 1.0, 0.0))
    assert layout_key(a) == layout_key(tuple(Series.of(s.labels, 9.0, 5.0) for s in a))  # values and times: not read
    assert layout_key(a) != layout_key(a[::-1])
    assert layout_key(a) != layout_key((a[0], Series.of({"__name__": "y", "k": "2"}, 1.0, 0.0)))


def test_a_kept_layout_holds_no_more_memory_than_its_key() -> None:
    """A layout is kept per engine: its key is a copy of its own length, not orjson's bytes, which keep the
    buffer they were grown in (33 KB for a 2.9 KB key)."""
    labels = {**TARGET, "model_name": "qwen3-coder-30b-a3b-instruct-awq", "engine": "0"}
    series = tuple(Series.of({"__name__": f"vllm:family_{i:02d}", **labels}, 1.0, 0.0) for i in range(24))
    tracemalloc.start()
    try:
        kept = [layout_of(series, SPEC[EngineKind.VLLM], layout_key(series)) for _ in range(20)]
        traced = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(True, layout_module.__file__)])
    finally:
        tracemalloc.stop()
    keys = sum(len(layout.key) for layout in kept)
    assert keys > 20 * 2000 and sum(stat.size for stat in traced.statistics("filename")) < 2 * keys
