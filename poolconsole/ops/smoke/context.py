"""The servable context, measured (`poolconsole smoke ENGINE --context 1k,8k,32k,128k[,max] [--concurrency N]`).

"Advertised model context is not practically servable context at useful concurrency": for each length,
N requests of that many tokens go out at once (the prompt sized with the engine's own `/tokenize` where it
serves one, llama.cpp and vLLM do; else estimated at 4 characters a token, and said so). Each length
reports TTFT (prefill), decode tok/s, the KV usage reached (read from /metrics, llama.cpp's /slots, while
the requests run) and whether it errored, queued or preempted. The verdict names the largest length served
cleanly at that concurrency next to what the engine advertises and the profile's max_model_len.

A length is the context a request occupies: its prompt plus the tokens it asks for, so `max` (the
advertised context) fits exactly and one token more does not.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import statistics
from dataclasses import dataclass, field
from typing import Any

import httpx

from poolconsole.collect.engines.jsonparse import parse_slots
from poolconsole.collect.engines.kinds import Capability, adapter, adapter_named
from poolconsole.collect.engines.spec_window import Reading, delta, read_window
from poolconsole.collect.prom import ParseError
from poolconsole.collect.tasks import reap
from poolconsole.model.smoke import CheckResult
from poolconsole.ops.smoke.checks import WORDS, Checker
from poolconsole.ops.smoke.stream import level_stats

OUTPUT_TOKENS = 32
"""Tokens asked of each request: enough for a decode speed, few enough that prefill dominates."""
WATCH_S = 0.5
"""How often /metrics (llama.cpp: /slots) is read while a length runs."""
CHARS_PER_TOKEN = 4.0
"""The estimate where the engine serves no tokenizer."""


class LengthError(ValueError):
    pass


def parse_lengths(text: str) -> tuple[int | None, ...]:
    """ "1k,8k,32k,128k,max" -> (1024, 8192, 32768, 131072, None); k is 1024 (as "128k" is 131072), None is
    the advertised context. Sorted, duplicates dropped."""
    out: set[int] = set()
    has_max = False
    for raw in (t.strip().lower() for t in text.split(",")):
        if not raw:
            continue
        if raw == "max":
            has_max = True
            continue
        scale = 1024 if raw.endswith("k") else 1
        try:
            value = int(float(raw.removesuffix("k")) * scale)
        except ValueError:
            raise LengthError(f"--context takes lengths such as 1k,8k,32k,128k,max (not {raw!r})") from None
        if not 64 <= value <= 16 * 1024 * 1024:
            raise LengthError(f"--context length {raw} is out of range (64 to 16M tokens)")
        out.add(value)
    if not out and not has_max:
        raise LengthError("--context names no length (e.g. 1k,8k,32k,128k,max)")
    return (*sorted(out), *((None,) if has_max else ()))


@dataclass
class Watch:
    """What /metrics said while one length ran."""

    kv_max: float | None = None
    waiting_max: float | None = None
    reads: int = 0
    errors: list[str] = field(default_factory=list)


async def _watch(checker: Checker, client: httpx.AsyncClient, watch: Watch) -> None:
    """Until cancelled: the KV usage and queue, every WATCH_S."""
    target = checker.target
    kind = target.engine.kind.value
    while True:
        reading = await read_window(client, target.base_url, kind, checker.headers)
        kv = reading.get("kv_cache_usage")
        if Capability.SLOTS in adapter(target.engine.kind).capabilities:  # llama.cpp has no KV gauge
            kv = await _slots_fill(client, target.base_url, checker.headers)
        waiting = reading.get("requests_waiting")
        if reading.error:
            watch.errors.append(reading.error)
        watch.reads += 1
        if kv is not None:
            watch.kv_max = max(kv, watch.kv_max or 0.0)
        if waiting is not None:
            watch.waiting_max = max(waiting, watch.waiting_max or 0.0)
        await asyncio.sleep(WATCH_S)


async def _slots_fill(client: httpx.AsyncClient, base: str, headers: dict[str, str]) -> float | None:
    """llama.cpp has no KV gauge: tokens held by busy slots over all slots' context (/slots)."""
    try:
        response = await client.get(base + "/slots", headers=headers)
        return parse_slots(response.content).kv_fill if response.status_code == 200 else None
    except (httpx.HTTPError, ParseError):
        return None


async def advertised(checker: Checker, client: httpx.AsyncClient, model: str) -> tuple[int | None, str | None]:
    """The context the engine says a request may use, and where it said it: vLLM and SGLang `/v1/models`
    max_model_len, llama.cpp the slot's n_ctx (`/props`, else `/slots`)."""
    base, headers = checker.target.base_url, checker.headers
    with contextlib.suppress(httpx.HTTPError, ValueError, TypeError, KeyError, AttributeError):
        if Capability.SLOTS in adapter(checker.target.engine.kind).capabilities:  # llama.cpp: per slot
            props = (await client.get(base + "/props", headers=headers)).json()
            n_ctx = (props.get("default_generation_settings") or {}).get("n_ctx")
            if isinstance(n_ctx, int) and n_ctx > 0:
                return n_ctx, "/props n_ctx (per slot)"
            slots = (await client.get(base + "/slots", headers=headers)).json()
            if slots and isinstance(slots[0].get("n_ctx"), int):
                return slots[0]["n_ctx"], "/slots n_ctx (per slot)"
            return None, None
        cards = (await client.get(base + "/v1/models", headers=headers)).json()["data"]
        for card in cards:
            if card.get("id") == model and isinstance(card.get("max_model_len"), int):
                return card["max_model_len"], "/v1/models max_model_len"
    return None, None


class Tokenizer:
    """Token counts from the engine's /tokenize (vLLM `{"model","prompt"}` -> count, llama.cpp
    `{"content"}` -> tokens), or an estimate where it has none."""

    def __init__(self, checker: Checker, client: httpx.AsyncClient, model: str) -> None:
        self.checker, self.client, self.model = checker, client, model
        self.engine = adapter(checker.target.engine.kind)
        self.served: bool | None = None if self.engine.tokenize_body(model, "") is not None else False

    async def count(self, text: str) -> int:
        if self.served is not False:
            got = await self._tokenize(text)
            if got is not None:
                self.served = True
                return got
            self.served = False
        return math.ceil(len(text) / CHARS_PER_TOKEN)

    async def _tokenize(self, text: str) -> int | None:
        body = self.engine.tokenize_body(self.model, text)
        if body is None:
            return None
        try:
            response = await self.client.post(
                self.checker.target.base_url + "/tokenize", json=body, headers=self.checker.headers
            )
            data = response.json()
        except (httpx.HTTPError, ValueError):
            return None
        if response.status_code != 200 or not isinstance(data, dict):
            return None
        if isinstance(data.get("count"), int):
            return int(data["count"])
        tokens = data.get("tokens")
        return len(tokens) if isinstance(tokens, list) else None

    @property
    def how(self) -> str:
        return "the engine's /tokenize" if self.served else f"estimated at {CHARS_PER_TOKEN:g} characters a token"


def _filler(words: int, seed: int, nonce: str) -> str:
    return nonce + " " + " ".join(WORDS[(i * 7 + seed) % len(WORDS)] for i in range(words))


async def sized_prompt(
    tokenizer: Tokenizer, tokens: int, seed: int, nonce: str, words: int | None = None
) -> tuple[str, int, int]:
    """A prompt of at most `tokens` tokens (within a few of it), starting with `nonce` so that requests of
    one length share no prefix; its count as the tokenizer (or the estimate) gives it, and its filler words
    (`words`: where to start, e.g. the last request's)."""
    words = words or max(1, tokens // 2)
    text = _filler(words, seed, nonce)
    count = await tokenizer.count(text)
    for _ in range(6):
        if count <= tokens and tokens - count <= max(4, tokens // 200):
            break
        per_word = max(count / words, 0.05)
        step = (tokens - count) / per_word
        words = max(1, words + (math.floor(step) if step > 0 else math.floor(step) - 1))
        text = _filler(words, seed, nonce)
        count = await tokenizer.count(text)
    while count > tokens and words > 1:  # never over: the length is a limit being probed
        words -= max(1, (count - tokens) // 2)
        text = _filler(words, seed, nonce)
        count = await tokenizer.count(text)
    return text, count, words


def _words(n: int) -> str:
    return f"{n // 1024}k" if n % 1024 == 0 else str(n)


async def run_length(
    checker: Checker, model: str, length: int, label: str, concurrency: int, tokenizer: Tokenizer
) -> CheckResult:
    """`concurrency` requests of `length` tokens of context each, at once; what the engine did with them."""
    target = checker.target
    kind = target.engine.kind.value
    output = min(OUTPUT_TOKENS, max(1, length // 4))
    prompt_budget = length - output
    seed = checker.prompts.rng.randrange(10**6)
    prompts: list[tuple[str, int]] = []
    words: int | None = None
    for i in range(concurrency):  # the first is sized, the others start from its word count
        text, count, words = await sized_prompt(
            tokenizer, prompt_budget, seed, f"[run {checker.prompts.seed}-{seed}-{i}]", words
        )
        prompts.append((text, count))
    bodies = [
        {
            "model": model,
            "prompt": text,
            "max_tokens": output,
            "temperature": 0,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        for text, _ in prompts
    ]
    watch = Watch()
    async with httpx.AsyncClient(timeout=10.0, trust_env=False) as client:
        before = await read_window(client, target.base_url, kind, checker.headers)
        watcher = asyncio.create_task(_watch(checker, client, watch))
        try:
            results, wall = await checker.timed(bodies, concurrency, "/v1/completions")
        finally:
            await reap(watcher)
        after = await read_window(client, target.base_url, kind, checker.headers)
    stats = level_stats(results, wall)
    failures = [r.reason or "failed" for r in results if not r.ok]
    preempted = _preempted(before, after)
    queued = watch.waiting_max if watch.waiting_max else None
    problems = []
    if failures:
        problems.append(f"errors: {len(failures)}/{concurrency} requests failed: {failures[0]}")
    if queued:
        problems.append(f"queues: {queued:.0f} waiting while the requests ran")
    if preempted:
        problems.append(f"preempts: {preempted:.0f} preemptions")
    decode = (stats.tokens_per_s or {}).get("per_stream")
    ttft = (stats.ttft or {}).get("p50")
    counts = [c for _, c in prompts]
    facts = [
        f"prompt {statistics.fmean(counts):.0f} tokens ({tokenizer.how}) + {output} out, {concurrency} at once",
        f"TTFT p50 {ttft:.2f} s" if ttft is not None else "TTFT n/a",
        f"decode {decode:.1f} tok/s per stream" if decode is not None else "decode tok/s n/a",
        f"KV reached {watch.kv_max:.0%}" if watch.kv_max is not None else "KV usage n/a",
        *stats.resent_words(),
    ]
    return CheckResult(
        target.name,
        model,
        f"context:{label}",
        not problems,
        "; ".join(problems + facts),
        concurrency=concurrency,
        requests=concurrency,
        **(stats.figures() | {"prompt_tokens": stats.prompt_tokens or round(statistics.fmean(counts))}),
        details={
            "context_tokens": length,
            "prompt_tokens_sent": counts,
            "token_counts": tokenizer.how,
            "kv_usage_max": watch.kv_max,
            "kv_unknown": None if watch.kv_max is not None else _kv_unknown(kind, watch),
            "waiting_max": watch.waiting_max,
            "preemptions": preempted,
            "errors": failures[:3],
            "outcome": "errors" if failures else "queues" if queued else "preempts" if preempted else "served",
            "wall_s": wall,
        },
    )


def _preempted(before: Reading, after: Reading) -> float | None:
    grew = delta(before, after, "preemptions")
    return grew if grew else None


def _kv_unknown(kind: str, watch: Watch) -> str:
    if watch.errors:
        return watch.errors[-1]
    engine = adapter_named(kind)
    return "no reading while it ran" if engine is not None and engine.serves_metrics else f"{kind} reports no KV usage"


async def run_context(
    checker: Checker, model: str, lengths: tuple[int | None, ...], concurrency: int, profile_max: int | None
) -> tuple[list[CheckResult], dict[str, Any]]:
    """Every length in order; the results and the verdict."""
    async with httpx.AsyncClient(timeout=30.0, trust_env=False) as client:
        told, where = await advertised(checker, client, model)
        tokenizer = Tokenizer(checker, client, model)
        limit = told or profile_max
        results: list[CheckResult] = []
        wanted: list[tuple[int, str]] = []
        for length in lengths:
            if length is None:
                if limit is None:
                    continue
                wanted.append((limit, "max"))
            elif (length, _words(length)) not in wanted:
                wanted.append((length, _words(length)))
        seen: set[int] = set()
        for length, label in sorted(wanted):
            if length in seen:
                continue
            seen.add(length)
            checker.activity.start(f"{checker.target.name} {model} context {label} x{concurrency}", concurrency)
            results.append(await run_length(checker, model, length, label, concurrency, tokenizer))
    return results, context_verdict(results, concurrency, told, where, profile_max)


def context_verdict(
    results: list[CheckResult], concurrency: int, told: int | None, where: str | None, profile_max: int | None
) -> dict[str, Any]:
    """ "advertised 131072 (profile max_model_len 131072), served 65536 at 4 concurrent; 131072 queues"."""
    served: int | None = None
    first_bad: CheckResult | None = None
    for r in results:
        if r.passed and first_bad is None:
            served = r.details["context_tokens"]
        elif not r.passed and first_bad is None:
            first_bad = r
    advertised_words = f"advertised {told}" if told is not None else "advertised context unknown"
    if profile_max is not None:
        advertised_words += f" (profile max_model_len {profile_max})"
    if served is not None:
        words = f"{advertised_words}, served {served} at {concurrency} concurrent"
    else:
        words = f"{advertised_words}, served none of the lengths tried at {concurrency} concurrent"
    if first_bad is not None:
        words += f"; {first_bad.details['context_tokens']} {first_bad.details['outcome']}"
    elif results:
        words += " (every length tried)"
    return {
        "verdict": words,
        "advertised": told,
        "advertised_from": where,
        "profile_max_model_len": profile_max,
        "served": served,
        "concurrency": concurrency,
        "first_failing": first_bad.details["context_tokens"] if first_bad is not None else None,
        "first_failing_outcome": first_bad.details["outcome"] if first_bad is not None else None,
    }
