"""The watcher's wire forms (issue 37) against what Alertmanager 0.25 itself sends and takes (the captures in
tests/fixtures/real/alertmanager-0.25, copied from ../shared/fixtures): the webhook body has every key of
Alertmanager's own, each alert every key of its alerts; an alert for /api/v2/alerts has the keys
Alertmanager's API lists; ntfy's priority follows the severity; labels name the rule, the severity and the
engine with its host, or the host."""

from __future__ import annotations

import json
from pathlib import Path

from poolconsole.model.alerts import AlertEvent
from poolconsole.model.notify import alertmanager_alert, from_event, ntfy_message, webhook_body

AM = Path(__file__).resolve().parents[1] / "fixtures" / "real" / "alertmanager-0.25"
ENGINES = {"qwen": "ws48", "loose": None}
HOSTS = ["ws48"]


def test_the_webhook_body_has_every_key_alertmanager_sends() -> None:
    theirs = json.loads((AM / "webhook-firing.json").read_text())
    down = from_event(AlertEvent(1_700_000_000.0, "qwen", "down", True, "down: connection refused"), ENGINES, HOSTS)
    ours = webhook_body("down", [down])
    assert set(theirs) <= set(ours)
    assert set(theirs["alerts"][0]) <= set(ours["alerts"][0])
    assert ours["version"] == theirs["version"] == "4"
    assert ours["alerts"][0]["labels"] == {
        "alertname": "down",
        "severity": "critical",
        "engine": "qwen",
        "host": "ws48",
    }
    assert ours["alerts"][0]["annotations"] == {"summary": "qwen: down: connection refused"}
    assert ours["alerts"][0]["startsAt"] == "2023-11-14T22:13:20.000Z"


def test_alertmanager_alerts_end_ahead_while_firing_and_at_the_clear_once_resolved() -> None:
    api = json.loads((AM / "api-v2-alerts.active.json").read_text())
    vram = from_event(AlertEvent(100.0, "ws48", "vram_gpu1", True, "GPU 1 memory 97% used"), ENGINES, HOSTS)
    assert vram.labels == {"alertname": "vram_gpu1", "severity": "warning", "host": "ws48", "gpu": "1"}
    firing = alertmanager_alert(vram, now=200.0, resend_s=60)
    assert set(firing) <= set(api[0]) and firing["endsAt"] == "1970-01-01T00:07:20.000Z"  # 200 + 4 x 60
    vram.ends_at, vram.cleared = 300.0, "GPU 1 memory back to 80% used"
    resolved = alertmanager_alert(vram, now=310.0, resend_s=60)
    assert resolved["endsAt"] == "1970-01-01T00:05:00.000Z"
    assert resolved["annotations"]["cleared"] == "ws48: vram_gpu1 cleared: GPU 1 memory back to 80% used"


def test_ntfy_priority_and_tags_follow_the_severity() -> None:
    queue = [
        from_event(AlertEvent(1.0, name, "queue", True, "12 requests waiting"), ENGINES, HOSTS)
        for name in ("qwen", "loose")
    ]
    message = ntfy_message("queue", queue)
    assert (message.title, message.priority, message.tags) == (
        "[FIRING:2] queue: loose, qwen",
        4,
        "warning,queue,warning",
    )
    assert message.body.splitlines() == ["qwen: queue: 12 requests waiting", "loose: queue: 12 requests waiting"]
    assert queue[1].labels == {"alertname": "queue", "severity": "warning", "engine": "loose"}
    info = from_event(AlertEvent(1.0, "qwen", "log:cuda_oom", True, "went down; its log shows ..."), ENGINES, HOSTS)
    assert ntfy_message("log:cuda_oom", [info]).priority == 3
