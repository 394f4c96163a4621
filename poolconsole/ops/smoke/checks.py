"""The smoke checks of one model behind one target: client compatibility through the official openai
SDK, timing through raw httpx streaming, correctness and SLOs from config."""

from __future__ import annotations

import asyncio
import json
import math
import os
import random
import re
import time
from dataclasses import dataclass, field
from typing import Any, cast

import httpx
import openai

from poolconsole.collect.smoke_transport import timed_client
from poolconsole.config.models import Engine, SmokeSettings
from poolconsole.model.smoke import CheckResult
from poolconsole.model.units import NA
from poolconsole.ops.smoke.stream import LevelStats, StreamResult, failed_request, level_stats, stream_chat

WORDS = "amber basil cedar delta ember fjord garnet harbor indigo juniper kestrel lumen marble nectar".split()  # noqa: SIM905
WEATHER_TOOL: Any = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


@dataclass(frozen=True)
class Target:
    """Where requests go: an engine directly, or a gateway for one of its models."""

    name: str
    engine: Engine
    base_url: str
    api_key: str | None
    gateway: bool = False


def api_key(engine: Engine) -> str | None:
    return os.environ.get(engine.api_key_env) if engine.api_key_env else None


class Prompts:
    """Prompts varied by a per-run seed, so a repeat run cannot ride the prefix cache of the last one."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.seed = seed

    def chat(self, words: int = 24) -> str:
        nonce = " ".join(self.rng.choice(WORDS) for _ in range(6))
        return f"[run {self.seed}-{self.rng.randrange(10**6)} {nonce}] Write a short story about " + " ".join(
            self.rng.choice(WORDS) for _ in range(words)
        )


def is_embedding_model(model: str, settings: SmokeSettings) -> bool:
    if settings.embedding_models is not None:
        return model in settings.embedding_models
    return "embed" in model.lower()


@dataclass
class Activity:
    """What a smoke run is doing now, for a progress line: the check under way and, for a timed level,
    how many of its requests are done."""

    what: str = "starting"
    total: int | None = None
    done: int = 0
    since: float = field(default_factory=time.monotonic)

    def start(self, what: str, total: int | None = None) -> None:
        self.what, self.total, self.done, self.since = what, total, 0, time.monotonic()

    def line(self) -> str:
        if self.total is not None:
            return f"smoke: {self.what} {self.done}/{self.total} done"
        return f"smoke: {self.what} ({time.monotonic() - self.since:.0f} s)"


STREAMS_PER_CLIENT = 4
STARTING_AT_ONCE = 16
"""Streams of one level being built and sent at the same time (stream.stream_chat's `starting`)."""


def stream_client(total_s: float) -> httpx.AsyncClient:
    return timed_client(total_s, STREAMS_PER_CLIENT)


class Checker:
    def __init__(
        self, target: Target, prompts: Prompts, *, stall_s: float, total_s: float, activity: Activity | None = None
    ) -> None:
        self.target = target
        self.activity = activity or Activity()
        self.prompts = prompts
        self.stall_s = stall_s
        self.total_s = total_s
        self.sdk = openai.AsyncOpenAI(
            base_url=target.base_url + "/v1", api_key=target.api_key or "none", timeout=total_s, max_retries=0
        )
        self.http = stream_client(total_s)
        self.stream_clients: list[httpx.AsyncClient] = []
        self.headers = {"Authorization": f"Bearer {target.api_key}"} if target.api_key else {}

    async def close(self) -> None:
        await self.sdk.close()
        await self.http.aclose()
        for client in self.stream_clients:
            await client.aclose()

    def _clients(self, concurrency: int) -> list[httpx.AsyncClient]:
        """Streams spread over clients of STREAMS_PER_CLIENT connections: httpcore's pool does work
        proportional to its connections each time a request starts or ends (measured: 4 per client cost
        the least client CPU at 128 and 256 streams, benchmarks/smoke_bench.py)."""
        needed = max(1, math.ceil(concurrency / STREAMS_PER_CLIENT))
        while len(self.stream_clients) < needed:
            self.stream_clients.append(stream_client(self.total_s))
        return self.stream_clients[:needed]

    def result(self, model: str, check: str, passed: bool, reason: str, **kw: Any) -> CheckResult:
        return CheckResult(self.target.name, model, check, passed, reason, **kw)

    async def _sdk(self, model: str, check: str, call: Any) -> tuple[Any, CheckResult | None]:
        try:
            reply = await call
            if isinstance(reply, str | bytes):  # the SDK could not decode JSON: hands back the raw text
                return None, self.result(model, check, False, f"not a JSON answer: {str(reply)[:80]!r}")
            return reply, None
        except openai.APIStatusError as exc:
            body = " ".join(str(exc.message).split())[:200]
            return None, self.result(model, check, False, f"HTTP {exc.status_code}: {body}")
        except openai.APIConnectionError as exc:  # no answer (APITimeoutError included): the URL and why
            cause = exc.__cause__ or exc  # the SDK's own words ("Connection error.") say less than its cause
            return None, self.result(model, check, False, failed_request(str(exc.request.url), cause, self.total_s))
        except (openai.APIError, httpx.HTTPError) as exc:
            return None, self.result(model, check, False, f"{type(exc).__name__}: {exc}")
        except Exception as exc:  # a malformed answer the SDK cannot decode
            return None, self.result(
                model, check, False, f"the openai client could not read the answer: {type(exc).__name__}: {exc}"
            )

    async def models(self) -> tuple[list[str], CheckResult]:
        page, failed = await self._sdk("*", "models", self.sdk.models.list())
        if failed:
            return [], failed
        ids = [m.id for m in page.data]
        return ids, self.result(
            "*", "models", bool(ids), f"{len(ids)} model(s)" if ids else "no model listed", details={"models": ids}
        )

    async def chat(self, model: str, settings: SmokeSettings) -> CheckResult:
        prompt = settings.probe_prompt or self.prompts.chat(8)
        reply, failed = await self._sdk(
            model,
            "chat",
            self.sdk.chat.completions.create(
                model=model, messages=[{"role": "user", "content": prompt}], max_tokens=32, temperature=0
            ),
        )
        if failed:
            return failed
        if not reply.choices:
            return self.result(model, "chat", False, "the answer has no choices")
        text = reply.choices[0].message.content or ""
        usage = reply.usage
        details = {"finish_reason": reply.choices[0].finish_reason, "answer": text[:120]}
        if usage is None:
            return self.result(model, "chat", False, "the answer has no usage block", details=details)
        if settings.probe_expect and not re.search(settings.probe_expect, text):
            return self.result(
                model,
                "chat",
                False,
                f"correctness probe failed: answer does not match {settings.probe_expect!r}",
                details=details,
            )
        probe = "; correctness probe passed" if settings.probe_expect else ""
        return self.result(
            model,
            "chat",
            bool(text),
            ("answered" + probe) if text else "empty answer",
            prompt_tokens=usage.prompt_tokens,
            output_tokens=usage.completion_tokens,
            details=details,
        )

    async def completions(self, model: str) -> CheckResult:
        reply, failed = await self._sdk(
            model,
            "completions",
            self.sdk.completions.create(model=model, prompt=self.prompts.chat(8), max_tokens=16, temperature=0),
        )
        if failed:
            return failed
        text = reply.choices[0].text if reply.choices else ""
        return self.result(
            model,
            "completions",
            bool(text),
            "answered" if text else "empty answer",
            output_tokens=reply.usage.completion_tokens if reply.usage else None,
        )

    async def tool_call(self, model: str) -> CheckResult:
        reply, failed = await self._sdk(
            model,
            "tool_call",
            self.sdk.chat.completions.create(
                model=model,
                messages=[{"role": "user", "content": "What is the weather in Paris? Use the tool."}],
                tools=[WEATHER_TOOL],
                tool_choice="required",
                max_tokens=128,
                temperature=0,
            ),
        )
        if failed:
            return failed
        calls = reply.choices[0].message.tool_calls if reply.choices else None
        if not calls:
            return self.result(model, "tool_call", False, "no tool_calls in the answer")
        fn = calls[0].function
        try:
            args = json.loads(fn.arguments)
        except (ValueError, TypeError):
            return self.result(
                model, "tool_call", False, f"tool call arguments are not valid JSON: {str(fn.arguments)[:80]!r}"
            )
        if fn.name != "get_weather" or not isinstance(args, dict):
            return self.result(model, "tool_call", False, f"malformed tool call: {fn.name}({str(args)[:60]})")
        return self.result(model, "tool_call", True, f"get_weather({json.dumps(args)[:60]})")

    async def json_output(self, model: str) -> CheckResult:
        schema: Any = {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city", "days"],
        }
        reply, failed = await self._sdk(
            model,
            "json",
            self.sdk.chat.completions.create(
                model=model,
                messages=[{"role": "user", "content": "Plan a trip: give a city and a number of days."}],
                response_format=cast(Any, {"type": "json_schema", "json_schema": {"name": "trip", "schema": schema}}),
                max_tokens=96,
                temperature=0,
            ),
        )
        if failed:
            return failed
        text = reply.choices[0].message.content or "" if reply.choices else ""
        try:
            data = json.loads(text)
        except ValueError:
            return self.result(model, "json", False, f"not JSON: {text[:80]!r}")
        ok = isinstance(data, dict) and {"city", "days"} <= set(data)
        return self.result(model, "json", ok, "schema-shaped JSON" if ok else f"JSON misses keys: {text[:80]!r}")

    async def embeddings(self, model: str) -> CheckResult:
        text = self.prompts.chat(6)
        first, failed = await self._sdk(model, "embeddings", self.sdk.embeddings.create(model=model, input=text))
        if failed:
            return failed
        second, failed = await self._sdk(model, "embeddings", self.sdk.embeddings.create(model=model, input=text))
        if failed:
            return failed
        a, b = first.data[0].embedding, second.data[0].embedding
        if not a:
            return self.result(model, "embeddings", False, "empty vector")
        if any(not math.isfinite(x) for x in a):
            return self.result(model, "embeddings", False, "vector holds NaN or infinity")
        same = len(a) == len(b) and all(abs(x - y) <= 1e-6 * max(1.0, abs(x)) for x, y in zip(a, b, strict=True))
        return self.result(
            model,
            "embeddings",
            same,
            f"dimension {len(a)}" + ("" if same else "; identical input gave different vectors"),
            details={"dimension": len(a)},
        )

    async def anthropic(self, model: str) -> CheckResult:
        headers = {"x-api-key": self.target.api_key or "none", "anthropic-version": "2023-06-01", **self.headers}
        try:
            response = await self.http.post(
                self.target.base_url + "/v1/messages",
                headers=headers,
                json={
                    "model": model,
                    "max_tokens": 16,
                    "messages": [{"role": "user", "content": self.prompts.chat(6)}],
                },
            )
        except httpx.HTTPError as exc:
            reason = failed_request(self.target.base_url + "/v1/messages", exc, self.total_s)
            return self.result(model, "anthropic_messages", False, reason)
        if response.status_code != 200:
            return self.result(
                model,
                "anthropic_messages",
                False,
                f"HTTP {response.status_code}: {' '.join(response.text.split())[:160]}",
            )
        try:
            body = response.json()
            text = "".join(c.get("text", "") for c in body.get("content", []) if isinstance(c, dict))
        except (ValueError, AttributeError):
            return self.result(model, "anthropic_messages", False, "not an Anthropic Messages answer")
        return self.result(model, "anthropic_messages", bool(text), "answered" if text else "no text content")

    async def timed(
        self, bodies: list[dict[str, Any]], concurrency: int, path: str = "/v1/chat/completions"
    ) -> tuple[list[StreamResult], float]:
        """Stream every body to `path`, `concurrency` at a time, each event timestamped on arrival; the
        results in order and the wall time of the whole level."""
        gate = asyncio.Semaphore(concurrency)
        starting = asyncio.Semaphore(STARTING_AT_ONCE)
        clients = self._clients(concurrency)

        async def one(index: int, body: dict[str, Any]) -> StreamResult:
            async with gate:
                result = await stream_chat(
                    clients[index % len(clients)],
                    self.target.base_url + path,
                    body,
                    self.headers,
                    self.stall_s,
                    self.total_s,
                    starting,
                )
            self.activity.done += 1
            return result

        started = time.perf_counter()
        results = await asyncio.gather(*(one(i, b) for i, b in enumerate(bodies)))
        return list(results), time.perf_counter() - started

    async def chat_stream(self, model: str, settings: SmokeSettings, concurrency: int, requests: int) -> CheckResult:
        bodies = [
            {
                "model": model,
                "messages": [{"role": "user", "content": self.prompts.chat()}],
                "max_tokens": settings.max_tokens,
                "temperature": 0.7,
                "stream": True,
                "stream_options": {"include_usage": True},
            }
            for _ in range(requests)
        ]
        results, wall = await self.timed(bodies, concurrency)
        stats = level_stats(results, wall)
        failures = [r.reason for r in results if not r.ok]
        reasons: list[str] = []
        if failures:
            reasons.append(f"{len(failures)}/{requests} requests failed: {failures[0]}")
        if any(r.ok and r.usage_tokens is None for r in results):
            reasons.append("usage missing in the stream: output counted from content events")
        slo_fail = slo_failures(settings, stats.ttft, stats.itl, stats.tokens_per_s)
        reasons += slo_fail
        passed = not failures and not slo_fail
        if stats.tokens_per_s is not None:  # the figures, for a reader of the plain output too
            reasons.append(stream_figures(stats, wall))
        if stats.connect:
            reasons.append(connect_words(stats.connect))
        reasons += stats.resent_words()
        summary = "; ".join(reasons)
        return self.result(
            model,
            "chat_stream",
            passed,
            summary,
            concurrency=concurrency,
            requests=requests,
            **stats.figures(),
            details={"wall_s": wall},
        )


def stream_figures(stats: LevelStats, wall_s: float) -> str:
    """TTFT, ITL and tok/s of a level in words: 'TTFT p50 210.4 ms, p95 1.52 s; ITL p95 12.0 ms; 48.2 tok/s
    per stream, 190.1 aggregate; 512 tokens in 2.69 s' (milliseconds under a second, as the console's
    smoke table shows them)."""

    def took(seconds: float | None) -> str:
        if seconds is None:
            return NA
        return f"{seconds * 1000:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"

    words: list[str] = []
    ttft = stats.ttft or {}
    if ttft.get("p50") is not None:
        words.append(f"TTFT p50 {took(ttft['p50'])}, p95 {took(ttft.get('p95'))}")
    itl = (stats.itl or {}).get("p95")
    if itl is not None:
        words.append(f"ITL p95 {itl * 1000:.1f} ms")
    speed = stats.tokens_per_s or {}
    per_stream, aggregate = speed.get("per_stream"), speed.get("aggregate")
    rates = [f"{per_stream:.1f} tok/s per stream"] if per_stream is not None else []
    rates += [f"{aggregate:.1f} aggregate" if rates else f"{aggregate:.1f} tok/s aggregate"] if aggregate else []
    if rates:
        words.append(", ".join(rates))
    words.append(f"{stats.output_tokens} tokens in {wall_s:.2f} s")
    return "; ".join(words)


def connect_words(connect: dict[str, float | None]) -> str:
    """The connect figure for the text output (a CheckResult's reason)."""
    mean, p95, count = connect.get("mean") or 0.0, connect.get("p95") or 0.0, connect.get("connections") or 0
    return f"connect {mean * 1000:.1f} ms mean, {p95 * 1000:.1f} ms p95 ({count:g} new connection(s), part of TTFT)"


def slo_failures(
    settings: SmokeSettings,
    ttft: dict[str, float | None] | None,
    itl: dict[str, float | None] | None,
    tps: dict[str, float | None] | None,
) -> list[str]:
    out = []
    if settings.slo_ttft_p95_s is not None and ttft and (ttft.get("p95") or 0) > settings.slo_ttft_p95_s:
        out.append(f"SLO: TTFT p95 {ttft['p95']:.3f} s > {settings.slo_ttft_p95_s:g} s")
    if settings.slo_itl_p95_s is not None and itl and (itl.get("p95") or 0) > settings.slo_itl_p95_s:
        out.append(f"SLO: ITL p95 {itl['p95']:.4f} s > {settings.slo_itl_p95_s:g} s")
    speed = tps.get("per_stream") if tps else None
    if settings.slo_min_tokens_per_s is not None and (speed is None or speed < settings.slo_min_tokens_per_s):
        out.append(f"SLO: {speed or 0:.1f} tok/s per stream < {settings.slo_min_tokens_per_s:g}")
    return out
