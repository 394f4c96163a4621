"""The LiteLLM gateway's own accounting, parsed from its Prometheus page (pure: bytes in, a JSON-ready dict
out; no network).

What LiteLLM 1.108.7 serves without a license or a database (tested against the real proxy, README
"Ledger"): with `litellm_settings.callbacks: ["prometheus"]` (and `prometheus-client` installed beside it)
`/metrics/` carries, per requested model group and caller key, the successful requests
(`litellm_requests_metric_total`), the failed ones (`litellm_proxy_failed_requests_metric_total`), prompt
and output tokens (`litellm_input_tokens_metric_total`, `litellm_output_tokens_metric_total`, from each
response's `usage`), the end-to-end request seconds (`litellm_request_total_latency_metric_sum`), and per
key the rate-limit window in use (`litellm_api_key_rate_limit_{used,allowed}_metric`). Spend logs
(`/spend/logs`, `/global/spend/*`) need its Postgres database and answer 500 without one.

A caller is named by its key alias where the key has one, "master key" for the proxy's master key, else
"key " and the first 12 hex digits of the SHA-256 LiteLLM labels it with. A key itself is never kept: a
label value that is not such a hash (a proxy that did not hash it) is hashed here before anything is kept.
"""

from __future__ import annotations

import hashlib
import math
import re
from typing import Any

from poolconsole.collect.prom import ParseError, Sample, parse_exposition

COUNTERS = {
    "litellm_requests_metric_total": "requests",
    "litellm_proxy_failed_requests_metric_total": "failed_requests",
    "litellm_input_tokens_metric_total": "prompt_tokens",
    "litellm_output_tokens_metric_total": "output_tokens",
    "litellm_request_total_latency_metric_sum": "latency_s",
}
"""Sample name -> the field of a caller row (summed over every other label: client IP, user agent,
deployment id...)."""
LIMITS = {
    "litellm_api_key_rate_limit_used_metric": "used",
    "litellm_api_key_rate_limit_allowed_metric": "limit",
}
IN_FLIGHT = "litellm_in_flight_requests"
WANTED = (*COUNTERS, *LIMITS, IN_FLIGHT)
METRICS_PATH = "/metrics/?" + "&".join(f"name%5B%5D={name}" for name in WANTED)
"""LiteLLM mounts its Prometheus app at /metrics (and redirects /metrics to /metrics/, 307); its app serves
only the samples named by `name[]`. The whole page is ~32 KB per route and caller (mostly histogram
buckets, 258 KB for 4 pairs on 1.108.7); these samples are ~2 KB per pair."""
FAST_NAMES: frozenset[str] | None = frozenset(WANTED)
"""The names handed to parse_exposition, so that its fast reader parses the page: without them every page
went through prometheus_client's own parser (~3 ms a demo page, ~30 % of a 64-node demo console's CPU,
py-spy). None would parse with prometheus_client alone (tests compare the two)."""
MASTER_KEY_LABEL = "litellm_proxy_master_key"
"""What LiteLLM 1.108.7 puts in `hashed_api_key` for calls made with the master key."""
_HASH = re.compile(r"^[0-9a-f]{64}$")
_NONE = {"", "None", "none", "null"}


def key_id(hashed: str | None) -> str | None:
    """The 12 hex digits a caller key is known by, from LiteLLM's `hashed_api_key` label; never the key."""
    if hashed is None or hashed in _NONE:
        return None
    if hashed == MASTER_KEY_LABEL:
        return "master"
    if not _HASH.match(hashed):  # not a hash: hash it rather than keep what may be the key itself
        hashed = hashlib.sha256(hashed.encode()).hexdigest()
    return hashed[:12]


def caller_name(hashed: str | None, alias: str | None) -> str:
    """The key's alias, "master key", "key <12 hex digits>", or "no key"."""
    if alias is not None and alias not in _NONE:
        return alias
    found = key_id(hashed)
    if found == "master":
        return "master key"
    return f"key {found}" if found else "no key"


def _lines(text: str) -> str:
    """Only the sample lines read here: the page also holds every histogram's buckets (258 KB for 8
    route/caller pairs on 1.108.7), which nothing here needs."""
    keep = [line for line in text.split("\n") if line.startswith(WANTED)]
    return "\n".join(keep) + "\n"


def _samples(kept: str) -> list[Sample]:
    """The kept lines' samples, read by the fast path. A page with a line it cannot count as a sample goes
    through prometheus_client as before (and one the fast path refuses), so that a broken page is judged (and
    refused) as it always was."""
    if FAST_NAMES is not None:
        try:
            fast = parse_exposition(kept, FAST_NAMES)
        except ParseError:
            fast = None
        if fast is not None and not fast.bad_lines:
            return fast.samples
    return parse_exposition(kept).samples


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) and value < 1e18 else None  # 2**63 stands for "no limit"


def parse_usage(body: bytes | str) -> dict[str, Any]:
    """{"callers": [{route, caller, key, models, requests, failed_requests, prompt_tokens, output_tokens,
    latency_s}], "limits": [{caller, key, type, used, limit}], "in_flight": n | None}: running counters as
    the gateway has them (it sums each series since it started). ParseError for a page that is not
    Prometheus text or is not LiteLLM's (no litellm_ metric at all)."""
    text = body.decode("utf-8", errors="replace") if isinstance(body, bytes) else body
    if "litellm_" not in text:
        raise ParseError("no litellm_ metric on the page: is the `prometheus` callback configured?")
    samples: list[Sample] = _samples(_lines(text)) if text.strip() else []
    callers: dict[tuple[str, str], dict[str, Any]] = {}
    limits: dict[tuple[str, str], dict[str, Any]] = {}
    in_flight: float | None = None
    for s in samples:
        field = COUNTERS.get(s.name)
        if field is not None:
            route = s.label("requested_model") or s.label("model_group") or "unknown"
            caller = caller_name(s.label("hashed_api_key"), s.label("api_key_alias"))
            row = callers.get((route, caller))
            if row is None:
                row = callers[(route, caller)] = {
                    "route": route,
                    "caller": caller,
                    "key": key_id(s.label("hashed_api_key")),
                    "models": [],
                    **dict.fromkeys(COUNTERS.values(), 0.0),
                }
            row[field] += s.value
            model = s.label("model")
            if model and model not in _NONE and model not in row["models"]:
                row["models"].append(model)
            continue
        kind = LIMITS.get(s.name)
        if kind is not None:
            caller = caller_name(s.label("hashed_api_key"), s.label("api_key_alias"))
            limit_type = s.label("rate_limit_type") or "requests"
            entry = limits.setdefault(
                (caller, limit_type),
                {
                    "caller": caller,
                    "key": key_id(s.label("hashed_api_key")),
                    "type": limit_type,
                    "used": None,
                    "limit": None,
                },
            )
            entry[kind] = _finite(s.value)
        elif s.name == IN_FLIGHT:
            in_flight = (in_flight or 0.0) + s.value
    for row in callers.values():
        row["latency_s"] = round(row["latency_s"], 6)
    return {
        "callers": [callers[k] for k in sorted(callers)],
        "limits": [limits[k] for k in sorted(limits)],
        "in_flight": in_flight,
    }
