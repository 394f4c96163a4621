"""What a restart does to the gateway's callers, as the restart's and the rollover's confirmations say it: the
example pool's gateway routes qwen3-next-80b (one engine serves it) and gemma-3-27b-it; the two llama.cpp
engines both serve "tiny", which no gateway routes."""

from __future__ import annotations

from dataclasses import replace

from poolconsole.model.gateway import names, restart_effect
from poolconsole.model.pool_state import PoolState
from poolconsole.model.snapshots import EngineState
from tests.helpers import uipool


def pool(*, models: dict[str, tuple[str, ...]] | None = None, down: tuple[str, ...] = ()) -> PoolState:
    config = uipool.config()
    state = PoolState(config, uipool.clock)
    for snap in uipool.engine_snapshots(config):
        if models and snap.name in models:
            snap = replace(snap, models=models[snap.name])
        if snap.name in down:
            snap = replace(snap, state=EngineState.DOWN, error="connection refused")
        state.apply_engine(snap)
    return state


def test_an_engine_the_gateway_routes_alone_says_its_callers_get_errors() -> None:
    said = restart_effect(pool(), "qwen3-next-80b")
    assert said == [
        "gateway gateway routes qwen3-next-80b: no other engine in the pool serves it, so its callers get errors "
        "until qwen3-next-80b is back"
    ]


def test_another_engine_serving_the_routed_model_is_named() -> None:
    state = pool(models={"qwen3-30b-a3b": ("qwen3-next-80b",)})
    assert restart_effect(state, "qwen3-next-80b") == [
        "gateway gateway routes qwen3-next-80b: qwen3-30b-a3b serves it too (if gateway lists them)"
    ]
    down = pool(models={"qwen3-30b-a3b": ("qwen3-next-80b",)}, down=("qwen3-30b-a3b",))
    assert "no other engine in the pool serves it" in restart_effect(down, "qwen3-next-80b")[0]  # a down one is none


def test_unrouted_models_say_nothing_and_the_gateway_itself_names_its_models() -> None:
    state = pool()
    assert restart_effect(state, "deepseek-studio") == []  # "tiny": no gateway routes it
    assert restart_effect(state, "no-such-engine") == []
    assert restart_effect(state, "gateway") == [
        "gateway is a gateway: its callers get errors until it answers again "
        "(qwen3-next-80b, gemma-3-27b-it, retired-model)"
    ]
    quiet = pool(down=("gateway",))  # a gateway that is down routes nothing a restart could take away
    assert restart_effect(quiet, "qwen3-next-80b") == []


def test_many_engines_serving_the_model_are_named_a_few_then_counted() -> None:
    others = ("qwen3-30b-a3b", "gemma3-27b-nvfp4", "deepseek-studio", "qwen2.5-coder-3090")
    said = restart_effect(pool(models={n: ("qwen3-next-80b",) for n in others}), "qwen3-next-80b")
    assert said == [f"gateway gateway routes qwen3-next-80b: {', '.join(others)} serve it too (if gateway lists them)"]
    assert names(list("abcd")) == "a, b, c, d"  # four in full ("and 1 more" says no less)
    assert names(list("abcdef")) == "a, b, c and 3 more"  # at 1,000 engines dozens serve one model
