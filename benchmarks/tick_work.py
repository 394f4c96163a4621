"""The model's work in one tick at fleet size (issue 39, item 4): `summarise()` over 1,000 engines on 250 hosts
(10 engines down, 50 alerts firing) after a tick in which one engine changed, every engine changed, or none,
and the alerts' check of log findings (`_served_past_findings`) over the 1,000 engines' views. In process, no
network, the pages of tests/helpers/bigpool; the best of repeated runs, in ms.

    PYTHONPATH=. .venv/bin/python benchmarks/tick_work.py

Run it from two checkouts (a `git worktree` of the commit before) to compare them on the same machine."""

from __future__ import annotations

import time
from collections.abc import Callable

from poolconsole.model.alerts import AlertEvent, Alerts
from poolconsole.model.pool_state import PoolState
from poolconsole.model.summary import summarise
from tests.helpers import bigpool, uipool

ENGINES = 1000


def best_ms(prepare: Callable[[], object], work: Callable[[], object], runs: int) -> float:
    """The fastest of `runs` runs of `work`, each after an untimed `prepare`."""
    times = []
    for _ in range(runs):
        prepare()
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return min(times) * 1000


def main() -> None:
    cfg, pages = bigpool.config(ENGINES, gpus_per_host=4), bigpool.Pages()
    state, alerts = PoolState(cfg, lambda: uipool.T0 + 10), Alerts(cfg.alerts)
    for step in (0, 1):
        hosts, engines = bigpool.polls(cfg, pages, step, gpus_per_host=4)
        for host in hosts:
            state.apply_host(host)
        for snap in engines:
            state.apply_engine(snap)
    for i in range(0, ENGINES, 20):
        name = bigpool.engine_name(i)
        alerts.active[(name, "queue")] = AlertEvent(0.0, name, "queue", True, "9 requests waiting")
    summarise(state, alerts)
    polled = [2]

    def one() -> None:
        polled[0] += 1
        state.apply_engine(bigpool.engine_poll(cfg, pages, 17, polled[0]))

    polls = iter([[bigpool.engine_poll(cfg, pages, i, k) for i in range(ENGINES)] for k in range(100, 116)])

    def every() -> None:
        for snap in next(polls):
            state.apply_engine(snap)

    views = [t.view for t in state.engines.values() if t.view is not None]

    def served() -> None:
        for view in views:
            alerts._served_past_findings(view, uipool.T0 + 20)

    def tick() -> None:
        summarise(state, alerts)

    print(f"summarise, 1 of {ENGINES} engines changed: {best_ms(one, tick, 30):.2f} ms")
    print(f"summarise, all {ENGINES} changed: {best_ms(every, tick, 15):.2f} ms")
    print(f"summarise, nothing changed: {best_ms(lambda: None, tick, 30):.2f} ms")
    print(f"_served_past_findings over {ENGINES} views, 50 alerts firing: {best_ms(lambda: None, served, 15):.2f} ms")


if __name__ == "__main__":
    main()
