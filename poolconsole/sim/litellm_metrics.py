"""The simulated LiteLLM gateway's own accounting, served on `/metrics/` as LiteLLM 1.108.7's Prometheus
callback serves it (families, label sets and `name[]` filtering as in the real captures,
tests/fixtures/litellm-prometheus/): per requested model (route) and caller key, the successful requests,
prompt and output tokens and the end-to-end request seconds, and the requests in flight.

What it counts: the demo team's requests (the engines' load model; the team reaches the pool through the
gateway, each member with a key of its own) when each finishes, and every request proxied over HTTP
(tokens from the response's `usage`). A request sent to an engine directly (a smoke test) is not counted:
the ledger shows it as traffic that bypassed the gateway, as it would on a real pool. The gateway's
counters survive an engine's restart and start from zero when the gateway starts.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import parse_qs

from poolconsole.sim.load import Req

TEAM = ("team-app", "ide-agents", "batch-eval")
"""The demo team's key aliases: each member (a load-model user) calls with one of them; the bursts are
batch-eval's."""
MASTER_KEY_LABEL = "litellm_proxy_master_key"
_USAGE = re.compile(rb'"usage"\s*:\s*(\{[^{}]*\})')


def hashed(alias: str) -> str:
    """The `hashed_api_key` label of the alias's (demo) key: LiteLLM labels a key with its SHA-256."""
    return hashlib.sha256(f"sk-demo-{alias}".encode()).hexdigest()


@dataclass
class _Series:
    requests: float = 0.0
    prompt_tokens: float = 0.0
    output_tokens: float = 0.0
    latency_s: float = 0.0
    created: float = 0.0


class GatewayUsage:
    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.series: dict[tuple[str, str, str, str], _Series] = {}
        """(route, deployment model, hashed key, alias) -> its counters."""
        self.in_flight = 0

    def count(self, route: str, model: str, key: str, alias: str, prompt: float, output: float, seconds: float) -> None:
        s = self.series.get((route, model, key, alias))
        if s is None:
            s = self.series[(route, model, key, alias)] = _Series(created=self.clock())
        s.requests += 1
        s.prompt_tokens += prompt
        s.output_tokens += output
        s.latency_s += max(seconds, 0.0)

    def team_finished(self, route: str, model: str) -> Callable[[Req, float], None]:
        """The load model's hook for one engine: a team request that finished at `now` is counted here."""

        def finished(req: Req, now: float) -> None:
            alias = TEAM[req.user % 2] if req.user is not None else TEAM[2]
            self.count(route, model, hashed(alias), alias, req.prompt, req.generated, now - req.arrived)

        return finished

    def proxied(self, route: str, model: str, keyed: bool, body: bytes, seconds: float) -> None:
        """A request the gateway forwarded: its tokens from the last `usage` object of the answer (a stream's
        final chunk with include_usage, or the JSON body); a failed one is not a success."""
        found = _USAGE.findall(body)
        usage = json.loads(found[-1]) if found else {}
        key, alias = (MASTER_KEY_LABEL, "None") if keyed else ("None", "None")
        self.count(
            route,
            model,
            key,
            alias,
            float(usage.get("prompt_tokens") or 0),
            float(usage.get("completion_tokens") or 0),
            seconds,
        )

    # -- the page ------------------------------------------------------------------------------------------
    def render(self, query: str = "") -> str:
        """The exposition, only the samples named by `name[]` where the query names any (as LiteLLM's app)."""
        wanted = set(parse_qs(query).get("name[]", []))
        out: list[str] = []

        def family(name: str, kind: str, help_text: str, samples: list[str]) -> None:
            kept = [s for s in samples if not wanted or s.split("{", 1)[0].split(" ", 1)[0] in wanted]
            if kept or not wanted:
                out.extend([f"# HELP {name} {help_text}", f"# TYPE {name} {kind}", *kept])

        def labels(route: str, model: str, key: str, alias: str, extra: dict[str, str]) -> str:
            base = {
                "api_key_alias": alias,
                "api_provider": "openai",
                **extra,
                "end_user": "None",
                "hashed_api_key": key,
                "model": model,
                "model_id": hashlib.sha256(f"{route}/{model}".encode()).hexdigest(),
                "org_alias": "None",
                "org_id": "None",
                "requested_model": route,
                "team": "None",
                "team_alias": "None",
                "user": "None",
            }
            return "{" + ",".join(f'{k}="{v}"' for k, v in sorted(base.items())) + "}"

        rows = sorted(self.series.items())
        requests, created, tokens_in, tokens_out, latency = [], [], [], [], []
        for (route, model, key, alias), s in rows:
            with_client = labels(route, model, key, alias, {"client_ip": "127.0.0.1", "user_agent": "python-httpx"})
            plain = labels(route, model, key, alias, {"user_email": "None"})
            group = labels(route, model, key, alias, {"model_group": route, "service_tier": "None"})
            requests.append(f"litellm_requests_metric_total{with_client} {s.requests:.1f}")
            created.append(f"litellm_requests_metric_created{with_client} {s.created:.9e}")
            tokens_in.append(f"litellm_input_tokens_metric_total{plain} {s.prompt_tokens:.1f}")
            tokens_out.append(f"litellm_output_tokens_metric_total{plain} {s.output_tokens:.1f}")
            latency.append(f"litellm_request_total_latency_metric_count{group} {s.requests:.1f}")
            latency.append(f"litellm_request_total_latency_metric_sum{group} {s.latency_s}")
        family(
            "litellm_proxy_failed_requests_metric_total",
            "counter",
            "Total number of failed responses from proxy - the client did not get a success response from "
            "litellm proxy",
            [],
        )
        family(
            "litellm_request_total_latency_metric",
            "histogram",
            "End-to-end latency (seconds) for a request to LiteLLM Proxy Server, from the moment the request "
            "reached the proxy through the end of processing -- includes authentication, pre-call hooks, the LLM "
            "API call, and post-call processing",
            latency,
        )
        for direction, samples in (("input", tokens_in), ("output", tokens_out)):
            name = f"litellm_{direction}_tokens_metric_total"
            family(name, "counter", f"Total number of {direction} tokens from LLM requests", samples)
        family(
            "litellm_requests_metric_total",
            "counter",
            "deprecated - use litellm_proxy_total_requests_metric. Total number of LLM calls to litellm - track "
            "total per API Key, team, user",
            requests,
        )
        family(
            "litellm_requests_metric_created",
            "gauge",
            "deprecated - use litellm_proxy_total_requests_metric. Total number of LLM calls to litellm - track "
            "total per API Key, team, user",
            created,
        )
        family(
            "litellm_in_flight_requests",
            "gauge",
            "Number of HTTP requests currently in-flight on this uvicorn worker",
            [f"litellm_in_flight_requests {float(self.in_flight):.1f}"],
        )
        return "\n".join(out) + "\n"
