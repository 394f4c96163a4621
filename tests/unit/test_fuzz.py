"""Any bytes into any parser give a result or a typed ParseError, never another exception."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from poolconsole.collect.engines import jsonparse, specs
from poolconsole.collect.engines.mapping import parse_metrics
from poolconsole.collect.hosts import nvidia_smi, systems
from poolconsole.collect.prom import ParseError
from tests.conftest import REAL

SEED_METRICS = [
    (REAL / "vllm-0.32.0-cpu" / "metrics.load.txt").read_bytes()[:4000],
    (REAL / "llamacpp-b1-0c1e570" / "metrics-after-requests.txt").read_bytes(),
]

PARSERS: list[Callable[[bytes], Any]] = [
    lambda b: parse_metrics(b, specs.VLLM),
    lambda b: parse_metrics(b, specs.SGLANG),
    lambda b: parse_metrics(b, specs.LLAMACPP),
    jsonparse.parse_models,
    jsonparse.parse_slots,
    jsonparse.parse_ollama_ps,
    jsonparse.parse_ollama_tags,
    jsonparse.parse_version,
    jsonparse.parse_props_build,
    jsonparse.parse_litellm_liveliness,
    jsonparse.parse_litellm_readiness,
    jsonparse.parse_litellm_health,
    lambda b: systems.parse_amd_smi(b.decode("utf-8", "replace")),
    lambda b: systems.parse_rocm_smi(b.decode("utf-8", "replace")),
    lambda b: systems.parse_macmon(b.decode("utf-8", "replace")),
    lambda b: nvidia_smi.parse_query_gpu(b.decode("utf-8", "replace"), nvidia_smi.FULL_FIELDS),
]


def mutated() -> st.SearchStrategy[bytes]:
    """Real payloads cut, spliced and sprinkled with random bytes, plus pure noise."""
    real = st.sampled_from(SEED_METRICS)

    def mutate(data: bytes, cut: int, noise: bytes, pos: int) -> bytes:
        cut = cut % (len(data) + 1)
        pos = pos % (cut + 1)
        return data[:pos] + noise + data[pos:cut]

    return st.one_of(
        st.binary(max_size=2000),
        st.builds(mutate, real, st.integers(0, 10_000), st.binary(max_size=40), st.integers(0, 10_000)),
        st.text(max_size=500).map(lambda t: t.encode()),
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
            lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4),
            max_leaves=20,
        ).map(lambda v: __import__("json").dumps(v).encode()),
    )


@pytest.mark.parametrize("index", range(len(PARSERS)))
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=mutated())
def test_parsers_never_crash(index: int, data: bytes) -> None:
    with contextlib.suppress(ParseError):
        PARSERS[index](data)
