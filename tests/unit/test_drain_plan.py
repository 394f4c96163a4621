"""workflows.drain without a network: which gateways stand in front of an engine and who else answers its
models, what the Plan says beforehand, and the gateway's router settings read from LiteLLM's own reply."""

from __future__ import annotations

import json
from pathlib import Path

from poolconsole.config import parse_config
from poolconsole.config.models import Engine, PoolConfig
from poolconsole.workflows import drain
from poolconsole.workflows.restart import plan as restart_plan
from poolconsole.workflows.workspace import Workspace

POOL = """
[[hosts]]
name = "box"
address = "127.0.0.1"

[[engines]]
name = "gw"
kind = "litellm"
url = "http://127.0.0.1:9"

[[engines]]
name = "a"
kind = "llamacpp"
url = "http://127.0.0.1:10"
host = "box"
model = "tiny"
[engines.control]
backend = "supervisor"
name = "a"

[[engines]]
name = "b"
kind = "llamacpp"
url = "http://127.0.0.1:11"
host = "box"
model = "tiny"

[[engines]]
name = "c"
kind = "llamacpp"
url = "http://127.0.0.1:12"
host = "box"
model = "big"
degrade_to = "b"
[engines.control]
backend = "supervisor"
name = "c"

[[engines]]
name = "d"
kind = "llamacpp"
url = "http://127.0.0.1:13"
host = "box"
model = "lonely"
[engines.control]
backend = "supervisor"
name = "d"
"""


def config(text: str = POOL) -> PoolConfig:
    return parse_config(text)


def engine(cfg: PoolConfig, name: str) -> Engine:
    return next(e for e in cfg.engines if e.name == name)


def test_another_engine_serving_the_model_covers_it() -> None:
    cfg = config()
    assert drain.covers(cfg, None, engine(cfg, "a")) == [drain.Cover("gw", "tiny", ("b",), None)]
    assert drain.covers(cfg, None, engine(cfg, "c")) == [drain.Cover("gw", "big", (), "b")]
    assert drain.covers(cfg, None, engine(cfg, "gw")) == []


def test_no_gateway_no_drain() -> None:
    cfg = config(POOL.replace('kind = "litellm"', 'kind = "vllm"'))
    assert drain.covers(cfg, None, engine(cfg, "a")) == []
    assert drain.plan_lines(cfg, None, engine(cfg, "a")) == []


def test_the_plan_says_the_mechanism_and_the_settings_beforehand(tmp_path: Path) -> None:
    cfg = config()
    text = restart_plan(Workspace(cfg, tmp_path / "audit.sqlite3"), "a").text()
    said = "\n".join(text)
    assert "cannot take one deployment out of routing" in said
    assert "num_retries: 3" in said and "cooldown_time: 30" in said
    assert "fallbacks: [{tiny: [tiny-spare]}]" in said
    assert "send tiny's callers to b" in said


def test_an_engine_alone_behind_the_gateway_says_its_callers_get_errors() -> None:
    cfg = config()
    lines = drain.plan_lines(cfg, None, engine(cfg, "d"))
    assert lines == [
        "drain: gateway gw routes lonely to d alone: its callers get errors until it is back (add another "
        "deployment of lonely, or set degrade_to)"
    ]


def test_router_settings_from_litellm_1_108_7() -> None:
    body = {
        "fields": [
            {"field_name": "num_retries", "field_value": 2},
            {"field_name": "fallbacks", "field_value": [{"tiny": ["tiny-spare"]}]},
            {"field_name": "allowed_fails", "field_value": 1},
            {"field_name": "cooldown_time", "field_value": 20},
        ]
    }
    assert drain.parse_router_settings(json.loads(json.dumps(body))) == drain.RouterSettings(2, ("tiny",), 1, 20.0)
    assert drain.parse_router_settings({"detail": "Not Found"}) is None
    odd = json.loads('{"fields": [{"field_name": "num_retries", "field_value": Infinity}, "x"]}')
    assert drain.parse_router_settings(odd) == drain.RouterSettings(None, (), None, None)
    nothing = {"fields": [{"field_name": "fallbacks", "field_value": None}]}
    assert drain.parse_router_settings(nothing) == drain.RouterSettings(None, (), None, None)


def test_what_the_callers_see_follows_the_settings() -> None:
    cover = drain.Cover("gw", "tiny", ("b",))
    none = drain.RouterSettings(0, (), None, None)
    assert "neither retries nor falls back" in drain.callers_see(cover, none)
    assert "3 retries and a fallback" in drain.callers_see(cover, drain.RouterSettings(3, ("tiny",), 1, 30))
    assert "unread" in drain.callers_see(cover, None)
    alone = drain.Cover("gw", "lonely", ())
    assert "get errors until" in drain.callers_see(alone, drain.RouterSettings(3, (), 1, 30))


async def test_the_drain_says_the_callers_outlook_and_waits_only_for_an_operator() -> None:
    """An operator's restart waits for the engine's requests (here it does not answer: said, not waited
    for); the watcher's does not wait (a stalled engine's requests never finish). Nothing listens on the
    gateway's or the engine's port: the settings are unread and said so."""
    cfg = config()
    said: list[str] = []
    assert await drain.before(cfg, engine(cfg, "a"), said.append) is True
    assert said[0] == "drain: tiny: gateway gw's router settings unread: whether callers see errors is unknown"
    assert any("does not say what it runs" in line for line in said), said
    automatic: list[str] = []
    assert await drain.before(cfg, engine(cfg, "a"), automatic.append, wait=False) is True
    assert automatic == said[:1]
    assert await drain.before(cfg, engine(cfg, "gw"), automatic.append) is False


def test_a_degrade_to_engine_is_named_by_its_model_in_the_fallbacks() -> None:
    cfg = config()
    said = "\n".join(str(line) for line in drain.plan_lines(cfg, None, engine(cfg, "c")))
    assert "fallbacks: [{big: [tiny]}]" in said, said
    assert "send big's callers to b (its degrade_to, through fallbacks)" in said


def test_the_watchers_plan_does_not_promise_to_wait_for_the_requests() -> None:
    """The watcher's action does not wait for a stalled or dead engine's requests (`before(wait=False)`):
    its plan, which the notification and the audit carry, says it acts at once."""
    cfg = config()
    operator = "\n".join(str(line) for line in drain.plan_lines(cfg, None, engine(cfg, "c")))
    watcher = "\n".join(str(line) for line in drain.plan_lines(cfg, None, engine(cfg, "c"), waits=False))
    assert "c finishes its requests first, then the gateway gw's retries" in operator
    assert "finishes its requests" not in watcher
    assert "acting at once, the gateway gw's retries and fallbacks send big's callers" in watcher
