"""The events timeline's model: restarts with their cause (the counters, then the container's record and
the log read after it refine it), alerts fired and cleared in words, actions and smoke verdicts, newest
first, filtered, bounded. No Textual."""

from __future__ import annotations

from dataclasses import dataclass

from poolconsole.model.alerts import AlertEvent
from poolconsole.model.events import CRITICAL, OK, WARNING, EventLog
from poolconsole.model.failure_modes import Diagnosis, Finding


@dataclass(frozen=True)
class Told:
    target: str
    kind: str
    events: tuple[AlertEvent, ...] = ()
    message: str | None = None
    at: float | None = None
    restarts: tuple[float, ...] = ()
    diagnosis: Diagnosis | None = None


def test_a_restart_with_its_cause_refined_as_more_is_known() -> None:
    log = EventLog()
    log.heard(Told("e", "engine", restarts=(990.0,)))  # its counters went back at this poll
    log.heard(Told("e", "engine", at=991.0))  # the next poll marks none: not a second restart
    assert [(e.kind, e.at) for e in log.entries] == [("restart", 990.0)]
    log.cause("e", "container restarted, restart count 0 -> 1", 995.0)  # the container's record says why
    log.diagnosed("e", Diagnosis(996.0, "restarted", "journal", ()))  # a log with nothing known: no cause
    finding = Finding("oom", "CUDA out of memory", "the model did not fit", "lower max_num_seqs", "line", 3)
    log.diagnosed("e", Diagnosis(997.0, "restarted (container restarted)", "journal", (finding,)))
    assert log.newest()[0].text() == (
        "restarted (container restarted, restart count 0 -> 1; its log shows CUDA out of memory)"
    )
    log.cause("e", "too late", 990.0 + 3600)  # an hour on: another matter, not this restart's cause
    assert "too late" not in log.newest()[0].text()
    log.diagnosed("e", Diagnosis(1200.0, "went down", "journal", (finding,)))  # after going down: its own event
    assert log.newest()[0].message == "went down: its log shows CUDA out of memory"
    assert log.newest()[0].severity == CRITICAL


def test_alerts_actions_smoke_newest_first_filtered_and_bounded() -> None:
    log = EventLog(maxlen=6)
    fired = AlertEvent(10.0, "e", "down", True, "down: connection refused")
    cleared = AlertEvent(20.0, "e", "down", False, "answering again")
    queue = AlertEvent(30.0, "e", "queue", True, "47 requests waiting")
    log.heard(Told("e", "engine", (fired, cleared, queue)))
    log.action(40.0, "restart", "e", "ok", "healthy after 12 s")
    log.action(50.0, "rollover", "e", "rolled back", "smoke test failed: chat\nmore")
    log.smoke(60.0, [("e", "chat", True, ""), ("e", "tool_call", False, "no tool call"), ("f", "chat", True, "")])
    assert [e.text() for e in log.newest()] == [
        "smoke passed (1 checks)",
        "smoke FAILED: tool_call: no tool call",
        "rollover rolled back: smoke test failed: chat",
        "restart ok",
        "queue: 47 requests waiting",
        "down cleared: answering again",
    ]  # the seventh (the oldest, "down: connection refused") went: the log is bounded
    assert log.newest()[0].severity == OK and log.newest()[1].severity == CRITICAL
    assert [e.target for e in log.newest("PASSED")] == ["f"] and [e.at for e in log.newest("rollover")] == [50.0]
    before = log.version
    log.audited([(40.0, "restart", "e", "ok", ""), (5.0, "restart", "e", "failed", "ssh refused")])
    assert log.version == before + 1 and log.newest()[-1].text() == "restart failed: ssh refused"


def test_a_smoke_pass_with_regressions_says_so_as_a_warning() -> None:
    """The events said "smoke passed (5 checks)" for an engine whose figures the smoke screen flagged as
    regressions against its baseline."""
    log = EventLog()
    results = [("e", "chat", True, ""), ("e", "chat_stream", True, ""), ("f", "chat", True, "")]
    log.smoke(60.0, results, {"e": 2})
    said = {e.target: e for e in log.newest()}
    assert said["e"].text() == "smoke passed (2 checks), 2 regression(s) against its baseline"
    assert said["e"].severity == WARNING
    assert said["f"].text() == "smoke passed (1 checks)" and said["f"].severity == OK


def test_a_smoke_verdict_is_stamped_when_its_targets_checks_finished() -> None:
    """A pool run takes minutes: every target's verdict was stamped at the run's end, its first target's
    failure minutes after it happened."""
    log = EventLog()
    results = [("e", "chat", False, "HTTP 500"), ("f", "chat", True, "")]
    log.smoke(300.0, results, None, {"e": 20.0})
    at = {e.target: e.at for e in log.newest()}
    assert at == {"e": 20.0, "f": 300.0}  # f's time not known: the run's end
