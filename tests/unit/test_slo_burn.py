"""slo_burn (issue 37) over simulated time: vLLM 0.32's real /metrics page with its TTFT buckets set per
poll (a share of the requests over the threshold), read through the parser into the watcher's objective,
every 10 s. A fast burn pages once 1 h and 5 min are both over 14.4x and clears soon after it stops; a slow
burn warns once 6 h and 30 min are both over 6x and never pages; a healthy engine never alerts; an engine
restart (its counts back to 0) is no burn; the samples kept in the state file carry the long windows across
a restarted watcher."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from poolconsole.collect.engines import specs
from poolconsole.collect.engines.mapping import parse_metrics
from poolconsole.config import ConfigError, parse_config
from poolconsole.config.models import AlertSettings, Slo
from poolconsole.model import slo as rule
from poolconsole.model.alerts import Alerts, severity
from poolconsole.model.notify import labels_for, summary
from poolconsole.model.snapshots import Histogram
from poolconsole.runtime.alerts_slo import Objective, SloSamples
from tests.conftest import REAL

PAGE = (REAL / "vllm-0.32.0-cpu" / "metrics.load.txt").read_text()
BUCKET = re.compile(r'^(vllm:time_to_first_token_seconds_bucket\{.*le="([^"]+)".*\}) \S+$', re.M)
STEP_S = 10.0
PER_STEP = 50.0
"""Requests per 10 s poll (5 a second)."""


def page(fast: float, slow: float) -> str:
    """The real page, its TTFT histogram holding `fast` requests at 0.05 s and `slow` at 3 s."""

    def bucket(m: re.Match[str]) -> str:
        le = float(m.group(2))
        count = (fast if le >= 0.06 else 0.0) + (slow if le >= 5.0 else 0.0)
        return f"{m.group(1)} {count}"

    text = BUCKET.sub(bucket, PAGE)
    text = re.sub(r"^(vllm:time_to_first_token_seconds_count\{.*\}) \S+$", rf"\1 {fast + slow}", text, flags=re.M)
    return text


def ttft(fast: float, slow: float) -> Histogram:
    metrics, _, _ = parse_metrics(page(fast, slow), specs.VLLM)
    return metrics.histograms["ttft"]


class Run:
    """One engine polled every 10 s; the share of slow requests set per stretch of time."""

    def __init__(self, objective: Objective | None = None, step_s: float = STEP_S) -> None:
        self.step_s = step_s
        self.slo = Slo(engine="e", ttft_s=1.0, objective=0.99)
        self.objective = objective or Objective(self.slo)
        self.alerts = Alerts(AlertSettings())
        self.now = 0.0
        self.fast = self.slow = 0.0
        self.fired: list[tuple[float, str, bool]] = []

    def serve(self, seconds: float, slow_share: float) -> None:
        for _ in range(int(seconds / self.step_s)):
            self.now += self.step_s
            self.fast += PER_STEP * self.step_s / STEP_S * (1 - slow_share)
            self.slow += PER_STEP * self.step_s / STEP_S * slow_share
            self.objective.observe("e", ttft(self.fast, self.slow), self.now)
            events = self.objective.evaluate(self.alerts, self.now)
            self.fired += [(self.now, e.rule, e.fired) for e in events]

    def restart(self) -> None:
        self.fast = self.slow = 0.0


def test_the_share_over_the_threshold_comes_from_the_buckets() -> None:
    assert rule.within(ttft(90, 10), 1.0) == (90.0, 100.0)
    assert rule.within(ttft(90, 10), 7.5) == (100.0, 100.0)
    assert rule.within(ttft(90, 10), 0.9) == (90.0, 100.0)  # between two bounds: the lower one (0.75)
    assert rule.within(ttft(90, 10), 0.03) == (0.0, 100.0)  # the fast ones are over 0.02 s


def test_a_fast_burn_pages_after_the_long_window_and_clears_after_the_short_one() -> None:
    run = Run()
    run.serve(3600, 0.002)  # an hour within the objective
    run.restart()  # and a restart: counts back to 0, no burn
    run.serve(3600, 0.002)
    assert run.fired == []
    start = run.now
    run.serve(3600, 0.30)  # 30x the 1% budget
    page = [(t, r) for t, r, on in run.fired if on]
    assert page and page[0][1] == "slo_burn_page"
    # the hour's error share passes 14.4% after about 28 minutes of 30% (2% of a 30-day budget)
    assert 25 * 60 <= page[0][0] - start <= 31 * 60, page[0][0] - start
    stop = run.now
    run.serve(900, 0.0)
    cleared = [t for t, r, on in run.fired if r == "slo_burn_page" and not on]
    assert cleared and cleared[0] - stop <= 5 * 60 + STEP_S  # the 5-minute window ends it
    assert severity("slo_burn_page") == "critical" and severity("slo_burn_warn") == "warning"


def test_a_slow_burn_warns_after_the_six_hour_window_and_never_pages() -> None:
    run = Run(step_s=60.0)  # one poll a minute over 11 hours
    run.serve(6 * 3600, 0.002)
    start = run.now
    run.serve(5 * 3600, 0.08)  # 8x: under 14.4, over 6
    assert all(r == "slo_burn_warn" for _, r, _ in run.fired), run.fired
    warned = [t for t, r, on in run.fired if on]
    # the 6 h share passes 6% after about 4.4 hours of 8%
    assert warned and 4.2 * 3600 <= warned[0] - start <= 4.6 * 3600, (warned[0] - start) / 3600


def test_the_samples_kept_beside_the_store_carry_the_long_window_across_a_restart(tmp_path: Path) -> None:
    run = Run()
    run.serve(3600, 0.002)
    run.serve(20 * 60, 0.30)
    store = SloSamples(tmp_path / "h.notify.sqlite3")
    store.write([("e", s) for s in run.objective.samples], before=run.now - rule.KEEP_S)
    store.close()
    again = SloSamples(tmp_path / "h.notify.sqlite3")
    kept = again.load(run.now - rule.KEEP_S)["e"]
    again.close()
    assert kept == list(run.objective.samples)
    restarted = Run(Objective(run.objective.slo, kept))  # a new watcher: its first read is a baseline
    restarted.now, restarted.fast, restarted.slow = run.now, run.fast, run.slow
    restarted.serve(12 * 60, 0.30)
    page = [t for t, r, on in restarted.fired if on and r == "slo_burn_page"]
    assert page and page[0] - run.now <= 11 * 60  # 20 min before the restart counted: fires at about 28 min
    labels = labels_for("slo_burn_page", "e", {"e": "box"}, [])
    assert labels == {"alertname": "slo_burn", "severity": "critical", "engine": "e", "host": "box"}
    assert labels_for("slo_burn_warn", "model:qwen", {}, [])["model"] == "qwen"
    assert summary("e", "slo_burn_page", "slo burn: TTFT ...") == "e: slo burn: TTFT ..."


def test_a_first_start_does_not_read_minutes_of_slow_requests_as_an_hours_burn() -> None:
    run = Run()
    run.serve(40 * 60, 0.5)  # 50x, but only 40 minutes known: the hour's burn is unknown
    assert run.fired == []
    run.serve(20 * 60, 0.5)
    assert [r for _, r, on in run.fired if on] == ["slo_burn_page"]  # once 0.9 h is covered


def test_an_objective_names_one_engine_or_model_that_exists_once() -> None:
    engine = '[[engines]]\nname = "e"\nkind = "vllm"\nurl = "http://127.0.0.1:1"\n'
    for slo, said in (
        ('engine = "e"\nmodel = "m"', "give engine or model"),
        ('engine = "x"', "engine 'x' is not an [[engines]] name"),
        ('engine = "e"\nttft_s = 2\nobjective = 0.9\n[[slo]]\nengine = "e"', "'e' has two objectives"),
    ):
        text = f"[[slo]]\n{slo}\nttft_s = 1\nobjective = 0.99\n{engine}"
        with pytest.raises(ConfigError, match=re.escape(said)):
            parse_config(text, "hosts.toml")
