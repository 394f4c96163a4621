"""Where each engine's polls come from: its own endpoints (`read = "direct"`), or the `[prometheus]` query
API (`read = "prometheus"`). The runtime's poll loops and `status` take their pollers from here."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Protocol

from poolconsole.collect.engines.poll import EnginePoller
from poolconsole.config.models import Engine, PoolConfig
from poolconsole.model.snapshots import EngineSnapshot


class EngineSource(Protocol):
    """One engine's poller: a snapshot per call, never raising; `aclose` once at the end."""

    @property
    def engine(self) -> Engine: ...

    @property
    def shared(self) -> object | None:
        """The batch its reading comes from, which others share (a query API's engines), or None: the runtime
        polls the sources of one batch in one loop, a pass a tick (runtime.live)."""

    async def poll(self) -> EngineSnapshot: ...

    async def aclose(self) -> None: ...


def engine_pollers(
    config: PoolConfig, engines: Sequence[Engine] | None = None, clock: Callable[[], float] | None = None
) -> list[EngineSource]:
    """A poller per engine (all of the config's by default); those read from Prometheus share one client."""
    tick = clock or time.time
    chosen = config.engines if engines is None else engines
    through_prometheus = _prometheus_pollers(config, chosen, tick)
    return [through_prometheus.get(e.name) or EnginePoller(e, settings=config.settings, clock=tick) for e in chosen]


def _prometheus_pollers(
    config: PoolConfig, engines: Sequence[Engine], clock: Callable[[], float]
) -> dict[str, EngineSource]:
    """The engines read from `[prometheus]`, by name, on one client. Its modules load only for a pool that has a
    `[prometheus]` (start-up: the console's first frame does not wait for them otherwise)."""
    if config.prometheus is None:
        return {}
    from poolconsole.collect.prometheus.source import PrometheusAPI, PrometheusEnginePoller

    api = PrometheusAPI(config.prometheus, config.settings)
    return {e.name: PrometheusEnginePoller(e, api, clock) for e in engines if e.read == "prometheus"}
