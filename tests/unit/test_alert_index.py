"""The alerts firing indexed by target (issue 39, item 4): an engine's poll reads its own alerts, not every
alert of the pool, and the index stays right however the dict is written (set, deleted, popped, cleared,
copied, pickled: the notifier restores alerts with [], a replay seeking back clears them)."""

from __future__ import annotations

import copy
import pickle
from collections.abc import ItemsView, Iterator, KeysView, ValuesView
from typing import NoReturn

from poolconsole.config.models import AlertSettings
from poolconsole.model.alert_index import ByTarget, Key
from poolconsole.model.alerts import LOG_FINDING_SERVED_S, AlertEvent, Alerts
from poolconsole.model.failure_modes import diagnose
from poolconsole.model.snapshots import EngineState
from tests.unit.test_alerts import view


class NoScan(ByTarget[AlertEvent]):
    """Fails any walk over the alerts: a poll that reads them all fails the test."""

    def __iter__(self) -> Iterator[Key]:
        raise AssertionError("walked every alert")

    def items(self) -> NoReturn:
        raise AssertionError("walked every alert")

    def keys(self) -> NoReturn:
        raise AssertionError("walked every alert")

    def values(self) -> NoReturn:
        raise AssertionError("walked every alert")


def test_an_engines_poll_reads_its_own_alerts_only() -> None:
    alerts = Alerts(AlertSettings(), active=NoScan())
    for i in range(1000):  # the rest of the pool's alerts, which a poll of "e" must not walk
        alerts.active[(f"e{i:04d}", "queue")] = AlertEvent(0.0, f"e{i:04d}", "queue", True, "9 requests waiting")
    [oom] = diagnose(["torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0"])
    alerts.active[("e", "log:cuda_out_of_memory")] = AlertEvent(100.0, "e", f"log:{oom.pattern}", True, "its log shows")
    alerts.engine(view(state=EngineState.OK), 160.0)
    assert not alerts.engine(view(state=EngineState.OK), 160.0 + LOG_FINDING_SERVED_S - 1)
    [cleared] = alerts.engine(view(state=EngineState.OK), 160.0 + LOG_FINDING_SERVED_S)
    assert (cleared.rule, cleared.fired) == ("log:cuda_out_of_memory", False)
    assert ("e", "log:cuda_out_of_memory") not in alerts.active and len(alerts.active) == 1000
    assert alerts.active.rules_of("e") == [] and alerts.active.rules_of("e0007") == ["queue"]


def test_the_index_follows_every_write() -> None:
    d: ByTarget[int] = ByTarget({("a", "x"): 1, ("b", "y"): 2, ("a", "z"): 3})
    assert d.rules_of("a") == ["x", "z"] and d.rules_of("nobody") == []
    for other in (copy.deepcopy(d), copy.copy(d), pickle.loads(pickle.dumps(d))):
        assert type(other) is ByTarget and other == d and other.rules_of("a") == ["x", "z"]
    d |= {("c", "q"): 4}
    assert d.rules_of("c") == ["q"]
    assert d.pop(("a", "x")) == 1 and d.rules_of("a") == ["z"] and d.pop(("n", "n"), 9) == 9
    del d[("a", "z")]
    assert d.rules_of("a") == []
    d.setdefault(("a", "w"), 5)
    d[("a", "x")] = 6  # set again: last in its target's order, as in the dict's
    assert d.rules_of("a") == ["w", "x"] and list(d)[-2:] == [("a", "w"), ("a", "x")]
    key, _ = d.popitem()
    assert key == ("a", "x") and d.rules_of("a") == ["w"]
    d.clear()
    assert not d and d.rules_of("a") == [] and d.rules_of("c") == []


def test_views_of_the_dict_still_read_as_a_dict() -> None:
    d: ByTarget[int] = ByTarget([(("a", "x"), 1)])
    assert isinstance(d.items(), ItemsView) and isinstance(d.keys(), KeysView) and isinstance(d.values(), ValuesView)
    assert dict(d) == {("a", "x"): 1}
