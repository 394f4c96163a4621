"""Where each engine's polls come from: its own endpoints (`read = "direct"`), or the `[prometheus]` query
API (`read = "prometheus"`). The runtime's poll loops and `status` take their pollers from here."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Protocol

from poolconsole.collect.engines.poll import EnginePoller
from poolconsole.collect.prometheus_source import PrometheusAPI, PrometheusEnginePoller
from poolconsole.config.models import Engine, PoolConfig
from poolconsole.model.snapshots import EngineSnapshot


class EngineSource(Protocol):
    """One engine's poller: a snapshot per call, never raising; `aclose` once at the end."""

    @property
    def engine(self) -> Engine: ...

    async def poll(self) -> EngineSnapshot: ...

    async def aclose(self) -> None: ...


def engine_pollers(
    config: PoolConfig, engines: Sequence[Engine] | None = None, clock: Callable[[], float] | None = None
) -> list[EngineSource]:
    """A poller per engine (all of the config's by default); those read from Prometheus share one client."""
    api = PrometheusAPI(config.prometheus, config.settings) if config.prometheus is not None else None
    tick = clock or time.time
    out: list[EngineSource] = []
    for engine in config.engines if engines is None else engines:
        if engine.read == "prometheus" and api is not None:
            out.append(PrometheusEnginePoller(engine, api, tick))
        else:
            out.append(EnginePoller(engine, settings=config.settings, clock=tick))
    return out
