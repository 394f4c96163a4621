"""parse_vector's one pass (msgspec, straight into the series) reads every answer as the general reader
(`_parse_any`, orjson's objects walked in Python) does: the same series, or the same error."""

from __future__ import annotations

import json
import math
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from poolconsole.collect.prometheus import api
from poolconsole.collect.prometheus.api import Series, _parse_any, parse_vector
from tests.conftest import REAL

PROM = REAL / "prometheus-2.42"


def outcome(read: Any, body: bytes) -> tuple[str, Any]:
    try:
        found = read(body)
    except (ValueError, KeyError, TypeError, IndexError) as exc:  # what PrometheusAPI.query turns into words
        return "error", (type(exc).__name__, str(exc))
    # NaN is not equal to itself: compare the values' text
    return "series", [(s.labels, repr(s.value), repr(s.at)) for s in found]


def answer(result: Any, *, status: str = "success", kind: str = "vector") -> bytes:
    return json.dumps({"status": status, "data": {"resultType": kind, "result": result}}).encode()


def test_the_real_answers_are_decoded_in_one_pass_to_what_the_general_reader_gives(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bodies = [(PROM / name).read_bytes() for name in ("query-tokens_predicted_total.json", "query-up.json")]
    bodies += [line.encode() for line in (PROM / "queries-after-litellm-load.jsonl").read_text().splitlines()]
    general: list[bytes] = []

    def counted(body: bytes) -> tuple[Series, ...]:
        general.append(body)
        return _parse_any(body)

    monkeypatch.setattr(api, "_parse_any", counted)
    for body in bodies:
        assert outcome(parse_vector, body) == outcome(_parse_any, body)
    assert general == []  # none of Prometheus' own answers needed the general reader
    [series] = parse_vector(bodies[0])
    assert isinstance(series, Series) and series.labels["job"] == "llamacpp"
    assert series.sample == (1795992240.164, 250.0)


def test_what_the_one_pass_refuses_is_read_by_the_general_reader() -> None:
    scalar = json.dumps({"status": "success", "data": {"resultType": "scalar", "result": [5.0, "2"]}}).encode()
    assert outcome(parse_vector, scalar) == ("series", [({}, "2.0", "5.0")])
    plus_inf = answer([{"metric": {"__name__": "x"}, "value": [1.0, "+Inf"]}])  # msgspec reads "+Inf" as no float
    assert outcome(parse_vector, plus_inf) == ("series", [({"__name__": "x"}, "inf", "1.0")])
    number = answer([{"metric": {"le": 1}, "value": [1.0, "3"]}])  # a label that is not a string: made one
    assert outcome(parse_vector, number) == ("series", [({"le": "1"}, "3.0", "1.0")])
    matrix = ("error", ("ValueError", "expected an instant vector, got 'matrix'"))
    assert outcome(parse_vector, answer([], kind="matrix")) == matrix
    refused = b'{"status":"error","errorType":"bad_data","error":"parse error"}'
    assert outcome(parse_vector, refused) == ("error", ("ValueError", "not a successful Prometheus query answer"))
    assert outcome(parse_vector, b"<html>")[0] == "error"


VALUES = st.one_of(
    st.sampled_from(["NaN", "+Inf", "-Inf", "Inf", "inf", "nan", "1e3", "1_000", " 5", "0x10", "", "1.5e+09", "-0"]),
    st.floats(allow_nan=False).map(repr),
    st.text(alphabet="0123456789.eE+-_ naifNI", max_size=8),
    st.integers(-(10**20), 10**20),
    st.booleans(),
    st.none(),
)
LABELS = st.dictionaries(
    st.text(max_size=6), st.one_of(st.text(max_size=6), st.integers(0, 9), st.booleans(), st.none()), max_size=3
)
ITEMS = st.fixed_dictionaries(
    {"metric": st.one_of(LABELS, st.lists(st.text(max_size=3), max_size=2)), "value": st.lists(VALUES, max_size=3)}
)


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.one_of(ITEMS, st.fixed_dictionaries({"metric": LABELS})), max_size=4),
    st.sampled_from(["vector", "scalar", "matrix"]),
    st.sampled_from(["success", "error"]),
)
def test_any_answer_is_read_as_the_general_reader_reads_it(result: list[Any], kind: str, status: str) -> None:
    body = answer(result, status=status, kind=kind)
    assert outcome(parse_vector, body) == outcome(_parse_any, body)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(LABELS.map(lambda d: {str(k): str(v) for k, v in d.items()}), st.floats(), st.floats())))
def test_a_vector_of_strings_and_floats_is_read_in_one_pass(rows: list[tuple[dict[str, str], float, float]]) -> None:
    """Prometheus' own answers (string labels, values as Go writes floats) never need the general reader."""
    go = {math.inf: "+Inf", -math.inf: "-Inf"}
    result = [
        {"metric": labels, "value": [at if math.isfinite(at) else 0.0, go.get(value, repr(value))]}
        for labels, value, at in rows
    ]
    body = answer(result)
    try:
        fast = api._VECTOR.decode(body).data.result
    except msgspec.ValidationError:
        fast = None
    if fast is not None:  # "+Inf" goes to the general reader; every other value is read here
        assert [(s.labels, repr(s.value)) for s in fast] == [(s.labels, repr(s.value)) for s in _parse_any(body)]
    else:
        assert any(math.isinf(value) and value > 0 for _, value, _ in rows)
