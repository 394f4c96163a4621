"""A restarted watcher keeps a model objective's slo_burn firing (issue 37): its target (`model:NAME`) is no
engine or host, and the state file's alerts for targets gone from the config are resolved at start; an
objective's target is not gone, so no resolve and no second page follow."""

from __future__ import annotations

from pathlib import Path

from poolconsole.config import parse_config
from poolconsole.config.models import AlertSettings
from poolconsole.model.alerts import AlertEvent, Alerts
from poolconsole.runtime.live import Update
from poolconsole.runtime.notifier import Notifier, NotifyState

CONFIG = """
[[slo]]
model = "qwen"
ttft_s = 1
objective = 0.99

[[engines]]
name = "e"
kind = "vllm"
url = "http://127.0.0.1:9"
"""


async def test_a_model_objectives_alert_survives_a_restart(tmp_path: Path) -> None:
    config = parse_config(CONFIG, "hosts.toml")
    path = tmp_path / "h.notify.sqlite3"
    state = NotifyState(path)
    first = Notifier(config, state)
    event = AlertEvent(100.0, "model:qwen", "slo_burn_page", True, "slo burn: TTFT over 1 s ...")
    first.heard(Update("model:qwen", "engine", (event,)))
    await first._write()
    state.close()

    state = NotifyState(path)
    second = Notifier(config, state)
    alerts = Alerts(AlertSettings())
    assert second.restore(alerts) == 1
    assert ("model:qwen", "slo_burn_page") in alerts.active
    restored = second.alerts[("slo_burn_page", "model:qwen")]
    assert restored.firing and restored.labels["model"] == "qwen" and restored.labels["alertname"] == "slo_burn"
    state.close()
