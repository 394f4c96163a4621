"""The poll of an engine that serves Prometheus /metrics (vLLM, SGLang, llama.cpp): one request per poll in
the steady state. Models and version are read on the first poll, every MODELS_EVERY polls and after a
restart; /health only when /metrics fails, to tell a dead engine from one that only hides its metrics."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from poolconsole.collect.engines.kinds.base import EngineAdapter
from poolconsole.collect.engines.mapping import MetricSpec, parse_metrics
from poolconsole.collect.engines.scratch import Scratch
from poolconsole.collect.http import Failure, Fetched
from poolconsole.collect.prom import ParseError, check_whole, decode
from poolconsole.model.snapshots import EngineState

if TYPE_CHECKING:
    from poolconsole.collect.engines.poll import EnginePoller

MODELS_EVERY = 30


class MetricsEngineAdapter(EngineAdapter):
    """An engine read from its /metrics page through its metric spec."""

    spec: ClassVar[MetricSpec]
    health_path: ClassVar[str] = "/health"
    probes_metrics: ClassVar[bool] = True
    scraped: ClassVar[bool] = True
    extra_paths: ClassVar[tuple[str, ...]] = ()
    """Read on every poll beside /metrics (llama.cpp's /slots)."""
    loading_on_503: ClassVar[bool] = False
    """/health answering 503 means loading a model (degraded), not unhealthy (down)."""

    async def poll(self, poller: EnginePoller, poll: Scratch) -> None:
        headers = poller.headers(poll)
        paths = ["/metrics", *self.extra_paths]
        refresh = poller.models is None or poller.polls % MODELS_EVERY == 0
        if refresh:
            paths.append("/v1/models")
        if poller.version is None and self.version_path is not None:
            paths.append(self.version_path)
        poller.polls += 1
        got = await poller.gather(paths, headers)
        metrics = got["/metrics"]
        if metrics.failure in (Failure.REFUSED, Failure.TIMEOUT):
            poll.worse(EngineState.DOWN, metrics.error or "unreachable")
            # its own words, not the failure's kind ("refused" was said of a name that does not resolve)
            poll.all_missing(f"engine down: {(metrics.error or 'unreachable').split(' (')[0]}")
            poller.models = None
            return
        if not metrics.ok:
            health = (await poller.gather(["/health"], headers))["/health"]
            if health.status == 503:
                loading = self.loading_on_503
                poll.worse(
                    EngineState.DEGRADED if loading else EngineState.DOWN,
                    "loading model (/health answers 503)" if loading else "engine not healthy: /health answers 503",
                )
                poll.all_missing("loading model" if loading else "engine not healthy")
                poller.models = None
                return
        self.read_metrics(poller, poll, metrics)
        if poll.restart_marker != poller.restart_marker and poller.restart_marker is not None and not refresh:
            poller.models = None  # a restart may serve other models (a profile switch): read them next poll
        poller.restart_marker = poll.restart_marker or poller.restart_marker
        if "/v1/models" in got:
            poller.read_models(poll, got["/v1/models"])
        else:
            poll.models = poller.models or ()
        self.after_metrics(poller, poll, got)
        if self.version_path is not None and self.version_path in got and got[self.version_path].ok:
            poller.version = self.version_of(got[self.version_path]) or poller.version

    def after_metrics(self, poller: EnginePoller, poll: Scratch, got: dict[str, Fetched]) -> None:
        """The kind's own endpoints (extra_paths), read once the metrics are in."""

    def read_metrics(self, poller: EnginePoller, poll: Scratch, fetched: Fetched) -> None:
        spec = self.spec
        if not fetched.ok:
            if fetched.failure is Failure.NOT_FOUND:
                poll.worse(EngineState.DEGRADED, f"/metrics not exposed (HTTP 404): {self.metrics_hint}")
                poll.all_missing("metrics disabled on this engine (/metrics answers 404)")
            elif fetched.failure is Failure.AUTH:
                poll.worse(EngineState.AUTH_FAILED, f"/metrics: {fetched.error}")
                poll.all_missing("auth required: set api_key_env")
            else:
                poll.worse(poller.failed(fetched), f"/metrics: {fetched.error}")
                poll.all_missing(f"/metrics failed: {fetched.failure}")
            return
        try:
            page = decode(fetched.body)
            check_whole(page)  # a cut page is a failed poll, not a page with fewer samples
            metrics, missing, exposition = parse_metrics(page, spec, poller.page)
        except ParseError as exc:
            poll.worse(EngineState.DEGRADED, f"/metrics: {exc}")
            poll.all_missing("/metrics body could not be parsed")
            return
        poll.answered(fetched, "/metrics")
        poll.sampled = fetched.sampled_monotonic
        if exposition.bad_lines:
            poll.worse(
                EngineState.DEGRADED,
                f"/metrics: {exposition.bad_lines} line(s) could not be parsed and "
                f"were dropped (first: {exposition.first_bad!r})",
            )
        if metrics.series == 0:
            poll.worse(EngineState.DEGRADED, f"/metrics has no {spec.prefix}* series ({self.no_series_hint})")
            poll.all_missing(f"no {spec.prefix}* series in /metrics")
            return
        metrics, missing = self.adjust_metrics(metrics, missing)
        poll.metrics = metrics
        poll.missing.update(missing)
        start = metrics.get("process_start_time")
        if start is not None:
            poll.restart_marker = f"{start:.3f}"
        header = fetched.headers.get("process-start-time-unix")
        if header:
            poll.restart_marker = header
