"""The selection's own pieces (collect.prom_select), against the plain definitions they stand for."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from poolconsole.collect.prom_select import _begins_one

NAMES = st.text(alphabet="ab_:", max_size=6)


@given(st.lists(NAMES, max_size=8), NAMES)
def test_a_name_beginning_with_a_stem_is_found_by_search(names: list[str], stem: str) -> None:
    """_begins_one (a search of the sorted names) says what a scan of every name says."""
    in_order = tuple(sorted(set(names)))
    assert _begins_one(in_order, stem) == any(name.startswith(stem) for name in in_order)
