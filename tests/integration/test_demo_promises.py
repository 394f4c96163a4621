"""The demo shows what the README promises (issue 34, item 5): every demo profile carries the model's KV
figures, so `plan` and the fit check estimate weights + KV cache; the big engines name a smaller degrade_to,
which the degrade hint names when they queue; the simulated engines honour `tools` and `response_format`, so
the smoke test's tool_call and json checks run on the demo and pass, in the OpenAI format the SDK parses."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import openai
import pytest

from poolconsole import cli
from poolconsole.collect.engines import specs
from poolconsole.config import PoolConfig, parse_config
from poolconsole.model.gateway import degrade_hints
from poolconsole.model.pool_state import PoolState
from poolconsole.ops.fit import Verdict, fit, live_memory
from poolconsole.ops.planning import poll_hosts
from poolconsole.ops.smoke.checks import WEATHER_TOOL
from poolconsole.ops.smoke.runner import SmokeOptions, run_smoke
from poolconsole.sim.demo import SimPool
from tests.helpers import uipool

CHAT_ENGINES = ("qwen3-next-80b", "gemma3-27b-nvfp4", "qwen2.5-coder-3090")
"""One of each kind that answers chat: vLLM, SGLang, llama.cpp."""


@pytest.fixture
async def demo(tmp_path: Path) -> AsyncIterator[tuple[SimPool, Path, PoolConfig]]:
    pool = SimPool(seed=7)
    await pool.start(tmp_path / "keys")  # with its SSH hosts: the config then carries the profiles
    try:
        await pool.wait_ready()
        path = tmp_path / "demo.toml"
        path.write_text(pool.config_toml())
        yield pool, path, parse_config(path.read_text(), str(path))
    finally:
        await pool.stop()


async def test_plan_estimates_the_kv_cache_of_every_demo_profile(
    demo: tuple[SimPool, Path, PoolConfig], capsys: pytest.CaptureFixture[str]
) -> None:
    _, path, config = demo
    profiles = [(e.name, p.name) for e in config.engines for p in e.profiles]
    assert len(profiles) >= 16
    capsys.readouterr()
    code = await asyncio.to_thread(cli.main, ["plan", "--offline", "--config", str(path)])
    out = capsys.readouterr().out
    assert code == 0, out[-2000:]
    assert "not estimated" not in out, out
    for engine_name, profile_name in profiles:
        # the line after each profile's head: weights + KV + overhead, the KV a figure
        head = re.search(rf"^ *{re.escape(engine_name)} / {re.escape(profile_name)}: .*\n(.*)$", out, re.MULTILINE)
        assert head is not None, (engine_name, profile_name, out[-3000:])
        assert re.search(r"\+ KV \d+\.\d GiB \(max_model_len x max_num_seqs\)", head.group(1)), head.group(1)
    # against the live pool, the KV estimate included, every profile fits but the one meant not to
    snapshots = await poll_hosts(config, {h.name for h in config.hosts})
    verdicts = {}
    for engine in config.engines:
        assert engine.host is not None
        live = live_memory(snapshots[engine.host], engine, 0.0)
        for profile in engine.profiles:
            report = fit(engine, profile, config.host(engine.host), live)
            assert report.kv_gib is not None and report.kv_unknown is None and report.kv_tokens is not None
            verdicts[engine.name, profile.name] = report.verdict
    assert {k for k, v in verdicts.items() if v is not Verdict.FITS} == {("qwen3-next-80b", "bf16-tp4")}, verdicts


async def test_an_engine_that_queues_names_its_degrade_target(demo: tuple[SimPool, Path, PoolConfig]) -> None:
    _, _, config = demo
    degrade = {e.name: e.degrade_to for e in config.engines if e.degrade_to is not None}
    assert degrade.get("qwen3-next-80b") == "qwen3-30b-a3b", degrade
    # no demo scenario queues an engine: a vLLM capture taken under load (8 waiting) stands in for its poll
    state = PoolState(config, uipool.clock)
    for name, capture in (("qwen3-next-80b", "metrics.load.txt"), ("qwen3-30b-a3b", "metrics.idle.txt")):
        engine = next(e for e in config.engines if e.name == name)
        body = (uipool.VLLM / capture).read_bytes()
        state.apply_engine(
            uipool._engine(name, "vllm", engine.url, engine.host, uipool.T0, body, specs.VLLM, (name,), "0.11.2")
        )
    hints = degrade_hints(state)
    assert hints == [
        "qwen3-next-80b: 8 waiting: send non-critical traffic to qwen3-30b-a3b on qwen3-30b-a3b (0 waiting there)"
    ]


async def test_the_smoke_tool_call_and_json_checks_run_and_pass_on_the_demo(
    demo: tuple[SimPool, Path, PoolConfig],
) -> None:
    _, _, config = demo
    for name in CHAT_ENGINES:
        engine = next(e for e in config.engines if e.name == name)
        assert engine.smoke.tools and engine.smoke.json_schema, name
    results, _ = await run_smoke(config, SmokeOptions(targets=CHAT_ENGINES, requests=1, seed=1, total_s=30.0))
    checks = {(r.target, r.check): r for r in results}
    for name in CHAT_ENGINES:
        for check in ("tool_call", "json"):
            result = checks.get((name, check))
            assert result is not None, f"{name} {check} did not run: {sorted(checks)}"
            assert result.passed, (name, check, result.reason)
        assert checks[name, "tool_call"].reason == 'get_weather({"city": "Paris"})'
    assert all(r.passed for r in results), [(r.target, r.check, r.reason) for r in results if not r.passed]


async def test_tool_calls_and_json_in_the_openai_shape_streamed_and_not(demo: tuple[SimPool, Path, PoolConfig]) -> None:
    """What the SDK parses: tool_calls with id, type and function {name, arguments (a JSON string satisfying the
    parameters schema)}, finish_reason tool_calls; streamed, the deltas join to the same; JSON under a schema."""
    pool, _, _ = demo
    tool = {
        "type": "function",
        "function": {
            "name": "book",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "minLength": 2},
                    "nights": {"type": "integer", "minimum": 5},
                    "rooms": {
                        "type": "array",
                        "items": {"type": "string", "enum": ["double", "single"]},
                        "minItems": 2,
                    },
                    "pets": {"type": "boolean"},
                    "note": {"type": "string"},
                },
                "required": ["city", "nights", "rooms", "pets"],
            },
        },
    }
    for name in CHAT_ENGINES:
        engine = pool.engines[name]
        client = openai.AsyncOpenAI(base_url=engine.url + "/v1", api_key="none", max_retries=0)
        chat: Any = client.chat.completions  # plain dicts in, the SDK's parsed models out
        try:
            model = engine.spec.models[0]
            messages = [{"role": "user", "content": "Book it."}]
            reply = await chat.create(
                model=model,
                messages=messages,
                tools=[tool],
                tool_choice="required",
            )
            choice = reply.choices[0]
            assert choice.finish_reason == "tool_calls" and choice.message.tool_calls, name
            [call] = choice.message.tool_calls
            assert call.type == "function" and call.id and call.function.name == "book"
            wanted = {"city": "Paris", "nights": 5, "rooms": ["double", "double"], "pets": True}
            assert json.loads(call.function.arguments) == wanted, name
            stream = await chat.create(
                model=model,
                messages=messages,
                tools=[WEATHER_TOOL],
                tool_choice="required",
                stream=True,
            )
            ids, names, args, finish = [], [], "", None
            async for chunk in stream:
                for delta_call in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
                    assert delta_call.index == 0
                    ids += [delta_call.id] if delta_call.id else []
                    names += [delta_call.function.name] if delta_call.function and delta_call.function.name else []
                    args += delta_call.function.arguments or "" if delta_call.function else ""
                finish = chunk.choices[0].finish_reason if chunk.choices else finish
            assert len(ids) == 1 and names == ["get_weather"] and json.loads(args) == {"city": "Paris"}, name
            assert finish == "tool_calls", name
            schema = {"type": "object", "properties": {"n": {"type": "number", "maximum": 2}}, "required": ["n"]}
            structured = await chat.create(
                model=model,
                messages=messages,
                response_format={"type": "json_schema", "json_schema": {"name": "n", "schema": schema}},
            )
            assert json.loads(structured.choices[0].message.content or "") == {"n": 2.0}, name
            plain = await chat.create(
                model=model,
                messages=messages,
                response_format={"type": "json_object"},
            )
            assert isinstance(json.loads(plain.choices[0].message.content or ""), dict), name
        finally:
            await client.close()
