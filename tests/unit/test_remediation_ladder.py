"""The remediation ladder's decisions (issue 38), on a fake clock, no I/O: notify first and act only after
grace_s if the condition still holds; cooldown_s between two actions on one engine; a spent budget is a
notification and no action (a budget of 1 honoured, also across a restarted watcher); two engines of one host
are never acted on at once; a restart that does not bring the engine back climbs to a rollback, then to "gave
up: needs a person"; a dry run decides the same and spends nothing; the policy comes from [remediation] and
[engines.remediation]."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

from poolconsole.config import parse_config
from poolconsole.config.models import PoolConfig
from poolconsole.model.alerts import AlertEvent
from poolconsole.runtime.notifier import NotifyState, state_path
from poolconsole.workflows.remediation import (
    ActionProgress,
    Condition,
    Ladder,
    Remediator,
    Step,
    cause,
    conditions,
    rungs_of,
)

STALLED = "stalled: 5 running and 0 waiting, no token generated for 45 s (it answers /health and serves nothing)"


def config(remediation: str = "", engines: str = "") -> PoolConfig:
    """The policy's defaults with `remediation`'s keys over them; `engines`: engine a's [engines.remediation]."""
    keys = {"enabled": "true", "max_actions_per_hour": "3", "cooldown_s": "300", "grace_s": "60"}
    keys["on_stalled"] = '"restart"'
    for line in remediation.splitlines():
        key, value = (part.strip() for part in line.split("=", 1))
        keys[key] = value
    text = "[remediation]\n" + "".join(f"{k} = {v}\n" for k, v in keys.items())
    text += """
[[hosts]]
name = "box"
address = "127.0.0.1"

[[hosts]]
name = "other"
address = "127.0.0.2"
"""
    for name, host in (("a", "box"), ("b", "box"), ("c", "other")):
        text += f"""
[[engines]]
name = "{name}"
kind = "vllm"
url = "http://127.0.0.1:8000"
host = "{host}"
[engines.control]
backend = "docker"
name = "{name}"
profile_file = "/etc/{name}.env"
"""
        if name == "a" and engines:
            text += f"[engines.remediation]\n{engines}\n"
    return parse_config(text, "hosts.toml")


def stalled(*engines: str) -> dict[str, Condition]:
    return {e: Condition(e, "stalled", STALLED) for e in engines}


def acts(steps: list[Step]) -> list[tuple[str, str | None]]:
    return [(s.engine, s.action) for s in steps if s.stage == "acting"]


def test_notified_first_acted_on_only_after_grace_if_it_still_holds() -> None:
    ladder = Ladder(config())
    (first,) = ladder.tick(1000.0, stalled("a"))
    assert first.action is None and first.stage == "pending"
    assert first.words == (
        "stalled: 5 running and 0 waiting, no token generated for 45 s; restarting a in 60 s if it still holds "
        "(3 of 3 actions left this hour)"
    )
    assert ladder.tick(1059.0, stalled("a")) == []  # within grace: nothing
    assert acts(ladder.tick(1060.0, stalled("a"))) == [("a", "restart")]
    (done,) = ladder.finished("a", 1098.0, serving=True, seconds=38.0, detail="ok")
    assert done.words == (
        "restarted a: stalled: 5 running and 0 waiting, no token generated for 45 s; serving again after 38 s; "
        "2 of 3 actions left this hour"
    )


def test_a_condition_that_clears_within_grace_is_not_acted_on() -> None:
    ladder = Ladder(config())
    ladder.tick(0.0, stalled("a"))
    assert ladder.tick(30.0, {}) == []
    assert ladder.tick(61.0, {}) == [] and ladder.spent == {}
    (again,) = ladder.tick(100.0, stalled("a"))  # a new case: a new grace
    assert again.stage == "pending" and ladder.tick(159.0, stalled("a")) == []


def test_cooldown_between_two_actions_on_one_engine() -> None:
    ladder = Ladder(config())
    ladder.tick(0.0, stalled("a"))
    assert acts(ladder.tick(60.0, stalled("a"))) == [("a", "restart")]
    ladder.finished("a", 70.0, serving=True, seconds=10.0, detail="ok")
    ladder.tick(80.0, {})  # it cleared
    ladder.tick(100.0, stalled("a"))  # stalled again
    assert acts(ladder.tick(200.0, stalled("a"))) == []  # grace is over, the cooldown (until 360) is not
    assert acts(ladder.tick(359.0, stalled("a"))) == []
    assert acts(ladder.tick(360.0, stalled("a"))) == [("a", "restart")]


def test_a_budget_of_one_is_honoured_the_next_case_is_a_notification() -> None:
    ladder = Ladder(config("max_actions_per_hour = 1\ncooldown_s = 0"))
    ladder.tick(0.0, stalled("a"))
    assert acts(ladder.tick(60.0, stalled("a"))) == [("a", "restart")]
    ladder.finished("a", 70.0, serving=True, seconds=10.0, detail="ok")
    ladder.tick(80.0, {})
    ladder.tick(100.0, stalled("a"))
    (spent,) = ladder.tick(160.0, stalled("a"))
    assert spent.action is None and spent.stage == "budget_spent" and spent.severity == "critical"
    assert spent.words.startswith("budget spent: stalled: 5 running") and "needs a person" in spent.words
    assert ladder.tick(3000.0, stalled("a")) == []  # said once; nothing runs while it holds
    ladder.tick(3001.0, {})
    ladder.tick(3700.0, stalled("a"))  # an hour after the first action: the budget is back
    assert acts(ladder.tick(3760.0, stalled("a"))) == [("a", "restart")]


def test_the_budget_survives_a_restarted_watcher(tmp_path: Path) -> None:
    first = Ladder(config("max_actions_per_hour = 1"))
    first.tick(0.0, stalled("a"))
    (act,) = [s for s in first.tick(60.0, stalled("a")) if s.stage == "acting"]
    state = NotifyState(state_path(tmp_path / "history.sqlite3"))  # what the Remediator writes as it acts
    state.spend(act.engine, 60.0, "restart", act.rule)
    state.close()
    state = NotifyState(state_path(tmp_path / "history.sqlite3"))  # the next watcher's
    kept = state.actions_since(500.0 - 3600.0)
    state.close()
    assert kept == [("a", 60.0)]
    second = Ladder(config("max_actions_per_hour = 1"), kept)
    second.tick(500.0, stalled("a"))
    (step,) = second.tick(560.0, stalled("a"))
    assert step.stage == "budget_spent"


def test_two_engines_of_one_host_one_at_a_time() -> None:
    ladder = Ladder(config("cooldown_s = 0"))
    ladder.tick(0.0, stalled("a", "b", "c"))
    first = acts(ladder.tick(60.0, stalled("a", "b", "c")))
    assert first == [("a", "restart"), ("c", "restart")]  # b shares a's host: it waits
    assert acts(ladder.tick(61.0, stalled("a", "b", "c"))) == []
    ladder.finished("a", 90.0, serving=True, seconds=30.0, detail="ok")
    assert acts(ladder.tick(91.0, stalled("b", "c"))) == [("b", "restart")]


def test_climb_restart_then_rollback_then_gave_up() -> None:
    ladder = Ladder(config("cooldown_s = 0", 'on_crash_loop = "rollback"'))
    ladder.tick(0.0, stalled("a"))
    assert acts(ladder.tick(60.0, stalled("a"))) == [("a", "restart")]
    (failed,) = ladder.finished("a", 400.0, serving=False, seconds=340.0, detail="failed: not serving after 300 s")
    assert failed.stage == "failed" and failed.action is None
    said = "restart of a did not bring it back: failed: not serving after 300 s; next: rollback"
    assert failed.words.startswith(said)
    assert acts(ladder.tick(401.0, stalled("a"))) == [("a", "rollback")]
    (top,) = ladder.finished("a", 500.0, serving=False, seconds=99.0, detail="rollback failed: no answer")
    assert top.stage == "gave_up" and top.severity == "critical"
    assert top.words.startswith("gave up on a: needs a person: rollback of a did not bring it back")
    assert ladder.tick(600.0, stalled("a")) == []  # nothing more while it holds


def test_serving_again_but_the_rule_still_fires_after_grace_climbs() -> None:
    ladder = Ladder(config("cooldown_s = 0", 'on_crash_loop = "rollback"'))
    ladder.tick(0.0, stalled("a"))
    ladder.tick(60.0, stalled("a"))
    ladder.finished("a", 100.0, serving=True, seconds=40.0, detail="ok")
    assert ladder.tick(159.0, stalled("a")) == []
    (climb,) = ladder.tick(160.0, stalled("a"))
    assert climb.stage == "failed" and "next: rollback a" in climb.words
    assert acts(ladder.tick(161.0, stalled("a"))) == [("a", "rollback")]


def test_without_rollbacks_allowed_a_failed_restart_gives_up() -> None:
    ladder = Ladder(config())
    ladder.tick(0.0, stalled("c"))
    ladder.tick(60.0, stalled("c"))
    (top,) = ladder.finished("c", 70.0, serving=False, seconds=10.0, detail="failed")
    assert top.stage == "gave_up"


def test_a_dry_run_says_what_it_would_do_and_spends_nothing() -> None:
    ladder = Ladder(config(), dry_run=True)
    (pending,) = ladder.tick(0.0, stalled("a"))
    assert "would restart a in 60 s" in pending.words
    (would,) = ladder.tick(60.0, stalled("a"))
    assert would.stage == "would" and would.words.startswith("would restart a: stalled: 5 running")
    assert ladder.spent == {} and ladder.tick(61.0, stalled("a")) == []


def test_off_and_notify_only_never_act() -> None:
    off = Ladder(config("enabled = false"))
    assert off.tick(0.0, stalled("a")) == [] and off.tick(100.0, stalled("a")) == []
    notify = Ladder(config('on_down = "notify"'))
    down = {"a": Condition("a", "down", "down: connection refused")}
    assert notify.tick(0.0, down) == [] and notify.tick(100.0, down) == []


def test_the_policy_per_engine_over_the_defaults() -> None:
    pool = config('on_stalled = "notify"', 'on_stalled = "restart"\non_crash_loop = "rollback"')
    a, b, _ = pool.engines
    assert rungs_of(pool, a) == {"stalled": ("restart", "rollback"), "down": (), "restart_loop": ("rollback",)}
    assert rungs_of(pool, b) == {"stalled": (), "down": (), "restart_loop": ()}


def test_conditions_take_one_rule_per_engine_and_words() -> None:
    pool = config()
    active = [("a", "stalled"), ("a", "down"), ("b", "kv_full"), ("c", "stalled")]
    found = conditions(pool, active, {("a", "down"): "down: refused", ("c", "stalled"): STALLED})
    assert found == {"a": Condition("a", "down", "down: refused"), "c": Condition("c", "stalled", STALLED)}
    assert cause("restart_loop", "3 restarts in the last 10 min: a restart loop?").startswith("3 restarts")


def test_the_announcement_keeps_the_words_that_caused_the_action() -> None:
    ladder = Ladder(config())
    ladder.tick(0.0, stalled("a"))
    ladder.tick(60.0, stalled("a"))
    ladder.tick(61.0, {"a": Condition("a", "down", "down: connection refused")})  # restarting: down a while
    (done,) = ladder.finished("a", 70.0, serving=True, seconds=10.0, detail="ok")
    assert done.words.startswith("restarted a: stalled: 5 running and 0 waiting")


def test_an_automatic_actions_progress_keeps_only_the_drains_words_said_before_the_action() -> None:
    """What a gateway's callers see (drain.before says it first) is said and kept for the announcement; the
    action's own lines and the drain's closing line are not (the audit keeps the commands)."""
    said: list[str] = []
    progress = ActionProgress(said.append)
    progress("drain: tiny: gateway gw has 3 retries and a fallback: its callers' requests go to the other deployments")
    progress("host box: $ supervisorctl restart llama")
    progress("drain: llama serves again; the gateway routes to it again (after any cooldown_time)")
    assert progress.callers == [
        "tiny: gateway gw has 3 retries and a fallback: its callers' requests go to the other deployments"
    ]
    assert said == ["remediation: drain: " + progress.callers[0]]


def test_behind_a_gateway_the_announcement_says_what_its_callers_saw_before_the_budget() -> None:
    ladder = Ladder(config())
    ladder.tick(0.0, stalled("a"))
    ladder.tick(60.0, stalled("a"))
    see = "tiny: gateway gw has 3 retries and a fallback: its callers' requests go to the other deployments"
    (done,) = ladder.finished("a", 70.0, serving=True, seconds=10.0, detail="ok", callers=see)
    assert done.words.endswith(f"; serving again after 10 s; while it was away, {see}; 2 of 3 actions left this hour")


async def test_a_rule_that_fires_while_the_tick_awaits_is_said_with_its_words() -> None:
    """The tick reads the rules and their words from one moment: an alert that became active while it awaited
    the board (the polls run meanwhile) is not said by its bare name ("remediation: down; restarting")."""
    active: dict[tuple[str, str], AlertEvent] = {}
    alerts = SimpleNamespace(active=active, restarts={})
    said: list[str] = []
    fixer = Remediator(
        config('on_down = "restart"'),
        cast(Any, SimpleNamespace(alerts=alerts)),
        cast(Any, None),
        None,
        Path("audit.jsonl"),
        dry_run=True,
        say=said.append,
        tick_s=0,
    )
    fixer.ladder = Ladder(fixer.config, [], dry_run=True)

    async def cancelled() -> list[Step]:  # a poll lands while the tick reads the board
        active[("a", "down")] = AlertEvent(0.0, "a", "down", True, "down: no answer within 2 s")
        return []

    fixer._cancelled = cancelled  # type: ignore[method-assign]
    loop = asyncio.get_running_loop().create_task(fixer._run())
    for _ in range(200):
        await asyncio.sleep(0)
        if said:
            break
    loop.cancel()
    assert said and said[0].startswith("remediation (dry run): down: no answer within 2 s; would restart a"), said
