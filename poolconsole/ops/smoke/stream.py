"""Timed streaming over raw httpx: each SSE event is timestamped on arrival. A stall, malformed SSE,
an HTTP error or a truncated stream ends the request with a reason, never a hang."""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

from poolconsole.collect.wire import TimedStream


@dataclass
class StreamResult:
    ok: bool
    reason: str | None
    sent_at: float
    token_times: list[float] = field(default_factory=list)
    content: str = ""
    usage_tokens: int | None = None
    prompt_tokens: int | None = None
    tool_args: str = ""
    tool_name: str | None = None
    last_event: dict[str, Any] | None = None
    """The last JSON event before [DONE] (usage, llama.cpp timings, a test server's own clock)."""

    @property
    def output_tokens(self) -> int:
        """Completion tokens from the usage chunk; content events when the server sent no usage."""
        return self.usage_tokens if self.usage_tokens is not None else len(self.token_times)

    @property
    def ttft(self) -> float | None:
        return self.token_times[0] - self.sent_at if self.token_times else None

    @property
    def itls(self) -> list[float]:
        return [b - a for a, b in zip(self.token_times, self.token_times[1:], strict=False)]

    @property
    def decode_tps(self) -> float | None:
        """(output tokens - 1) / (last token time - first token time): the decode speed."""
        if len(self.token_times) < 2:
            return None
        span = self.token_times[-1] - self.token_times[0]
        return (self.output_tokens - 1) / span if span > 0 else None


async def stream_chat(
    client: httpx.AsyncClient,
    url: str,
    body: dict[str, Any],
    headers: dict[str, str],
    stall_s: float,
    total_s: float,
    starting: asyncio.Semaphore | None = None,
) -> StreamResult:
    """POST a streaming request and timestamp every SSE event as its bytes arrive.

    On the smoke client (collect.wire) an event's time is when its last bytes reached this host, taken
    at the socket before any parsing; on any other httpx client, when this loop reads it. The read loop
    is kept lean (raw bytes split on blank lines, one stall deadline moved at most every stall_s / 8),
    so that many streams on one core are measured, not distorted (benchmarks/smoke_bench.py).

    `starting`, shared by the streams of one run, bounds how many are being built and sent at once:
    hundreds of requests queued in one event-loop turn would keep the loop from reading the sockets of
    the streams already answering (TTFT still counts from each request's own send)."""
    loop = asyncio.get_running_loop()
    result = StreamResult(False, None, time.perf_counter())
    deadline = loop.time() + total_s

    async def trace(event: str, info: dict[str, Any]) -> None:
        # TTFT counts from the moment the request is on the wire, not from when this coroutine was
        # scheduled: with many streams starting at once, the client's own queue is not the server's.
        if event == "http11.send_request_headers.started":
            result.sent_at = time.perf_counter()
            # Nothing else is traced: every body chunk would otherwise call back here twice.
            extensions.pop("trace", None)

    extensions: dict[str, Any] = {"trace": trace}
    try:
        async with asyncio.timeout(total_s):
            request = client.build_request("POST", url, json=body, headers=headers, extensions=extensions)
            async with starting if starting is not None else contextlib.nullcontext():
                response = await client.send(request, stream=True)
            try:
                await _read_events(response, result, stall_s, deadline)
            finally:
                await response.aclose()
    except TimeoutError:
        result.reason = f"request did not finish within {total_s:g} s"
        return result
    except httpx.HTTPError as exc:
        result.reason = f"{type(exc).__name__}: {exc or 'connection failed'}"
        return result
    if result.reason:
        return result
    if not result.token_times:
        result.reason = "the stream carried no content token"
        return result
    result.ok = True
    return result


async def _read_events(response: httpx.Response, result: StreamResult, stall_s: float, deadline: float) -> None:
    """The SSE events of one answer into `result`; a failure sets `result.reason`. TimeoutError only
    when the whole request's deadline passed."""
    loop = asyncio.get_running_loop()
    if response.status_code != 200:
        text = (await response.aread()).decode(errors="replace")
        result.reason = f"HTTP {response.status_code}: {' '.join(text.split())[:200]}"
        return
    done = False
    buffer = b""
    network = response.extensions.get("network_stream")
    timed = network if isinstance(network, TimedStream) else None
    # The stall deadline moves at most every stall_s / 8 (not a timer rescheduled on every chunk),
    # with that much slack: a stall is caught between stall_s and 9/8 of it after the last chunk.
    rescheduled = last = time.perf_counter()
    slack = stall_s / 8
    try:
        async with asyncio.timeout(stall_s + slack) as stall:
            async for chunk in response.aiter_raw():
                now = timed.arrived if timed is not None else time.perf_counter()
                last = now
                if now > rescheduled + slack:
                    stall.reschedule(min(loop.time() + stall_s + slack, deadline))
                    rescheduled = now
                buffer += chunk
                while not done:
                    cut = buffer.find(b"\n\n")
                    if cut < 0:
                        break
                    frame, buffer = buffer[:cut], buffer[cut + 2 :]
                    done = _frame(result, frame, now)
                    if result.reason:
                        return
                if done:
                    break
    except TimeoutError:
        if loop.time() >= deadline - 0.01:
            raise
        silent = time.perf_counter() - last
        result.reason = f"stream stalled: nothing for {silent:.1f} s after {len(result.token_times)} tokens"
        return
    if not done and buffer.strip():
        done = _frame(result, buffer.strip(), time.perf_counter())
        if result.reason:
            return
    if not done:
        result.reason = f"stream ended without [DONE] after {len(result.token_times)} tokens"


def _frame(result: StreamResult, frame: bytes, now: float) -> bool:
    """One SSE event (its data lines); True at [DONE]. A malformed event sets `result.reason`."""
    for raw in frame.replace(b"\r\n", b"\n").split(b"\n"):
        if not raw.startswith(b"data:"):
            continue
        payload = raw[5:].strip()
        if payload == b"[DONE]":
            return True
        try:
            event = json.loads(payload)
        except ValueError:
            result.reason = f"malformed SSE event: {payload[:120].decode(errors='replace')!r}"
            return False
        _consume(result, event, now)
    return False


def _consume(result: StreamResult, event: Any, now: float) -> None:
    if not isinstance(event, dict):
        return
    result.last_event = event
    if isinstance(event.get("error"), dict | str):
        result.reason = f"error event in the stream: {str(event['error'])[:200]}"
    usage = event.get("usage")
    if isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int):
        result.usage_tokens = usage["completion_tokens"]
        result.prompt_tokens = usage.get("prompt_tokens") if isinstance(usage.get("prompt_tokens"), int) else None
    for choice in event.get("choices") or []:
        delta = choice.get("delta") or choice if isinstance(choice, dict) else {}
        content = delta.get("content") or delta.get("text") if isinstance(delta, dict) else None
        if isinstance(content, str) and content:
            result.content += content
            result.token_times.append(now)
        for call in delta.get("tool_calls") or [] if isinstance(delta, dict) else []:
            fn = call.get("function") or {} if isinstance(call, dict) else {}
            if fn.get("name"):
                result.tool_name = fn["name"]
            if isinstance(fn.get("arguments"), str) and fn["arguments"]:
                result.tool_args += fn["arguments"]
                result.token_times.append(now)


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    rank = q * (len(ordered) - 1)
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


@dataclass(frozen=True)
class LevelStats:
    ttft: dict[str, float | None] | None
    itl: dict[str, float | None] | None
    tokens_per_s: dict[str, float | None] | None
    output_tokens: int
    prompt_tokens: int | None


def level_stats(results: list[StreamResult], wall_s: float) -> LevelStats:
    good = [r for r in results if r.ok]
    ttfts = [r.ttft for r in good if r.ttft is not None]
    itls = [x for r in good for x in r.itls]
    speeds = [s for r in good if (s := r.decode_tps) is not None]
    output = sum(r.output_tokens for r in good)
    prompts = [r.prompt_tokens for r in good if r.prompt_tokens is not None]
    return LevelStats(
        {"mean": statistics.fmean(ttfts), "p50": percentile(ttfts, 0.5), "p95": percentile(ttfts, 0.95)}
        if ttfts
        else None,
        {"mean": statistics.fmean(itls), "p95": percentile(itls, 0.95)} if itls else None,
        {
            "per_stream": statistics.median(speeds) if speeds else None,
            "aggregate": output / wall_s if wall_s > 0 else None,
        }
        if good
        else None,
        output,
        round(statistics.fmean(prompts)) if prompts else None,
    )
