"""`poolconsole exporter`: the normalized pool on /metrics for a team's Prometheus (nvitop-exporter's place
beside nvitop's api/). A LivePool polls the pool on the event loop that also serves HTTP; at each scrape a
custom prometheus_client collector builds the families from the pool state as it is at that moment, so
what Prometheus stores is what the console shows.

Unknown is absent: a value the engine or host does not expose, or not yet, has no sample (never 0), the
same rule as the console's "n/a". The token counters come from each engine's reset-safe running totals
(EngineTrack.totals), monotonic across engine restarts, so `rate()` and `increase()` are right; they start
again from the engines' own values when the exporter restarts, which Prometheus reads as one reset."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Iterable, Sequence

from aiohttp import web
from prometheus_client import CollectorRegistry, PlatformCollector, ProcessCollector
from prometheus_client.aiohttp import make_aiohttp_handler
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from poolconsole.config.models import PoolConfig
from poolconsole.model.hosts import HostState
from poolconsole.model.pool_state import PoolState
from poolconsole.model.snapshots import EngineState
from poolconsole.runtime.live import LivePool, Update
from poolconsole.runtime.stopping import stop_on_signals

ENGINE_LABELS = ("engine", "kind", "host")
GPU_LABELS = ("host", "gpu", "memory_kind")

COUNTER_HELP = {
    "generation_tokens_total": "Tokens generated (reset-safe: monotonic across engine restarts).",
    "prompt_tokens_total": "Prompt tokens processed (reset-safe: monotonic across engine restarts).",
    "requests_finished_total": "Requests finished (reset-safe).",
    "preemptions_total": "Requests preempted (reset-safe).",
    "prefix_cache_queries_total": "Prefix-cache lookups, in tokens (reset-safe).",
    "prefix_cache_hits_total": "Prefix-cache hits, in tokens (reset-safe).",
    "spec_decode_draft_tokens_total": "Speculative-decoding draft tokens (reset-safe).",
    "spec_decode_accepted_tokens_total": "Speculative-decoding accepted draft tokens (reset-safe).",
}
"""The counters served from EngineTrack.totals, each as poolconsole_engine_<name>."""


Families = dict[str, GaugeMetricFamily | CounterMetricFamily]


class ListenError(Exception):
    """--listen names no address this machine can serve on; the message is a sentence naming it."""


def parse_listen(text: str) -> tuple[str, int]:
    """HOST:PORT (an IPv6 host in brackets, [::1]:9877); port 0 picks a free one."""
    host, sep, port_text = text.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not host or not port_text.isdigit() or int(port_text) > 65535:
        raise ListenError(f"--listen {text!r} is not HOST:PORT (e.g. 127.0.0.1:9877, 0.0.0.0:9877 or [::1]:9877)")
    return host, int(port_text)


class PoolCollector:
    """Builds every poolconsole_* family from the pool state, each time Prometheus scrapes. Called on the
    event loop (the aiohttp handler runs there), so it never sees a half-applied poll."""

    def __init__(self, state: PoolState) -> None:
        self.state = state

    def describe(self) -> Iterable[Metric]:
        """The families without samples: the registry checks names against the other collectors."""
        return list(self._families().values())

    def collect(self) -> Iterable[Metric]:
        families = self._families()
        self._engines(families)
        self._hosts(families)
        return list(families.values())

    @staticmethod
    def _families() -> Families:
        def gauge(name: str, text: str, labels: Iterable[str], unit: str = "") -> GaugeMetricFamily:
            return GaugeMetricFamily(f"poolconsole_{name}", text, labels=list(labels), unit=unit)

        out: Families = {
            "engine_up": gauge("engine_up", "1 when the engine's last poll was ok, 0 otherwise.", ENGINE_LABELS),
            "engine_state": gauge(
                "engine_state",
                "1 for the engine's state at its last poll, 0 for the others.",
                (*ENGINE_LABELS, "state"),
            ),
            "engine_info": gauge("engine_info", "The engine's reported version.", (*ENGINE_LABELS, "version")),
            "engine_requests_running": gauge(
                "engine_requests_running",
                "Requests being processed (absent when the engine does not say).",
                ENGINE_LABELS,
            ),
            "engine_requests_waiting": gauge(
                "engine_requests_waiting", "Requests queued (absent when the engine does not say).", ENGINE_LABELS
            ),
            "engine_kv_cache_usage_ratio": gauge(
                "engine_kv_cache_usage_ratio", "KV-cache usage, 0..1.", ENGINE_LABELS, unit="ratio"
            ),
            "engine_generation_tokens_per_second": gauge(
                "engine_generation_tokens_per_second",
                "Generation tokens per second over the console's last poll window (rate() of the counter is "
                "Prometheus's own).",
                ENGINE_LABELS,
            ),
            "engine_last_ok_timestamp_seconds": gauge(
                "engine_last_ok_timestamp_seconds", "When the engine last answered a poll with metrics.", ENGINE_LABELS
            ),
            "host_up": gauge("host_up", "1 when the host's last poll was ok, 0 otherwise.", ("host",)),
            "host_state": gauge(
                "host_state", "1 for the host's state at its last poll, 0 for the others.", ("host", "state")
            ),
            "host_gpu_info": gauge(
                "host_gpu_info", "One GPU of a host: its name and UUID.", (*GPU_LABELS, "name", "uuid")
            ),
            "host_gpu_memory_used_bytes": gauge(
                "host_gpu_memory_used_bytes",
                "GPU memory in use (unified hosts: the system memory in use, read from the OS).",
                GPU_LABELS,
                unit="bytes",
            ),
            "host_gpu_memory_total_bytes": gauge(
                "host_gpu_memory_total_bytes",
                "GPU memory (unified hosts: the system memory the GPU shares).",
                GPU_LABELS,
                unit="bytes",
            ),
            "host_gpu_utilization_ratio": gauge("host_gpu_utilization_ratio", "GPU utilization, 0..1.", GPU_LABELS),
            "host_gpu_power_watts": gauge("host_gpu_power_watts", "GPU power draw.", GPU_LABELS),
            "host_gpu_temperature_celsius": gauge("host_gpu_temperature_celsius", "GPU temperature.", GPU_LABELS),
            "host_memory_total_bytes": gauge("host_memory_total_bytes", "System memory.", ("host",), unit="bytes"),
            "host_memory_available_bytes": gauge(
                "host_memory_available_bytes", "System memory available.", ("host",), unit="bytes"
            ),
        }
        for name, text in COUNTER_HELP.items():
            out[name] = CounterMetricFamily(f"poolconsole_engine_{name}", text, labels=list(ENGINE_LABELS))
        return out

    def _engines(self, f: Families) -> None:
        def put(key: str, labels: list[str], value: float | int | None) -> None:
            if value is not None:
                f[key].add_metric(labels, float(value))

        for name, track in self.state.engines.items():
            labels = [name, str(track.config.kind), track.config.host or ""]
            for counter in COUNTER_HELP:
                put(counter, labels, track.totals.get(counter))
            view = track.view
            if view is None:  # not polled yet: nothing is known, not even whether it is up
                continue
            put("engine_up", labels, 1 if view.state is EngineState.OK else 0)
            for state in EngineState:
                put("engine_state", [*labels, state.value], 1 if view.state is state else 0)
            if view.version:
                put("engine_info", [*labels, view.version], 1)
            put("engine_requests_running", labels, view.requests_running)
            put("engine_requests_waiting", labels, view.requests_waiting)
            put("engine_kv_cache_usage_ratio", labels, view.kv_cache_usage)
            put("engine_generation_tokens_per_second", labels, view.generation_tokens_per_s)
            put("engine_last_ok_timestamp_seconds", labels, track.last_ok_at)

    def _hosts(self, f: Families) -> None:
        def put(key: str, labels: list[str], value: float | int | None) -> None:
            if value is not None:
                f[key].add_metric(labels, float(value))

        for name, track in self.state.hosts.items():
            snap = track.snapshot
            if snap is None:
                continue
            put("host_up", [name], 1 if snap.state is HostState.OK else 0)
            for state in HostState:
                put("host_state", [name, state.value], 1 if snap.state is state else 0)
            configured = track.config.memory_kind
            kind = snap.memory_kind or (configured if configured != "auto" else "")
            for position, gpu in enumerate(snap.gpus):
                labels = [name, str(gpu.index if gpu.index is not None else position), kind]
                put("host_gpu_info", [*labels, gpu.name or "", gpu.uuid or ""], 1)
                put("host_gpu_memory_used_bytes", labels, gpu.memory_used_bytes)
                put("host_gpu_memory_total_bytes", labels, gpu.memory_total_bytes)
                util = gpu.utilization_pct
                put("host_gpu_utilization_ratio", labels, None if util is None else util / 100)
                put("host_gpu_power_watts", labels, gpu.power_w)
                put("host_gpu_temperature_celsius", labels, gpu.temperature_c)
            memory = snap.system_memory
            if memory is not None:
                put("host_memory_total_bytes", [name], memory.total_bytes)
                put("host_memory_available_bytes", [name], memory.available_bytes)


def registry_for(state: PoolState, *, process: bool = True) -> tuple[CollectorRegistry, PoolCollector]:
    """A registry of its own (not the library's global one) with the pool's collector, and this process's
    own CPU and memory (process_*, python_info) unless `process` is False."""
    registry = CollectorRegistry()
    collector = PoolCollector(state)
    registry.register(collector)
    if process:
        ProcessCollector(registry=registry)
        PlatformCollector(registry=registry)
    return registry, collector


INDEX = b"""<html><head><title>poolconsole exporter</title></head>
<body><h1>poolconsole exporter</h1><p><a href="/metrics">/metrics</a></p></body></html>
"""


class Exporter:
    """The LivePool and the HTTP server on one event loop: `await start()` binds first (a busy port fails
    before any poll begins), then starts the pool; `await stop()` ends both."""

    def __init__(
        self,
        config: PoolConfig,
        host: str,
        port: int,
        *,
        settle_gc: bool = True,
        live: LivePool | None = None,
        collectors: Sequence[Collector] = (),
    ) -> None:
        """`live`: a runtime to serve (the watcher's), started here; `collectors`: more families on /metrics."""
        self.config = config
        self.host = host
        self.port = port
        self.settle_gc = settle_gc
        self.live: LivePool | None = None
        self._given = live
        self._collectors = collectors
        self.collector: PoolCollector | None = None
        self._runner: web.AppRunner | None = None

    async def start(self) -> str:
        """Listen and start polling; the address served, as host:port (the real port when 0 was asked)."""
        live = self._given or LivePool(self.config)
        registry, self.collector = registry_for(live.state)
        for extra in self._collectors:
            registry.register(extra)
        app = web.Application()
        app.router.add_get("/metrics", make_aiohttp_handler(registry))
        app.router.add_get("/", self._index)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        try:
            await web.TCPSite(runner, self.host, self.port, reuse_address=True).start()
        except OSError as exc:
            await runner.cleanup()
            reason = exc.strerror or str(exc) or type(exc).__name__
            raise ListenError(f"cannot listen on {self.address}: {reason}") from exc
        self._runner = runner
        self.port = int(runner.addresses[0][1])
        self.live = live
        live.start(settle_gc=self.settle_gc)
        return self.address

    @property
    def address(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    async def _index(self, request: web.Request) -> web.Response:
        return web.Response(body=INDEX, content_type="text/html")

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self.live is not None:
            await self.live.stop()
            self.live = None


def _told(update: Update) -> None:
    """A poll loop that stopped is said once on stderr; the others keep serving."""
    if update.kind == "problem" and update.message:
        print(f"poolconsole exporter: {update.message}", file=sys.stderr, flush=True)


async def serve(
    config: PoolConfig,
    host: str,
    port: int,
    stop: asyncio.Event | None = None,
    ready: Callable[[str], None] | None = None,
) -> None:
    """Serve until `stop` is set, or a stop signal in the main thread (runtime.stopping). Raises ListenError
    before polling anything when the address cannot be served."""
    stop = stop or asyncio.Event()
    exporter = Exporter(config, host, port)
    with stop_on_signals(stop):
        try:
            address = await exporter.start()
            assert exporter.live is not None
            exporter.live.subscribe(_told)
            if ready is not None:
                ready(address)
            await stop.wait()
        finally:
            await exporter.stop()


def run(config: PoolConfig, host: str, port: int) -> None:
    """The `exporter` command's body: blocks until SIGINT, SIGTERM or SIGHUP."""

    def ready(address: str) -> None:
        engines, hosts = len(config.engines), len(config.hosts)
        print(
            f"poolconsole exporter: serving {engines} engine(s) and {hosts} host(s) on http://{address}/metrics; "
            "Ctrl-C stops it",
            flush=True,
        )

    asyncio.run(serve(config, host, port, ready=ready))
