"""Timed streaming over raw httpx: each SSE event is timestamped on arrival. A stall, malformed SSE,
an HTTP error or a truncated stream ends the request with a reason, never a hang."""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import statistics
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx

from poolconsole.collect.http import address_of, connect_reason
from poolconsole.collect.smoke_transport import TimedStream


@dataclass
class StreamResult:
    ok: bool
    reason: str | None
    started_at: float
    """The request's start, as a client sees it: when it began to open its connection (name lookup,
    TCP, TLS), or when it began to go out on a kept-alive one."""
    sent_at: float = 0.0
    """When the request's headers began to go out (its connection set up)."""
    connect_s: float | None = None
    """Connection set-up (name lookup, TCP connect, TLS handshake) when this request opened one; None
    on a kept-alive connection."""
    token_times: list[float] = field(default_factory=list)
    content: str = ""
    usage_tokens: int | None = None
    prompt_tokens: int | None = None
    tool_args: str = ""
    tool_name: str | None = None
    last_event: dict[str, Any] | None = None
    """The last JSON event before [DONE] (usage, llama.cpp timings, a test server's own clock)."""
    resent: bool = False
    """Sent a second time, on a new connection: the kept-alive one it first went out on closed before
    any answer (the server had already let it go), as browsers resend in that case."""

    @property
    def output_tokens(self) -> int:
        """Completion tokens from the usage chunk; content events when the server sent no usage."""
        return self.usage_tokens if self.usage_tokens is not None else len(self.token_times)

    @property
    def ttft(self) -> float | None:
        """From the request's start, connection set-up included (as `vllm bench serve` counts it)."""
        return self.token_times[0] - self.started_at if self.token_times else None

    @property
    def itls(self) -> list[float]:
        return [b - a for a, b in zip(self.token_times, self.token_times[1:], strict=False)]

    @property
    def decode_tps(self) -> float | None:
        """(output tokens - 1) / (last token time - first token time): the decode speed. Where every token
        arrived in one read (a fast engine's tokens coalesced into one TCP segment, or a client busy elsewhere
        on a loaded machine) there is no span to time, and the engine's own figure is taken where it gives
        one (llama.cpp's `timings.predicted_per_second` in its last event); else it is unknown."""
        if self.output_tokens < 2:
            return None
        span = self.token_times[-1] - self.token_times[0] if len(self.token_times) >= 2 else 0.0
        if span > 0:
            return (self.output_tokens - 1) / span
        return self.engine_decode_tps

    @property
    def engine_decode_tps(self) -> float | None:
        """The decode speed the engine measured itself, from its last event (llama.cpp's timings)."""
        timings = (self.last_event or {}).get("timings")
        value = timings.get("predicted_per_second") if isinstance(timings, dict) else None
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value > 0:
            return float(value)
        return None


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

    On the smoke client (collect.smoke_transport) an event's time is when its last bytes reached this host, taken
    at the socket before any parsing; on any other httpx client, when this loop reads it. The read loop
    is kept lean (raw bytes split on blank lines, one stall deadline moved at most every stall_s / 8),
    so that many streams on one core are measured, not distorted (benchmarks/smoke_bench.py).

    TTFT counts from the request's start as a client sees it: the start of its connect when it opens a
    connection (name lookup, TCP, TLS: `connect_s`), else the start of its send. Waits inside this
    client before that (`starting`, httpcore's pool waiting for a free connection) are not counted.

    `starting`, shared by the streams of one run, bounds how many are being built and sent at once:
    hundreds of requests queued in one event-loop turn would keep the loop from reading the sockets of
    the streams already answering.

    A request that went out on a kept-alive connection the server closed before answering any of it
    (`Server disconnected without sending a response`) is sent once more on a new connection, and marked
    `resent`: the server never read it, and a client that did not reuse connections would not have seen
    it fail. A request on a connection of its own that fails so is a failure."""
    ask = _Ask(client, url, body, headers, stall_s, total_s, starting)
    deadline = asyncio.get_running_loop().time() + total_s
    result = await _attempt(ask, deadline)
    if result.reason == _CLOSED_IDLE:
        result = await _attempt(ask, deadline, resend=True)
        result.resent = True
    return result


_CLOSED_IDLE = "closed before answering on a kept-alive connection"


@dataclass(frozen=True)
class _Ask:
    """What stream_chat was asked to send, for each try of it."""

    client: httpx.AsyncClient
    url: str
    body: dict[str, Any]
    headers: dict[str, str]
    stall_s: float
    total_s: float
    starting: asyncio.Semaphore | None


async def _attempt(ask: _Ask, deadline: float, resend: bool = False) -> StreamResult:
    """One try of stream_chat; its reason is _CLOSED_IDLE when a kept-alive connection closed before any
    answer (a first try only: a resent one that fails so says why)."""
    client, url, starting = ask.client, ask.url, ask.starting
    result = StreamResult(False, None, time.perf_counter())
    connecting: float | None = None

    async def trace(event: str, info: dict[str, Any]) -> None:
        # httpcore calls back from the request's own task: before a connect, before the send.
        nonlocal connecting
        if event in ("connection.connect_tcp.started", "connection.connect_unix_socket.started"):
            if connecting is None:
                connecting = result.started_at = time.perf_counter()
        elif event == "http11.send_request_headers.started":
            result.sent_at = time.perf_counter()
            if connecting is None:
                result.started_at = result.sent_at
            else:
                result.connect_s = result.sent_at - connecting
            # Nothing else is traced: every body chunk would otherwise call back here twice.
            extensions.pop("trace", None)

    extensions: dict[str, Any] = {"trace": trace}
    try:
        async with asyncio.timeout_at(deadline):
            request = client.build_request("POST", url, json=ask.body, headers=ask.headers, extensions=extensions)
            try:
                async with starting if starting is not None else contextlib.nullcontext():
                    response = await client.send(request, stream=True)
            except httpx.RemoteProtocolError:
                if resend or connecting is not None or not result.sent_at:
                    raise
                result.reason = _CLOSED_IDLE
                return result
            try:
                await _read_events(response, result, ask.stall_s, deadline)
            finally:
                await response.aclose()
    except TimeoutError:
        result.reason = f"{url}: request did not finish within {ask.total_s:g} s"
        return result
    except httpx.HTTPError as exc:
        result.reason = failed_request(url, exc)
        return result
    if result.reason:
        return result
    if not result.token_times:
        result.reason = "the stream carried no content token"
        return result
    result.ok = True
    return result


def failed_request(url: str, exc: BaseException, timeout_s: float | None = None) -> str:
    """A request that got no answer, in words: the URL, then the cause, a failed connect in the words of
    `poolconsole status` (collect.http); past `timeout_s`, "no answer within" as status says it too.
    Connect failures are known by name along the cause chain: httpx's and httpcore's, and those of the
    httpx fork under the openai SDK (httpx2), are all called ConnectError and ConnectTimeout."""
    seen: BaseException | None = exc
    timed_out = False
    while seen is not None:
        kind = type(seen).__name__
        if kind == "ConnectError":
            return f"{url}: {connect_reason(seen, address_of(url))}"
        if kind == "ConnectTimeout":
            return f"{url}: cannot connect: {seen or 'the connect timed out'}"
        timed_out = timed_out or isinstance(seen, TimeoutError) or kind.endswith("Timeout")
        seen = seen.__cause__ or seen.__context__
    if timed_out:  # httpx's read timeouts carry no message: "ReadTimeout: " said nothing
        return f"{url}: no answer within {timeout_s:g} s" if timeout_s is not None else f"{url}: no answer (timed out)"
    return f"{url}: {type(exc).__name__}: {str(exc) or 'connection failed'}"


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
    chunks = response.aiter_raw()
    try:
        async with asyncio.timeout(stall_s + slack) as stall:
            async for chunk in chunks:
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
        return
    await _to_the_end(chunks)


END_WAIT_S = 0.5


async def _to_the_end(chunks: AsyncIterator[bytes]) -> None:
    """After [DONE], the rest of the body (the chunked body's end, as a rule right behind it). A response
    read to its end leaves its connection kept alive for the next request, as any client's would (one
    left unread is closed by httpx, and the next request would pay a new connect); a body that does not
    end within END_WAIT_S is closed instead."""
    with contextlib.suppress(TimeoutError, httpx.HTTPError):
        async with asyncio.timeout(END_WAIT_S):
            async for _ in chunks:
                pass


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
    connect: dict[str, float | None] | None = None
    """Connection set-up of the requests that opened a connection: mean, p95 and how many did; None
    when every request went out on a kept-alive connection."""
    resent: int = 0
    """Requests sent again because their kept-alive connection closed before an answer (StreamResult.resent)."""

    def resent_words(self) -> list[str]:
        """For a CheckResult's reason: what was sent twice, if anything."""
        if not self.resent:
            return []
        return [f"{self.resent} request(s) sent again on a new connection: the kept-alive one closed unanswered"]

    def figures(self) -> dict[str, Any]:
        """The timing and token fields of a CheckResult measured at this level."""
        return {
            "ttft_s": self.ttft,
            "connect_s": self.connect,
            "itl_s": self.itl,
            "output_tokens_per_s": self.tokens_per_s,
            "prompt_tokens": self.prompt_tokens,
            "output_tokens": self.output_tokens,
        }


def level_stats(results: list[StreamResult], wall_s: float) -> LevelStats:
    good = [r for r in results if r.ok]
    ttfts = [r.ttft for r in good if r.ttft is not None]
    connects = [r.connect_s for r in good if r.connect_s is not None]
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
        {"mean": statistics.fmean(connects), "p95": percentile(connects, 0.95), "connections": len(connects)}
        if connects
        else None,
        sum(r.resent for r in results),
    )
