"""An answer matched by instance is sliced per engine in one walk (prometheus.source.sliced) into what the
general slice (by instance, then engine_slice by name) gives: the same two vectors for every engine, whatever
kinds the group mixes and whichever series Prometheus answered for them."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from poolconsole.collect.engines.poll import SPEC
from poolconsole.collect.prometheus.api import Series
from poolconsole.collect.prometheus.queries import SCRAPE_OF, running_families
from poolconsole.collect.prometheus.source import _names_of, by_instance, engine_slice, sliced
from poolconsole.config.models import Engine, EngineKind


def prometheus_kinds() -> list[EngineKind]:
    """The kinds with a metric spec: those a Prometheus can hold."""
    return sorted(SPEC, key=str)


@st.composite
def groups(draw: st.DrawFn) -> tuple[dict[int, Engine], list[Series]]:
    """A group's engines (one kind or several) and an answer for them: for each engine some of its kind's
    families and `up`, and some of its scrape times, in any order; an instance may have no series at all."""
    chosen = draw(st.lists(st.sampled_from(prometheus_kinds()), min_size=1, max_size=3, unique=True))
    count = draw(st.integers(1, 6))
    members = {
        key: Engine(
            name=f"e{key}", kind=draw(st.sampled_from(chosen)), url=f"http://10.0.0.{key}:8000", read="prometheus"
        )
        for key in range(count)
    }
    kinds = {e.kind for e in members.values()}  # the group's: its query asks for theirs alone
    asked = sorted({n for k in kinds for n in _names_of(k)[0]})  # the names batch_expression asks for
    stamp_families = sorted({f for k in kinds for f in running_families(k)})
    series: list[Series] = []
    for engine in members.values():
        for name in draw(st.lists(st.sampled_from(asked), max_size=6)):
            labels = {"__name__": name, "instance": engine.instance, "job": "j"}
            if draw(st.booleans()):
                labels["model_name"] = draw(st.sampled_from(["a", "b"]))
            series.append(Series.of(labels, draw(st.floats(0, 1e6)), 1.0))
        for family in draw(st.lists(st.sampled_from(stamp_families), max_size=3)):
            labels = {"instance": engine.instance, "job": "j", SCRAPE_OF: family}
            series.append(Series.of(labels, draw(st.floats(1e9, 2e9)), 2.0))
    return members, draw(st.permutations(series))


@settings(max_examples=300, deadline=None)
@given(groups())
def test_the_one_walk_slices_as_the_general_slice(group: tuple[dict[int, Engine], list[Series]]) -> None:
    members, series = group
    read = by_instance(series)
    general = {k: engine_slice(e, read.get(e.instance, ()), 0.01) for k, e in members.items()}
    assert sliced(members, members, series, 0.01) == general
