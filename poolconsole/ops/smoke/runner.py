"""`poolconsole smoke`: every check on every chosen target, one JSON document, stored runs."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from poolconsole.collect.engines.poll import EnginePoller
from poolconsole.config.models import EngineKind, PoolConfig
from poolconsole.model.hosts import HostSnapshot
from poolconsole.model.smoke import CheckResult
from poolconsole.ops.smoke.checks import Activity, Checker, Prompts, Target, api_key, is_embedding_model

if TYPE_CHECKING:  # the console starts without httpx: a measurement run imports it when it runs
    from poolconsole.ops.smoke.workloads import Workload


@dataclass(frozen=True)
class SmokeOptions:
    targets: tuple[str, ...] = ()
    via_gateway: bool = False
    concurrency: tuple[int, ...] = (1,)
    requests: int = 4
    seed: int | None = None
    stall_s: float = 15.0
    total_s: float = 120.0
    workloads: tuple[Workload, ...] = ()
    """`--workload`: instead of the suite, each workload timed with the speculative-decoding counters read
    around it (ops/smoke/workloads.py)."""
    context: tuple[int | None, ...] = ()
    """`--context`: instead of the suite, each context length (None: the advertised one) at the first
    concurrency level (ops/smoke/context.py)."""
    profiles: Mapping[str, str | None] = field(default_factory=dict)
    """The profile active per engine where the audit log says (after a rollover): its max_model_len is the
    one the context verdict names."""


def profile_max_model_len(target: Target, active: Mapping[str, str | None]) -> int | None:
    """The active profile's max_model_len, where the profile declares one."""
    name = active.get(target.engine.name) or target.engine.profile
    profile = next((p for p in target.engine.profiles if p.name == name), None)
    return profile.max_model_len if profile is not None and "max_model_len" in profile.model_fields_set else None


async def measure_target(
    checker: Checker, models: list[str], options: SmokeOptions, add: Callable[[CheckResult], None]
) -> None:
    """A measurement run (`--workload`, `--context`) of each generation model behind the target."""
    from poolconsole.ops.smoke.context import run_context
    from poolconsole.ops.smoke.workloads import run_workload

    target, now = checker.target, checker.activity
    for model in models:
        if is_embedding_model(model, target.engine.smoke):
            continue
        for level in options.concurrency:
            requests = max(options.requests, level)
            for workload in options.workloads:
                now.start(f"{target.name} {model} workload {workload.name} c={level}", requests)
                add(await run_workload(checker, model, workload, level, requests))
        if options.context:
            found, verdict = await run_context(
                checker, model, options.context, options.concurrency[0], profile_max_model_len(target, options.profiles)
            )
            for result in found:
                result.details["context_verdict"] = verdict
                add(result)


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
        # "qwen3 qwen3 chat" when the engine serves a model of its own name: said once
        now.start(what if what.startswith(f"{target.name} ") else f"{target.name} {what}", total)
        add(await call)

    try:
        now.start(f"{target.name} models")
        models, listed = await checker.models()
        add(listed)
        if settings.models is not None:
            models = [m for m in models if m in settings.models] or list(settings.models)
        if options.workloads or options.context:
            await measure_target(checker, models, options, add)
            models = []
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


def conditions(
    config: PoolConfig,
    versions: Mapping[str, str | None],
    active: Mapping[str, str | None] | None = None,
    hosts: Mapping[str, HostSnapshot] | None = None,
    reported: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, dict[str, Any]]:
    """What a stored run was measured on, per engine: kind and version, the host, the profile really active
    (`active`: the audit log's, promoted by the last rollover, else the one hosts.toml names; where it came
    from in `profile_source`) with its quantization, KV dtype, max context, max sequences, tensor-parallel
    size, args and environment names (never their values), and the engine's GPUs' model and driver from a
    host poll (`hosts`) where one was read. `reported`: what each engine says it runs with
    (collect.engines.reported), stored as `engine_reported`, and each figure the profile declares that the
    engine reports otherwise in `engine_disagrees`."""
    from poolconsole.collect.engines.reported import disagreements

    out: dict[str, dict[str, Any]] = {}
    for engine in config.engines:
        promoted = (active or {}).get(engine.name)
        name = promoted or engine.profile
        profile = next((p for p in engine.profiles if p.name == name), None)
        quantization = None
        if profile is not None:
            quantization = profile.format + (f" {profile.bits:g}-bit" if profile.bits else "")
        snapshot = (hosts or {}).get(engine.host or "")
        gpus = [g for g in snapshot.gpus if engine.gpus is None or g.index in engine.gpus] if snapshot else []
        out[engine.name] = {
            "kind": engine.kind.value,
            "profile": name,
            "quantization": quantization,
            "version": versions.get(engine.name),
            "profile_source": ("audit log" if promoted else "hosts.toml") if name else None,
            "host": engine.host,
            "kv_dtype": profile.kv_dtype if profile else None,
            "max_model_len": profile.max_model_len if profile else None,
            "max_num_seqs": profile.max_num_seqs if profile else None,
            "tp_size": profile.tp_size if profile else None,
            "args": list(profile.args) if profile else [],
            "env_names": sorted(profile.env) if profile else [],
            "gpu_model": ", ".join(sorted({g.name for g in gpus if g.name})) or None,
            "gpu_driver": snapshot.driver if snapshot else None,
        }
        told = (reported or {}).get(engine.name)
        if told is not None:
            out[engine.name]["engine_reported"] = dict(told)
            declared = set(profile.model_fields_set) if profile is not None else set()
            mine = {**out[engine.name], "format": profile.format if profile else None}
            out[engine.name]["engine_disagrees"] = disagreements(mine, declared, dict(told))
    return out


def active_profiles(config: PoolConfig, audit_path: Path) -> dict[str, str | None]:
    """Each engine's profile as the last promoted rollover left it (the audit log), None where none was
    (blocking: a SQLite read)."""
    from poolconsole.ops import audit

    active = audit.active_profiles(audit_path)  # one read for the pool, as the console's start-up does
    return {e.name: active.get(e.name) if e.profiles else None for e in config.engines}


async def engine_versions(config: PoolConfig, targets: list[Target]) -> dict[str, str | None]:
    """Each target's version as its collector reads it: one poll each, all at once."""

    async def one(target: Target) -> tuple[str, str | None]:
        poller = EnginePoller(target.engine, settings=config.settings)
        try:
            return target.name, (await poller.poll()).version
        finally:
            await poller.aclose()

    return dict(await asyncio.gather(*(one(t) for t in targets)))


async def engine_reported(config: PoolConfig, targets: list[Target]) -> dict[str, dict[str, Any]]:
    """What each engine (not a gateway) says it runs with, all at once (collect.engines.reported)."""
    from poolconsole.collect.engines.reported import read_reported

    engines = [t for t in targets if not t.gateway]
    timeout = config.settings.http_timeout_s
    found = await asyncio.gather(
        *(read_reported(t.engine.kind.value, t.base_url, api_headers(t), timeout) for t in engines)
    )
    return {t.name: doc for t, doc in zip(engines, found, strict=True)}


def api_headers(target: Target) -> dict[str, str]:
    return {"Authorization": f"Bearer {target.api_key}"} if target.api_key else {}


async def read_conditions(
    config: PoolConfig, targets: list[Target]
) -> tuple[dict[str, str | None], dict[str, HostSnapshot], dict[str, dict[str, Any]]]:
    """What `conditions` needs from the pool, read at once: each target's version (one poll), a poll of
    the targets' hosts (GPU model, driver) and what each engine reports of its configuration."""
    from poolconsole.ops.planning import poll_hosts

    names = {t.engine.host for t in targets if t.engine.host}
    versions, hosts, reported = await asyncio.gather(
        engine_versions(config, targets), poll_hosts(config, names), engine_reported(config, targets)
    )
    return versions, hosts, reported


def document(results: list[CheckResult], seed: int, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "passed": bool(results) and all(r.passed for r in results),
        "seed": seed,
        "results": [r.to_json() for r in results],
        **(extra or {}),
    }


def summaries(results: list[CheckResult]) -> dict[str, list[dict[str, Any]]]:
    """The verdicts of a measurement run, per target and model: `spec_decode` (the workloads) and
    `context` (the servable context); empty lists for a plain smoke run."""
    from poolconsole.ops.smoke.workloads import verdict

    spec: list[dict[str, Any]] = []
    context: list[dict[str, Any]] = []
    keys = dict.fromkeys((r.target, r.model) for r in results)
    for target, model in keys:
        mine = [r for r in results if (r.target, r.model) == (target, model)]
        if any(r.workload is not None for r in mine):
            spec.append({"target": target, "model": model, **verdict(mine)})
        told = next((r.details["context_verdict"] for r in mine if "context_verdict" in r.details), None)
        if told is not None:
            context.append({"target": target, "model": model, **told})
    return {"spec_decode": spec, "context": context}


def with_measurements(
    measured_on: Mapping[str, Mapping[str, Any]], found: Mapping[str, list[dict[str, Any]]]
) -> dict[str, dict[str, Any]]:
    """The conditions to store, each target's with the verdicts measured on it (`workloads`, `context`)."""
    out = {name: dict(c) for name, c in measured_on.items()}
    for key, stored in (("spec_decode", "workloads"), ("context", "context")):
        for entry in found.get(key, []):
            out.setdefault(entry["target"], {}).setdefault(stored, []).append(
                {k: v for k, v in entry.items() if k != "target"}
            )
    return out


def smoke_gate(config: PoolConfig, engine: str) -> Callable[[Callable[[str], None]], Awaitable[object]]:
    """The rollover's last step: True when every smoke check of `engine` passes, else the failures in words.
    Each check is said through `say` as it finishes (the action's progress), then the count: the evidence
    the new profile was promoted on."""

    async def verdict(say: Callable[[str], None]) -> object:
        def heard(result: CheckResult) -> None:
            say(f"  smoke {check_words(result)}")

        results, _ = await run_smoke(config, SmokeOptions((engine,), requests=2, total_s=60), heard)
        failed = [f"{r.check}: {r.reason}" for r in results if not r.passed]
        say(f"smoke test: {len(results) - len(failed)}/{len(results)} checks passed")
        return True if results and not failed else "; ".join(failed) or "no check ran"

    return verdict


def check_words(result: CheckResult) -> str:
    """One check in a line: 'chat_stream c=4: PASS (TTFT p95 182 ms, 41.3 tok/s per stream)'."""
    at = f" c={result.concurrency}" if result.concurrency else ""
    if not result.passed:
        return f"{result.check}{at}: FAIL ({result.reason})"
    figures = []
    p95 = (result.ttft_s or {}).get("p95")
    if p95 is not None:
        figures.append(f"TTFT p95 {p95 * 1000:.0f} ms")
    per_stream = (result.output_tokens_per_s or {}).get("per_stream")
    if per_stream is not None:
        figures.append(f"{per_stream:.1f} tok/s per stream")
    return f"{result.check}{at}: PASS" + (f" ({', '.join(figures)})" if figures else "")


QUIET_S = 3.0
"""A run (the command line's) says on stderr what it is doing once it has gone on this long, and as
often after."""


async def say_what_it_does(activity: Activity, say: Callable[[str], None], every_s: float = QUIET_S) -> None:
    """Until cancelled: every `every_s`, starting `every_s` in, one line of what the run is doing."""
    while True:
        await asyncio.sleep(every_s)
        say(activity.line())


def run_blocking(
    config: PoolConfig,
    options: SmokeOptions,
    progress: Callable[[CheckResult], None] | None = None,
    say: Callable[[str], None] | None = None,
    every_s: float = QUIET_S,
) -> tuple[list[CheckResult], int]:
    """The command line's run. A run longer than `every_s` says what it is doing through `say` (the command
    passes stderr: its stdout may be the JSON document), e.g. "smoke: qwen qwen3 chat_stream c=4 3/4 done"."""

    async def main() -> tuple[list[CheckResult], int]:
        activity = Activity()
        ticker = asyncio.create_task(say_what_it_does(activity, say, every_s)) if say is not None else None
        try:
            return await run_smoke(config, options, progress, activity)
        finally:
            if ticker is not None:
                ticker.cancel()

    return asyncio.run(main())
