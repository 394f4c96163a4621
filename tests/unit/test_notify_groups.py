"""A receiver hears one notification per rule as it knows the rule (its `alertname`): the per-GPU keys
(gpu_xid_gpu0, gpu_xid_gpu2) are one group, as Alertmanager would group them, not a webhook each."""

from __future__ import annotations

from poolconsole.config import parse_config
from poolconsole.model.notify import Alert
from poolconsole.runtime.notifier import Notifier

CONFIG = """
[[hosts]]
name = "tp4"
address = "127.0.0.1"

[[notify]]
kind = "webhook"
url = "http://127.0.0.1:9/hook"
min_severity = "warning"
"""


def test_one_group_per_alertname_not_per_gpu() -> None:
    notifier = Notifier(parse_config(CONFIG), None)
    labels = {"alertname": "gpu_xid", "severity": "critical", "host": "tp4"}
    due = [Alert(f"gpu_xid_gpu{n}", "tp4", {**labels, "gpu": str(n)}, f"Xid 31 on GPU {n}", 100.0) for n in (0, 2)]
    for alert in due:
        notifier.alerts[(alert.rule, alert.target)] = alert
    groups = notifier._groups(notifier.receivers[0], due)
    assert [(rule, [a.labels["gpu"] for a in alerts]) for rule, alerts in groups] == [("gpu_xid", ["0", "2"])]
