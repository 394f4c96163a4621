"""The rollups' rules are held to the models' fields: a field added to the engine view, the host snapshot or
what it nests fails here until runtime/store/rollup.py says how a minute of it becomes one value."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import pytest

from poolconsole.model.hosts import GpuProcess, GpuReading, HostSnapshot, HostState, SystemMemory
from poolconsole.model.view import EngineView
from poolconsole.runtime.store.rollup import (
    ENGINE_RULES,
    GPU_RULES,
    HOST_RULES,
    MEMORY_RULES,
    PROCESS_RULES,
    Rule,
    rollup,
)

MODELS: list[tuple[str, set[str], Mapping[str, Rule]]] = [
    ("EngineView (+ the stored totals)", {f.name for f in dataclasses.fields(EngineView)} | {"totals"}, ENGINE_RULES),
    ("HostSnapshot.to_json", set(HostSnapshot("", "", HostState.OK).to_json()), HOST_RULES),
    ("GpuReading", {f.name for f in dataclasses.fields(GpuReading)}, GPU_RULES),
    ("SystemMemory", {f.name for f in dataclasses.fields(SystemMemory)}, MEMORY_RULES),
    ("GpuProcess", {f.name for f in dataclasses.fields(GpuProcess)}, PROCESS_RULES),
]


@pytest.mark.parametrize(("model", "fields", "rules"), MODELS, ids=[m for m, _, _ in MODELS])
def test_every_field_of_a_stored_model_has_a_rollup_rule(
    model: str, fields: set[str], rules: Mapping[str, Rule]
) -> None:
    assert sorted(fields - set(rules)) == [], f"{model}: give these fields a rule in runtime/store/rollup.py"
    assert sorted(set(rules) - fields) == [], f"{model}: rules for fields it no longer has"


def test_a_minute_rolls_up_by_the_rules() -> None:
    """Gauges averaged by weight, counters and timestamps the last, increases and resets summed, the running
    totals and details whole from the last poll, the worst state with its error."""
    first = {
        "kv_cache_usage": 0.2,
        "generation_tokens_total": 100.0,
        "polled_at": 1.0,
        "counter_resets": 0,
        "increase": {"generation_tokens": 10.0},
        "totals": {"generation_tokens": 100.0},
        "state": "down",
        "error": "refused",
    }
    second = {
        "kv_cache_usage": 0.5,
        "generation_tokens_total": 130.0,
        "polled_at": 2.0,
        "counter_resets": 1,
        "increase": {"generation_tokens": 30.0},
        "totals": {"generation_tokens": 130.0},
        "state": "ok",
        "error": None,
    }
    out = rollup([(first, 1), (second, 2)])
    assert out["kv_cache_usage"] == pytest.approx(0.4)
    assert out["generation_tokens_total"] == 130.0 and out["polled_at"] == 2.0
    assert out["counter_resets"] == 1 and out["increase"] == {"generation_tokens": 40.0}
    assert out["totals"] == {"generation_tokens": 130.0}
    assert (out["state"], out["error"]) == ("down", "refused")
