"""The counters a measured window reads before and after (speculative decoding per workload, the servable
context): an engine's speculative-decoding counters and gauges, and the traffic counters that say whether
other requests shared the window.

Names per engine (shared/reference/telemetry-formats.md 1.3, 2.1, 3.1; checked against the real captures):
vLLM `vllm:spec_decode_num_{draft_tokens,accepted_tokens,drafts}_total` (only with --speculative-config);
llama.cpp the same names under `llamacpp:` (0 while speculative decoding is off); SGLang only gauges,
`sglang:spec_accept_rate` and `sglang:spec_accept_length`, over its last log interval.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import cache
from types import MappingProxyType
from typing import Any

import httpx

from poolconsole.collect.engines.kinds import adapter_named
from poolconsole.collect.engines.mapping import Agg, MetricSpec, parse_metrics
from poolconsole.collect.prom import ParseError
from poolconsole.model.snapshots import EMPTY

FROM_ENGINE = {
    "requests_running": "requests_running",
    "requests_waiting": "requests_waiting",
    "kv_cache_usage": "kv_cache_usage",
    "accept_rate": "spec_decode_acceptance_rate_gauge",
    "draft_tokens": "spec_decode_draft_tokens_total",
    "accepted_tokens": "spec_decode_accepted_tokens_total",
    "requests": "requests_finished_total",
    "prompt_tokens": "prompt_tokens_total",
    "generation_tokens": "generation_tokens_total",
    "preemptions": "preemptions_total",
}
"""The window's names -> the engine specs' normalized names: the same metric families (and aliases, rank
and duplicate rules) the poller reads, so a rename in an engine version is handled in one place."""


def _window(
    spec: MetricSpec,
    gauges: dict[str, tuple[tuple[str, ...], Agg]] | None = None,
    counters: dict[str, tuple[str, ...]] | None = None,
) -> MetricSpec:
    """The engine's spec narrowed to the window's names, with the few families only a window reads."""
    return replace(
        spec,
        gauges={w: spec.gauges[e] for w, e in FROM_ENGINE.items() if e in spec.gauges} | (gauges or {}),
        counters={w: spec.counters[e] for w, e in FROM_ENGINE.items() if e in spec.counters} | (counters or {}),
        histograms={},
        not_exposed={},
    )


@cache
def window_spec(kind: str) -> MetricSpec | None:
    """The window's spec of a kind (its metric spec narrowed, with the families its adapter adds); None for
    a kind with no /metrics spec."""
    found = adapter_named(kind)
    if found is None or found.spec is None:
        return None
    return _window(found.spec, dict(found.window_gauges), dict(found.window_counters))


@dataclass(frozen=True)
class Reading:
    """One read of an engine's window counters; `error` says why there is none."""

    kind: str
    values: MappingProxyType[str, float] = field(default_factory=lambda: EMPTY)
    error: str | None = None

    def get(self, name: str) -> float | None:
        value = self.values.get(name)
        return value if value is not None and math.isfinite(value) else None


def parse_window(kind: str, body: bytes | str) -> Reading:
    """A /metrics page -> the window's counters (pure)."""
    spec = window_spec(kind)
    if spec is None:
        return Reading(kind, error=f"{kind} serves no speculative-decoding or request counters")
    try:
        metrics, _, _ = parse_metrics(body, spec)
    except ParseError as exc:
        return Reading(kind, error=f"/metrics could not be read: {exc}")
    return Reading(kind, MappingProxyType(dict(metrics.values)))


async def read_window(client: httpx.AsyncClient, base_url: str, kind: str, headers: dict[str, str]) -> Reading:
    """GET /metrics and read the window's counters; never raises for network or HTTP problems."""
    if window_spec(kind) is None:
        return parse_window(kind, "")
    try:
        response = await client.get(base_url + "/metrics", headers=headers)
    except httpx.HTTPError as exc:
        return Reading(kind, error=f"/metrics did not answer: {type(exc).__name__}: {exc}")
    if response.status_code != 200:
        return Reading(kind, error=f"/metrics answered HTTP {response.status_code}")
    return parse_window(kind, response.content)


def delta(before: Reading, after: Reading, name: str) -> float | None:
    """Growth of a counter over the window; a counter that fell (a restart in the window) is None."""
    a, b = before.get(name), after.get(name)
    if a is None or b is None or b < a:
        return None
    return b - a


def spec_figures(before: Reading, after: Reading) -> dict[str, Any]:
    """Acceptance rate and mean accepted length over the window, with where they came from, or a reason.

    Counters (vLLM, llama.cpp): rate = Δaccepted / Δdraft tokens, mean accepted length = 1 + Δaccepted /
    Δdrafts (vLLM's own formulas, vllm/v1/spec_decode/metrics.py). SGLang: its gauges read after the run."""
    out: dict[str, Any] = {
        "acceptance_rate": None,
        "mean_accepted_length": None,
        "draft_tokens": None,
        "accepted_tokens": None,
        "drafts": None,
        "source": None,
        "reason": None,
    }
    if before.error or after.error:
        out["reason"] = after.error or before.error
        return out
    spec = window_spec(after.kind)
    if spec is not None and "accept_rate" in spec.gauges:  # a kind that says its rate (SGLang), not counts
        rate, length = after.get("accept_rate"), after.get("accept_length")
        rate_name = spec.gauges["accept_rate"][0][0]  # the newest name: sglang:spec_accept_rate
        if rate is None or not rate:
            out["reason"] = f"no speculative decoding: {rate_name} is absent or 0"
            return out
        lengths = spec.gauges.get("accept_length")
        gauges = f"{rate_name} / {lengths[0][0].removeprefix(spec.prefix)} gauges" if lengths else f"{rate_name} gauge"
        out.update(
            acceptance_rate=rate,
            mean_accepted_length=length,
            source=f"{gauges} after the run (its last log interval)",
        )
        return out
    if after.get("draft_tokens") is None:
        out["reason"] = f"no speculative decoding: {after.kind} /metrics has no spec_decode counters"
        return out
    drafted, accepted, drafts = (
        delta(before, after, "draft_tokens"),
        delta(before, after, "accepted_tokens"),
        delta(before, after, "drafts"),
    )
    out.update(draft_tokens=drafted, accepted_tokens=accepted, drafts=drafts)
    if drafted is None or accepted is None:
        out["reason"] = "the spec_decode counters went back during the run (an engine restart)"
        return out
    if drafted == 0:
        out["reason"] = "no speculative decoding: no draft token was proposed during the run"
        return out
    out["acceptance_rate"] = accepted / drafted
    out["mean_accepted_length"] = 1 + accepted / drafts if drafts else None
    out["source"] = f"{after.kind} spec_decode counters: Δaccepted / Δdraft tokens"
    return out


def shared_window(before: Reading, after: Reading, requests: int, output_tokens: int) -> str | None:
    """Words when other traffic shared the window: the engine counted more finished requests (or generated
    tokens, where it counts no requests) than the run sent; None when it did not, or cannot be told."""
    done = delta(before, after, "requests")
    if done is not None and done > requests:
        return f"other traffic shared the window: the engine finished {done:.0f} requests, the run sent {requests}"
    generated = delta(before, after, "generation_tokens")
    if generated is not None and generated > output_tokens * 1.05 + 8:
        return (
            f"other traffic shared the window: the engine generated {generated:.0f} tokens, "
            f"the run received {output_tokens}"
        )
    return None
