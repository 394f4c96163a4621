"""The fleet path without a watcher (issue 37): Debian's Prometheus scrapes an engine with the scrape config
`poolconsole prometheus-config` writes and evaluates the rule file `poolconsole prometheus-rules` writes; it
sends to Debian's Alertmanager (0.25), whose webhook reaches a receiver the test runs. The engine is a
process serving vLLM 0.32's real pages on 127.0.0.1; stopping it brings a firing `down` (critical, labelled
with the engine and its host) through Alertmanager to the receiver, and starting it again the resolve."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers.prometheus import Prometheus, eventually, prometheus_binary, until_ready
from tests.helpers.rawhttp import free_port
from tests.helpers.receivers import Receiver, until
from tests.helpers.tiny_engine import TinyEngine
from tests.integration.test_watch_alertmanager import alertmanager_binary

ROOT = Path(__file__).resolve().parents[2]
ENGINE = "tiny-vllm"


@pytest.fixture
def engine() -> Iterator[TinyEngine]:
    tiny = TinyEngine(free_port())
    tiny.start()
    yield tiny
    tiny.stop()


def poolconsole(*args: str) -> str:
    out = subprocess.run([sys.executable, "-m", "poolconsole", *args], cwd=ROOT, capture_output=True, text=True,
                         timeout=60)  # fmt: skip
    assert out.returncode == 0, out.stderr
    return out.stdout


class Process:
    """A binary on loopback, its output in a log file, stopped (and waited for) at the end."""

    def __init__(self, argv: list[str], log: Path) -> None:
        self.log_path = log
        self._log = log.open("wb")
        self.proc = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT)

    def tail(self) -> str:
        return self.log_path.read_text(errors="replace")[-3000:]

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log.close()


@pytest.fixture
async def alertmanager(tmp_path: Path) -> AsyncIterator[tuple[str, Receiver]]:
    hook = await Receiver().start()
    port = free_port()
    config = tmp_path / "alertmanager.yml"
    config.write_text(
        "route: {receiver: hook, group_by: [alertname, engine], group_wait: 1s, group_interval: 1s, "
        "repeat_interval: 1h}\nreceivers:\n- name: hook\n"
        f'  webhook_configs: [{{url: "{hook.url}/am", send_resolved: true}}]\n'
    )
    am = Process(
        [alertmanager_binary(), f"--config.file={config}", f"--storage.path={tmp_path / 'am-data'}",
         f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address="],
        tmp_path / "alertmanager.log",
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient(trust_env=False) as client:

            async def ready() -> bool:
                assert am.proc.poll() is None, am.tail()
                try:
                    return (await client.get(f"{url}/-/ready")).status_code == 200
                except httpx.TransportError:
                    return False

            await eventually(ready, 90, "alertmanager ready")
        yield url, hook
    finally:
        am.stop()
        await hook.stop()


@pytest.mark.engine  # two real daemons and a scrape, rule and notification cycle: about 30 s here
async def test_a_stopped_target_reaches_a_real_alertmanager_through_prometheus_and_its_webhook(
    engine: TinyEngine, alertmanager: tuple[str, Receiver], tmp_path: Path
) -> None:
    am_url, hook = alertmanager
    hosts = tmp_path / "hosts.toml"
    hosts.write_text(
        f'[settings]\npoll_interval_s = 1\n\n[alerts]\ndown_for_s = 2\n\n[[engines]]\nname = "{ENGINE}"\n'
        f'kind = "vllm"\nurl = "{engine.url}"\nhost = "box"\n'
    )
    rules = tmp_path / "poolconsole-rules.yml"
    rules.write_text(poolconsole("prometheus-rules", "--config", str(hosts)))
    scrape = poolconsole("prometheus-config", "--config", str(hosts), "--credentials-dir", str(tmp_path / "cred"))
    # the generated file as an operator would extend it: the rules, the Alertmanager, a fast evaluation
    scrape = scrape.replace("global:\n", "global:\n  evaluation_interval: 1s\n", 1)
    scrape += f'rule_files: ["{rules}"]\nalerting:\n  alertmanagers:\n    - static_configs:\n'
    scrape += f'        - targets: ["{am_url.removeprefix("http://")}"]\n'
    (tmp_path / "prometheus.yml").write_text(scrape)
    port = free_port()
    prom_proc = Process(
        [prometheus_binary(), f"--config.file={tmp_path / 'prometheus.yml'}",
         f"--storage.tsdb.path={tmp_path / 'data'}", f"--web.listen-address=127.0.0.1:{port}"],
        tmp_path / "prometheus.log",
    )  # fmt: skip
    try:
        async with httpx.AsyncClient(trust_env=False, timeout=30) as client:
            prom = Prometheus(f"http://127.0.0.1:{port}", client)
            await until_ready(prom, prom_proc.proc, prom_proc.log_path)
            groups = (await prom.api("rules"))["groups"]
            assert {r["name"] for g in groups for r in g["rules"]} == {"down", "stalled"}, groups

            async def scraped() -> bool:
                return bool(await prom.query(f'up{{engine="{ENGINE}"}} == 1'))

            await eventually(scraped, 60, "the engine scraped")
            await asyncio.sleep(2.0)
            assert hook.received == []  # an engine that answers: nothing to say

            engine.stop()
            await until(lambda: hook.webhooks("firing", "down"), 90, "down through Alertmanager's webhook")
            doc = hook.webhooks("firing", "down")[0]
            alert: dict[str, Any] = doc["alerts"][0]
            assert doc["receiver"] == "hook" and alert["status"] == "firing"
            labels = alert["labels"]
            assert (labels["alertname"], labels["severity"], labels["engine"], labels["host"]) == (
                "down", "critical", ENGINE, "box")  # fmt: skip
            assert alert["annotations"]["summary"].startswith(f"{ENGINE}: down: its /metrics does not answer")
            shown = (await client.get(f"{am_url}/api/v2/alerts")).json()
            assert any(a["labels"]["alertname"] == "down" and a["labels"]["engine"] == ENGINE for a in shown)

            engine.start()
            await until(lambda: hook.webhooks("resolved", "down"), 120, "the resolve through Alertmanager")
    finally:
        prom_proc.stop()
    log = (tmp_path / "prometheus.log").read_text(errors="replace")
    assert "Error sending alert" not in log and "error loading rules" not in log.lower(), log[-3000:]
