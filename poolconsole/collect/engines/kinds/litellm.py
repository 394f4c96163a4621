"""LiteLLM, a gateway: /health/liveliness and /health/readiness, its models list (a master key may guard
it), and its own per-route, per-caller counters on /metrics (the `prometheus` callback) for the ledger.
It has no GPU and no per-engine metrics: those come from the engines behind it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from poolconsole.collect.engines import jsonparse, litellm_usage
from poolconsole.collect.engines.kinds.base import BIND_LOOPBACK, Capability, EngineAdapter
from poolconsole.collect.engines.scratch import Scratch
from poolconsole.collect.http import Failure, Fetched
from poolconsole.collect.prom import ParseError
from poolconsole.config.models import EngineKind
from poolconsole.model.snapshots import EngineState

if TYPE_CHECKING:
    from poolconsole.collect.engines.poll import EnginePoller


class LitellmAdapter(EngineAdapter):
    kind = EngineKind.LITELLM
    title = "LiteLLM"
    capabilities = Capability.GATEWAY
    health_path = "/health/liveliness"
    scrape_note = 'LiteLLM serves /metrics with callbacks: ["prometheus"] in its config'
    bind_fix = BIND_LOOPBACK
    key_fix = "set general_settings.master_key (or LITELLM_MASTER_KEY) and give callers virtual keys"
    probes_metrics = True
    scraped = True

    async def poll(self, poller: EnginePoller, poll: Scratch) -> None:
        headers = poller.headers(poll)
        paths = ["/health/liveliness", "/health/readiness", "/v1/models", litellm_usage.METRICS_PATH]
        got = await poller.gather(paths, headers)
        _read_gateway_usage(poll, got[litellm_usage.METRICS_PATH])
        live = got["/health/liveliness"]
        if not live.ok:
            poll.worse(poller.failed(live), f"/health/liveliness: {live.error}")
        else:
            try:
                alive = jsonparse.parse_litellm_liveliness(live.body)
                poll.answered(live, "/health/liveliness")
                if not alive:
                    poll.worse(EngineState.DEGRADED, "/health/liveliness did not say it is alive")
            except ParseError as exc:
                poll.worse(EngineState.DEGRADED, str(exc))
        ready = got["/health/readiness"]
        if ready.ok:
            try:
                readiness = jsonparse.parse_litellm_readiness(ready.body)
                poll.extra["readiness"] = readiness
                poll.answered(ready, "/health/readiness")
                if readiness.get("status") != "healthy":
                    poll.worse(EngineState.DEGRADED, f"readiness: {readiness.get('status')}")
            except ParseError as exc:
                poll.worse(EngineState.DEGRADED, str(exc))
        else:
            poll.worse(poller.failed(ready), f"/health/readiness: {ready.error}")
        models = got["/v1/models"]
        if headers or models.ok:
            poller.read_models(poll, models)
        else:
            # A proxy with a master key refuses anonymous calls (LiteLLM 1.108 answers 500 or 400 without a DB).
            poll.extra["models_unknown"] = f"set api_key_env to list the gateway's models ({models.error})"
        poll.all_missing("LiteLLM is a gateway: per-engine metrics come from the engines")


def _read_gateway_usage(poll: Scratch, fetched: Fetched) -> None:
    """The gateway's own per-route, per-caller counters (its `prometheus` callback), for the ledger; a
    gateway without them is still a healthy gateway, so a failure here is a reason, not a state."""
    if not fetched.ok:
        if fetched.failure is Failure.NOT_FOUND:
            why = 'no /metrics: add `callbacks: ["prometheus"]` to the proxy\'s litellm_settings'
        elif fetched.failure is Failure.AUTH:
            why = f"/metrics refused ({fetched.error}): set api_key_env to the proxy's master key"
        else:
            why = f"/metrics: {fetched.error}"
        poll.extra["gateway_usage_unknown"] = why
        return
    try:
        poll.extra["gateway_usage"] = litellm_usage.parse_usage(fetched.body)
    except ParseError as exc:
        poll.extra["gateway_usage_unknown"] = f"/metrics: {exc}"


ADAPTER = LitellmAdapter()
