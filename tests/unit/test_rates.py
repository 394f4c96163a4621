"""Histogram deltas between two polls: the pairwise path (same bounds) and the general one agree."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from poolconsole.model.rates import histogram_delta, quantile
from poolconsole.model.snapshots import Histogram

BOUNDS = (0.01, 0.1, 1.0, math.inf)


def cumulative(counts: list[float]) -> Histogram:
    running, buckets = 0.0, []
    for bound, count in zip(BOUNDS, counts, strict=True):
        running += count
        buckets.append((bound, running))
    return Histogram(tuple(buckets), running * 0.5, running)


def by_dict(before: Histogram, after: Histogram) -> tuple[tuple[float, float], ...]:
    prev = dict(before.buckets)
    return tuple((le, max(0.0, c - prev.get(le, 0.0))) for le, c in after.buckets)


counts = st.lists(st.floats(0, 1e6), min_size=4, max_size=4)


@given(counts, counts)
def test_same_bounds_pairwise_equals_by_bound(a: list[float], extra: list[float]) -> None:
    before = cumulative(a)
    after = cumulative([x + y for x, y in zip(a, extra, strict=True)])
    delta = histogram_delta(before, after, reset=False)
    assert delta.buckets == by_dict(before, after)
    assert delta.count == after.count - before.count


def test_reset_and_changed_bounds() -> None:
    before = cumulative([5, 5, 5, 5])
    after = cumulative([1, 0, 0, 0])
    assert histogram_delta(before, after, reset=False) == after  # the count went down: a restart
    assert histogram_delta(before, cumulative([6, 5, 5, 5]), reset=True).count == 21
    other = Histogram(((0.5, 3.0), (math.inf, 4.0)), 1.0, 4.0)  # other bounds: matched by bound
    delta = histogram_delta(Histogram(((0.5, 1.0), (math.inf, 1.0)), 0.2, 1.0), other, reset=False)
    assert delta.buckets == ((0.5, 2.0), (math.inf, 3.0)) and delta.count == 3.0
    assert quantile(0.5, delta) == 0.375  # rank 1.5 of 2 in the first bucket: 0.5 * 1.5 / 2


def test_running_totals_are_monotonic_across_restarts_and_gaps() -> None:
    """What an exporter serves as a counter: it starts at the engine's value and only grows."""
    from types import MappingProxyType

    from poolconsole.config import parse_config
    from poolconsole.config.models import EngineKind
    from poolconsole.model.pool_state import PoolState
    from poolconsole.model.snapshots import EngineMetrics, EngineSnapshot, EngineState

    config = parse_config('[[engines]]\nname = "e"\nkind = "vllm"\nurl = "http://127.0.0.1:1"\n')
    state = PoolState(config)

    def snap(at: float, generated: float | None) -> EngineSnapshot:
        metrics = (
            None
            if generated is None
            else EngineMetrics(MappingProxyType({"generation_tokens_total": generated}), MappingProxyType({}), (), ())
        )
        return EngineSnapshot(
            "e", EngineKind.VLLM, "http://x", None, at, at, EngineState.OK if metrics else EngineState.DOWN, None, "",
            None, None, (), metrics,
        )  # fmt: skip

    seen = []
    for at, value in ((0, 1000.0), (1, 1100.0), (2, None), (3, None), (4, 40.0), (5, 90.0)):
        state.apply_engine(snap(at, value))
        seen.append(state.engines["e"].totals.get("generation_tokens_total"))
    assert seen == [1000.0, 1100.0, 1100.0, 1100.0, 1140.0, 1190.0]  # the restart's 40 counted, never a drop
