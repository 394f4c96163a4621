"""`poolconsole smoke`: every check on every chosen target, one JSON document, stored runs."""

from __future__ import annotations

import asyncio
import contextlib
import random
import sys
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from poolconsole.collect.engines.poll import EnginePoller
from poolconsole.config.models import EngineKind, PoolConfig
from poolconsole.ops.smoke.checks import Activity, Checker, CheckResult, Prompts, Target, api_key, is_embedding_model


@dataclass(frozen=True)
class SmokeOptions:
    targets: tuple[str, ...] = ()
    via_gateway: bool = False
    concurrency: tuple[int, ...] = (1,)
    requests: int = 4
    seed: int | None = None
    stall_s: float = 15.0
    total_s: float = 120.0


def choose_targets(config: PoolConfig, options: SmokeOptions) -> list[Target]:
    """Engines directly (gateways only with --via-gateway); names on the command line narrow the list."""
    out: list[Target] = []
    for engine in config.engines:
        if options.targets and engine.name not in options.targets:
            continue
        is_gateway = engine.kind is EngineKind.LITELLM
        if is_gateway and not options.via_gateway and not options.targets:
            continue
        out.append(Target(engine.name, engine, engine.url, api_key(engine), gateway=is_gateway))
    return out


async def smoke_target(
    target: Target,
    options: SmokeOptions,
    prompts: Prompts,
    progress: Callable[[CheckResult], None] | None = None,
    activity: Activity | None = None,
) -> list[CheckResult]:
    """`activity`, when given, always says which check is under way (for a progress line)."""
    settings = target.engine.smoke
    now = activity or Activity()
    checker = Checker(target, prompts, stall_s=options.stall_s, total_s=options.total_s, activity=now)
    results: list[CheckResult] = []

    def add(result: CheckResult) -> None:
        results.append(result)
        if progress is not None:
            progress(result)

    async def check(what: str, call: Awaitable[CheckResult], total: int | None = None) -> None:
        now.start(f"{target.name} {what}", total)
        add(await call)

    try:
        now.start(f"{target.name} models")
        models, listed = await checker.models()
        add(listed)
        if settings.models is not None:
            models = [m for m in models if m in settings.models] or list(settings.models)
        for model in models:
            if is_embedding_model(model, settings):
                await check(f"{model} embeddings", checker.embeddings(model))
                continue
            await check(f"{model} chat", checker.chat(model, settings))
            for level in options.concurrency:
                requests = max(options.requests, level)
                await check(
                    f"{model} chat_stream c={level}", checker.chat_stream(model, settings, level, requests), requests
                )
            await check(f"{model} completions", checker.completions(model))
            if settings.tools:
                await check(f"{model} tool_call", checker.tool_call(model))
            if settings.json_schema:
                await check(f"{model} json", checker.json_output(model))
            if target.gateway and settings.anthropic:
                await check(f"{model} anthropic_messages", checker.anthropic(model))
    finally:
        await checker.close()
    return results


async def run_smoke(
    config: PoolConfig,
    options: SmokeOptions,
    progress: Callable[[CheckResult], None] | None = None,
    activity: Activity | None = None,
) -> tuple[list[CheckResult], int]:
    """Targets one after another (timings of one must not be disturbed by another's load)."""
    seed = options.seed if options.seed is not None else random.randrange(1, 2**31)
    prompts = Prompts(seed)
    results: list[CheckResult] = []
    for target in choose_targets(config, options):
        results += await smoke_target(target, options, prompts, progress, activity)
    return results, seed


def conditions(config: PoolConfig, versions: Mapping[str, str | None]) -> dict[str, dict[str, str | None]]:
    """What a stored run was measured on, per engine: kind, engine version, the active profile and its
    quantization (the profile's format and bits, from `[[engines.profiles]]`)."""
    out: dict[str, dict[str, str | None]] = {}
    for engine in config.engines:
        active = next((p for p in engine.profiles if p.name == engine.profile), None)
        quantization = None
        if active is not None:
            quantization = active.format + (f" {active.bits:g}-bit" if active.bits else "")
        out[engine.name] = {
            "kind": engine.kind.value,
            "profile": engine.profile,
            "quantization": quantization,
            "version": versions.get(engine.name),
        }
    return out


async def engine_versions(config: PoolConfig, targets: list[Target]) -> dict[str, str | None]:
    """Each target's version as its collector reads it: one poll each, all at once."""

    async def one(target: Target) -> tuple[str, str | None]:
        poller = EnginePoller(target.engine, settings=config.settings)
        try:
            return target.name, (await poller.poll()).version
        finally:
            await poller.aclose()

    return dict(await asyncio.gather(*(one(t) for t in targets)))


def document(results: list[CheckResult], seed: int, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "passed": bool(results) and all(r.passed for r in results),
        "seed": seed,
        "results": [r.to_json() for r in results],
        **(extra or {}),
    }


def smoke_gate(config: PoolConfig, engine: str) -> Callable[[], Awaitable[object]]:
    """The rollover's last step: True when every smoke check of `engine` passes, else the failures in words."""

    async def verdict() -> object:
        results, _ = await run_smoke(config, SmokeOptions((engine,), requests=2, total_s=60))
        failed = [f"{r.check}: {r.reason}" for r in results if not r.passed]
        return True if results and not failed else "; ".join(failed) or "no check ran"

    return verdict


QUIET_S = 3.0
"""A run (the command line's) says on stderr what it is doing once it has gone on this long, and as
often after."""


async def say_what_it_does(activity: Activity, say: Callable[[str], None], every_s: float = QUIET_S) -> None:
    """Until cancelled: every `every_s`, starting `every_s` in, one line of what the run is doing."""
    while True:
        await asyncio.sleep(every_s)
        say(activity.line())


def _to_stderr(line: str) -> None:
    with contextlib.suppress(OSError):  # a closed stderr does not end the run
        print(line, file=sys.stderr, flush=True)


def run_blocking(
    config: PoolConfig,
    options: SmokeOptions,
    progress: Callable[[CheckResult], None] | None = None,
    say: Callable[[str], None] | None = _to_stderr,
    every_s: float = QUIET_S,
) -> tuple[list[CheckResult], int]:
    """The command line's run. A run longer than `every_s` says what it is doing through `say` (stderr:
    stdout may be the JSON document), e.g. "smoke: qwen qwen3 chat_stream c=4 3/4 done"."""

    async def main() -> tuple[list[CheckResult], int]:
        activity = Activity()
        ticker = asyncio.create_task(say_what_it_does(activity, say, every_s)) if say is not None else None
        try:
            return await run_smoke(config, options, progress, activity)
        finally:
            if ticker is not None:
                ticker.cancel()

    return asyncio.run(main())
