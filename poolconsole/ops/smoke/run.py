"""`poolconsole smoke`: every check on every chosen target, one JSON document, stored runs."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from poolconsole.collect.engines.poll import EnginePoller
from poolconsole.config.models import EngineKind, PoolConfig
from poolconsole.ops.smoke.checks import Checker, CheckResult, Prompts, Target, api_key, is_embedding_model


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
    target: Target, options: SmokeOptions, prompts: Prompts, progress: Callable[[CheckResult], None] | None = None
) -> list[CheckResult]:
    settings = target.engine.smoke
    checker = Checker(target, prompts, stall_s=options.stall_s, total_s=options.total_s)
    results: list[CheckResult] = []

    def add(result: CheckResult) -> None:
        results.append(result)
        if progress is not None:
            progress(result)

    try:
        models, listed = await checker.models()
        add(listed)
        if settings.models is not None:
            models = [m for m in models if m in settings.models] or list(settings.models)
        for model in models:
            if is_embedding_model(model, settings):
                add(await checker.embeddings(model))
                continue
            add(await checker.chat(model, settings))
            for level in options.concurrency:
                add(await checker.chat_stream(model, settings, level, max(options.requests, level)))
            add(await checker.completions(model))
            if settings.tools:
                add(await checker.tool_call(model))
            if settings.json_schema:
                add(await checker.json_output(model))
            if target.gateway and settings.anthropic:
                add(await checker.anthropic(model))
    finally:
        await checker.close()
    return results


async def run_smoke(
    config: PoolConfig, options: SmokeOptions, progress: Callable[[CheckResult], None] | None = None
) -> tuple[list[CheckResult], int]:
    """Targets one after another (timings of one must not be disturbed by another's load)."""
    seed = options.seed if options.seed is not None else random.randrange(1, 2**31)
    prompts = Prompts(seed)
    results: list[CheckResult] = []
    for target in choose_targets(config, options):
        results += await smoke_target(target, options, prompts, progress)
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


def run_blocking(
    config: PoolConfig, options: SmokeOptions, progress: Callable[[CheckResult], None] | None = None
) -> tuple[list[CheckResult], int]:
    return asyncio.run(run_smoke(config, options, progress))
