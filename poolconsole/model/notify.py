"""What the watcher tells its receivers (issue 37), as data: one alert per rule and target with the labels
Alertmanager and its receivers key on, and the three wire forms built from it. Pure: no I/O, no clock.

- alertmanager: the alerts of `POST /api/v2/alerts` (labels, annotations, startsAt, endsAt). A firing alert's
  endsAt is a few resend intervals ahead, as Prometheus sends it, so Alertmanager resolves it by itself if
  the watcher stops re-sending; a resolved one's endsAt is when it cleared.
- webhook: Alertmanager's webhook body (version "4"), one per rule: the rule's firing alerts and the
  resolves due, so a receiver written for Alertmanager reads it as it is.
- ntfy: the summaries as the body, with Title, Priority (critical 5, warning 4, info 3) and Tags.

Every alert carries `alertname` (the rule id as the console names it: down, stalled, kv_full, vram_gpu0,
...), `severity`, and `engine` and/or `host` where they apply; `annotations.summary` is the console's
sentence.

An announcement (issue 38) is a one-off message of the watcher's remediation, not an alert that fires and
resolves: alertname `remediation`, its `engine`, `host`, the `rule` that caused it, its `stage` (pending,
acted, failed, gave_up, budget_spent) and `action`; `annotations.summary` is its sentence."""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from poolconsole.model import gpu_health
from poolconsole.model.alerts import AlertEvent, severity

SEVERITY_RANK = {"info": 0, "warning": 1, "critical": 2}
NTFY_PRIORITY = {"critical": 5, "warning": 4, "info": 3}
NTFY_TAG = {"critical": "rotating_light", "warning": "warning", "info": "information_source"}
RECEIVER = "poolconsole"
"""The webhook body's `receiver`."""


@dataclass
class Alert:
    """One rule on one target, from when it fired until every receiver that wanted it heard it cleared."""

    rule: str
    target: str
    labels: dict[str, str]
    message: str
    """The rule's words when it fired (AlertEvent.message)."""
    starts_at: float
    ends_at: float | None = None
    """When it cleared (None while it fires)."""
    cleared: str | None = None
    """The rule's words when it cleared."""
    sent: dict[str, float] = field(default_factory=dict)
    """receiver id -> when it was last told this alert fires."""
    resolved_sent: set[str] = field(default_factory=set)
    """The receivers told it cleared."""

    @property
    def key(self) -> tuple[str, str]:
        return (self.rule, self.target)

    @property
    def severity(self) -> str:
        return self.labels.get("severity", severity(self.rule))

    @property
    def firing(self) -> bool:
        return self.ends_at is None

    @property
    def summary(self) -> str:
        return summary(self.target, self.rule, self.message)

    def annotations(self) -> dict[str, str]:
        out = {"summary": self.summary}
        if self.cleared is not None and not self.firing:
            out["cleared"] = f"{self.target}: {self.rule} cleared: {self.cleared}"
        return out


def summary(target: str, rule: str, message: str) -> str:
    """The console's sentence for a fired alert (model.events): the rule named once, the target first."""
    name = "slo_burn" if rule.startswith("slo_burn_") else rule  # its page and its warning: one rule in words
    said = message if message.startswith(name.replace("_", " ")) else f"{name}: {message}"
    return f"{target}: {said}"


def labels_for(rule: str, target: str, engines: Mapping[str, str | None], hosts: Iterable[str]) -> dict[str, str]:
    """`engines`: engine name -> the host it runs on (None if not said); `hosts`: the host names."""
    per_gpu = gpu_health.split(rule)  # gpu_xid_gpu2: alertname gpu_xid, gpu 2
    labels = {"alertname": per_gpu[0] if per_gpu else rule, "severity": severity(rule)}
    if rule.startswith("slo_burn_"):  # the page and the warning of one objective: one alertname, two severities
        labels["alertname"] = "slo_burn"
    if target.startswith("model:") and target not in engines:
        labels["model"] = target.removeprefix("model:")
    elif target in engines:
        labels["engine"] = target
        host = engines[target]
        if host:
            labels["host"] = host
    elif target in set(hosts):
        labels["host"] = target
    else:
        labels["target"] = target
    if rule.startswith("vram_gpu"):
        labels["gpu"] = rule.removeprefix("vram_gpu")
    if per_gpu:
        labels["gpu"] = per_gpu[1]
    return labels


def from_event(event: AlertEvent, engines: Mapping[str, str | None], hosts: Iterable[str]) -> Alert:
    return Alert(
        event.rule, event.target, labels_for(event.rule, event.target, engines, hosts), event.message, event.at
    )


def wanted(alert: Alert, min_severity: str) -> bool:
    return SEVERITY_RANK.get(alert.severity, 1) >= SEVERITY_RANK.get(min_severity, 1)


def rfc3339(at: float) -> str:
    return dt.datetime.fromtimestamp(at, dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def alertmanager_alert(alert: Alert, now: float, resend_s: float) -> dict[str, Any]:
    """One alert of `POST /api/v2/alerts`: a firing one ends 4 resends ahead (Prometheus' own rule)."""
    ends = alert.ends_at if alert.ends_at is not None else now + 4 * resend_s
    return {
        "labels": dict(alert.labels),
        "annotations": alert.annotations(),
        "startsAt": rfc3339(alert.starts_at),
        "endsAt": rfc3339(ends),
    }


ZERO_TIME = "0001-01-01T00:00:00Z"
"""A firing alert's endsAt in Alertmanager's webhook body."""


def webhook_body(rule: str, alerts: Sequence[Alert], external_url: str = "") -> dict[str, Any]:
    """Alertmanager's webhook body (version 4) for one rule's alerts: firing if any fires. The group is
    named by their alertname (a per-GPU key, gpu_xid_gpu2, is alertname gpu_xid)."""
    common = {k: v for k, v in alerts[0].labels.items() if all(a.labels.get(k) == v for a in alerts)}
    rule = common.get("alertname", rule)
    common_annotations = {
        k: v for k, v in alerts[0].annotations().items() if all(a.annotations().get(k) == v for a in alerts)
    }
    items = [
        {
            "status": "firing" if a.firing else "resolved",
            "labels": dict(a.labels),
            "annotations": a.annotations(),
            "startsAt": rfc3339(a.starts_at),
            "endsAt": ZERO_TIME if a.ends_at is None else rfc3339(a.ends_at),
            "generatorURL": external_url,
            "fingerprint": fingerprint(a),
        }
        for a in alerts
    ]
    return {
        "version": "4",
        "status": "firing" if any(a.firing for a in alerts) else "resolved",
        "receiver": RECEIVER,
        "groupKey": f'{{}}:{{alertname="{rule}"}}',
        "truncatedAlerts": 0,
        "groupLabels": {"alertname": rule},
        "commonLabels": common,
        "commonAnnotations": common_annotations,
        "externalURL": external_url,
        "alerts": items,
    }


def fingerprint(alert: Alert) -> str:
    """A stable id of the label set (16 hex digits, as Alertmanager's fingerprints look)."""
    text = "\x00".join(f"{k}\x01{v}" for k, v in sorted(alert.labels.items()))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class NtfyMessage:
    title: str
    body: str
    priority: int
    tags: str


def ntfy_message(rule: str, alerts: Sequence[Alert]) -> NtfyMessage:
    """One message for one rule's alerts: the firing ones' sentences, then the cleared ones'."""
    firing = [a for a in alerts if a.firing]
    resolved = [a for a in alerts if not a.firing]
    lines = [a.summary for a in firing] + [
        f"resolved: {a.target}: {rule} cleared" + (f": {a.cleared}" if a.cleared else "") for a in resolved
    ]
    if firing:
        worst = max((a.severity for a in firing), key=lambda s: SEVERITY_RANK.get(s, 1))
        names = ", ".join(sorted({a.target for a in firing}))
        title = f"[FIRING:{len(firing)}] {rule}: {names}"
        tag = NTFY_TAG.get(worst, "warning")  # a severity no table knows (a stored label) is paged, not a KeyError
        return NtfyMessage(title, "\n".join(lines), NTFY_PRIORITY.get(worst, 3), f"{tag},{rule},{worst}")
    names = ", ".join(sorted({a.target for a in resolved}))
    return NtfyMessage(f"[RESOLVED] {rule}: {names}", "\n".join(lines), 3, f"white_check_mark,{rule},resolved")


@dataclass(frozen=True)
class Announcement:
    """A one-off message: what the remediation is about to do, did, or gave up on."""

    target: str
    labels: dict[str, str]
    text: str
    at: float

    @property
    def severity(self) -> str:
        return self.labels.get("severity", "warning")


def announcement_webhook(message: Announcement, external_url: str = "") -> dict[str, Any]:
    """Alertmanager's webhook body (version 4) holding the one announcement, firing (it happened)."""
    labels = dict(message.labels)
    annotations = {"summary": message.text}
    alert = Alert(labels.get("alertname", "remediation"), message.target, labels, message.text, message.at)
    return {
        "version": "4",
        "status": "firing",
        "receiver": RECEIVER,
        "groupKey": f'{{}}:{{alertname="{alert.rule}"}}',
        "truncatedAlerts": 0,
        "groupLabels": {"alertname": alert.rule},
        "commonLabels": labels,
        "commonAnnotations": annotations,
        "externalURL": external_url,
        "alerts": [
            {
                "status": "firing",
                "labels": labels,
                "annotations": annotations,
                "startsAt": rfc3339(message.at),
                "endsAt": ZERO_TIME,
                "generatorURL": external_url,
                "fingerprint": fingerprint(alert),
            }
        ],
    }


def announcement_alertmanager(message: Announcement, resend_s: float) -> dict[str, Any]:
    """The announcement as one alert of `POST /api/v2/alerts`, ending by itself 4 resends later."""
    return {
        "labels": dict(message.labels),
        "annotations": {"summary": message.text},
        "startsAt": rfc3339(message.at),
        "endsAt": rfc3339(message.at + 4 * resend_s),
    }


def announcement_ntfy(message: Announcement) -> NtfyMessage:
    """The announcement as an ntfy message: its sentence, its stage in the title."""
    severity = message.severity
    stage = message.labels.get("stage", "")
    title = f"remediation: {message.target}" + (f" ({stage.replace('_', ' ')})" if stage else "")
    tags = ",".join(t for t in (NTFY_TAG.get(severity, "warning"), "remediation", message.labels.get("action")) if t)
    return NtfyMessage(title, message.text, NTFY_PRIORITY.get(severity, 3), tags)


@dataclass(frozen=True)
class Silence:
    """An operator's silence of an alert for a while (the console's `silence` action): alerts whose labels
    hold every matcher are not sent while it is active. `place` is "local" (the watcher honours it) or the
    Alertmanager it was created in ("alertmanager http://host:9093", which mutes it there; the watcher honours
    it for its other receivers)."""

    id: str
    matchers: dict[str, str]
    starts_at: float
    ends_at: float
    created_by: str
    comment: str
    place: str = "local"

    def active(self, at: float) -> bool:
        return self.starts_at <= at < self.ends_at

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(labels.get(k) == v for k, v in self.matchers.items())


def silence_matchers(labels: Mapping[str, str]) -> dict[str, str]:
    """What a silence of an alert matches on: its alertname and its engine and/or host (a per-GPU rule's
    silence covers every GPU of the host), else its target."""
    out = {k: labels[k] for k in ("alertname", "engine", "host") if k in labels}
    if "engine" not in out and "host" not in out and "target" in labels:
        out["target"] = labels["target"]
    return out


def silenced_by(labels: Mapping[str, str], silences: Iterable[Silence], at: float) -> Silence | None:
    """The active silence matching these labels at `at` (the one ending last), or None."""
    found = [s for s in silences if s.active(at) and s.matches(labels)]
    return max(found, key=lambda s: s.ends_at) if found else None


def bearer_target(url: str, token: str | None) -> str:
    """The URL to send to when a bearer token goes along: without its `user:password@` when there is a token.
    A request carries one Authorization header: aiohttp refuses a URL's credentials beside an explicit one (every
    send failed), httpx silently sent Basic instead of the token. The token, configured on purpose for this
    receiver, wins; without one, the URL's credentials go as Basic auth as before."""
    if not token:
        return url
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    netloc = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=netloc))
