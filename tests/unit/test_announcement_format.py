"""The remediation's announcements (issue 38) in the three wire forms: a webhook body in Alertmanager's format
(version 4, alertname remediation, the sentence as annotations.summary, firing), one alert of Alertmanager's
/api/v2/alerts that ends by itself, and an ntfy message with the stage in its title and priority by severity."""

from __future__ import annotations

from poolconsole.model.notify import (
    ZERO_TIME,
    Announcement,
    announcement_alertmanager,
    announcement_ntfy,
    announcement_webhook,
    rfc3339,
)

LABELS = {
    "alertname": "remediation", "severity": "warning", "engine": "e1", "host": "ws48", "rule": "stalled",
    "stage": "acted", "action": "restart",
}  # fmt: skip
TEXT = "restarted e1: stalled: 5 running and 0 waiting; serving again after 38 s; 2 of 3 actions left this hour"


def test_the_webhook_body_is_alertmanagers_with_the_sentence() -> None:
    body = announcement_webhook(Announcement("e1", LABELS, TEXT, 1000.0), "http://w/")
    assert body["version"] == "4" and body["status"] == "firing" and body["groupLabels"] == {"alertname": "remediation"}
    (alert,) = body["alerts"]
    assert alert["labels"] == LABELS and alert["annotations"] == {"summary": TEXT}
    assert alert["startsAt"] == rfc3339(1000.0) and alert["endsAt"] == ZERO_TIME
    assert len(alert["fingerprint"]) == 16 and body["commonAnnotations"]["summary"] == TEXT


def test_alertmanager_and_ntfy() -> None:
    message = Announcement("e1", {**LABELS, "severity": "critical", "stage": "gave_up"}, "gave up on e1", 1000.0)
    posted = announcement_alertmanager(message, 60.0)
    assert posted["endsAt"] == rfc3339(1240.0) and posted["annotations"]["summary"] == "gave up on e1"
    ntfy = announcement_ntfy(message)
    assert (ntfy.title, ntfy.priority, ntfy.body) == ("remediation: e1 (gave up)", 5, "gave up on e1")
    assert ntfy.tags == "rotating_light,remediation,restart"
