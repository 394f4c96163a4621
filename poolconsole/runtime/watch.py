"""`poolconsole watch`: the headless runtime as an always-on service (issue 37). One LivePool polls the pool,
records every poll to the history store as `record` does, evaluates the alert rules, and its Notifier
delivers them to the `[[notify]]` receivers; with --listen the same runtime serves the exporter's /metrics,
with the notifications' counters beside the pool's. It runs until SIGINT, SIGTERM or SIGHUP, then stops
the polls, writes the notifications' state and closes the store."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from prometheus_client.core import CounterMetricFamily, Metric

from poolconsole.config.models import PoolConfig
from poolconsole.runtime.exporter import Exporter
from poolconsole.runtime.live import LivePool, Update
from poolconsole.runtime.notifier import Notifier, NotifyState, state_path
from poolconsole.runtime.stopping import stop_on_signals
from poolconsole.runtime.store import Store


class NotifyCollector:
    """poolconsole_notifications_{sent,failed}_total{kind}: notifications delivered, and sends that failed
    (each attempt; a receiver that is down counts one per retry)."""

    def __init__(self, notifier: Notifier) -> None:
        self.notifier = notifier

    def describe(self) -> Iterable[Metric]:
        return list(self._families(fill=False))

    def collect(self) -> Iterable[Metric]:
        return list(self._families(fill=True))

    def _families(self, *, fill: bool) -> Iterable[Metric]:
        sent = CounterMetricFamily(
            "poolconsole_notifications_sent", "Notifications the receivers took, by kind.", labels=["kind"]
        )
        failed = CounterMetricFamily(
            "poolconsole_notifications_failed",
            "Notification sends that failed (each attempt; retried with backoff), by kind.",
            labels=["kind"],
        )
        if fill:
            for kind in ("webhook", "alertmanager", "ntfy"):
                receivers = [r for r in self.notifier.receivers if r.config.kind == kind]
                if receivers:
                    sent.add_metric([kind], float(sum(r.sent for r in receivers)))
                    failed.add_metric([kind], float(sum(r.failed for r in receivers)))
        return (sent, failed)


class Companion(Protocol):
    """Something the watcher runs beside its notifier (the remediation of workflows/, which this layer may
    not import): started after the notifier, stopped before the polls."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


Companions = Sequence[Callable[[LivePool, Notifier, NotifyState | None], Companion]]


@dataclass(frozen=True)
class Watching:
    """What a started watcher watches, where it records, where it notifies (no token, no URL secret)."""

    engines: int
    hosts: int
    store: Path
    state: Path
    receivers: tuple[str, ...]
    metrics: str | None
    """http://HOST:PORT/metrics with --listen."""
    still_firing: int
    """Alerts the last watcher left firing (not paged again)."""


async def watch(
    config: PoolConfig,
    store_path: Path,
    stop: asyncio.Event,
    *,
    listen: tuple[str, int] | None = None,
    ready: Callable[[Watching], None] | None = None,
    on_problem: Callable[[str], None] | None = None,
    gather_s: float | None = None,
    settle_gc: bool = True,
    companions: Companions = (),
) -> Notifier:
    """Watch until `stop` (or a stop signal in the main thread). Raises StoreProblem when the store cannot
    be written (another process records it), ListenError when --listen cannot be served, both before any
    poll."""
    store = await asyncio.to_thread(Store.for_config, config, store_path, on_problem=on_problem)
    pool = LivePool(config, recorder=store)
    notify_path = state_path(store_path)
    try:
        state = await asyncio.to_thread(NotifyState, notify_path)
    except BaseException:
        await asyncio.to_thread(store.close)
        raise
    notifier = Notifier(config, state, events=pool.events, on_problem=on_problem, gather_s=gather_s)
    still = notifier.restore(pool.alerts)

    def told(update: Update) -> None:
        if update.kind == "problem" and update.message and on_problem is not None:
            on_problem(update.message)

    pool.subscribe(notifier.heard)
    pool.subscribe(told)
    exporter: Exporter | None = None
    running: list[Companion] = []
    with stop_on_signals(stop):
        try:
            metrics = None
            if listen is not None:
                exporter = Exporter(
                    config, listen[0], listen[1], settle_gc=settle_gc, live=pool, collectors=[NotifyCollector(notifier)]
                )
                address = await exporter.start()  # binds before the first poll
                metrics = f"http://{address}/metrics"
                notifier.external_url = f"http://{address}/"
            else:
                pool.start(settle_gc=settle_gc)
            await notifier.start()
            for make in companions:
                companion = make(pool, notifier, state)
                await companion.start()
                running.append(companion)
            if ready is not None:
                receivers = tuple(r.describe() for r in notifier.receivers)
                ready(
                    Watching(len(config.engines), len(config.hosts), store_path, notify_path, receivers, metrics, still)
                )
            await stop.wait()
        finally:
            for companion in running:
                await companion.stop()
            if exporter is not None:
                await exporter.stop()  # the pool's loops with it
            else:
                await pool.stop()
            await notifier.stop()
            await asyncio.to_thread(state.close)
            await asyncio.to_thread(store.close)
    return notifier
