"""Issue 38, item 5: the rungs above the restart on the demo's simulated control, through `poolconsole watch` with
`[remediation]` over the demo's real SSH hosts (test_watch_remediation.py has the restart rung, the budget, the
dry run and the cancellation on `--scenario wedge`).

- `--scenario oom`: OOM_ENGINE crashes with CUDA's out-of-memory message and its container's restart policy
  starts it again. Two crashes (restart_loop_count = 2) fire `restart_loop`; with `on_crash_loop = "rollback"`
  the watcher announces it, waits grace_s, and rolls the engine back to the profile the audit log's last promoted
  rollover left (seeded here: an operator's rollover to `-long`) through workflows.rollover: the host gets the
  old profile file and one `docker restart`, the audit has the rollover with automatic: true and the rule, the
  webhook the announcement. The engine serves again; the rule still fires grace_s later (it counts the restarts
  of the last restart_loop_minutes: the crashes before the rollback), and nothing climbs on that alone (before
  d9c8fa3 it paged "gave up"). A crash after the rollback climbs to the top: "gave up on ...: needs a person:
  it restarted by itself again N s after the action", critical, and nothing more runs.
- `--scenario restart`: two engines restart by themselves every few seconds (one refusing connections 4 s). With
  restarts allowed on `down` and `stalled` for every engine and grace_s longer than those restarts, each `down`
  is announced as pending and clears before its grace ends: 0 automatic actions, nothing audited. The restart
  loop it becomes (3 restarts in 10 min) is notify-only by default (`on_crash_loop = "notify"`): paged, never
  acted on."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from poolconsole.config import parse_config
from poolconsole.config.models import EngineRemediation, PoolConfig, Remediation
from poolconsole.model import alerts
from poolconsole.ops import audit
from poolconsole.sim.demo import OOM_ENGINE, SimPool
from tests.helpers.receivers import Receiver, until
from tests.helpers.simpools import answering
from tests.integration.test_watch_remediation import Watcher, announced, receiver

__all__ = ["receiver"]  # the webhook receiver fixture, shared with the wedge's tests

ROLL = f"docker restart {OOM_ENGINE}"
RESTARTING = ("qwen2.5-coder-3090", "qwen3-30b-a3b")
"""The engines `--scenario restart` restarts by itself (SimPool._scenario)."""


@pytest.fixture
async def oom(tmp_path: Path) -> AsyncIterator[SimPool]:
    pool = SimPool("oom", seed=5)
    pool.oom_after_s = 1.0  # the scenario's own first crash; the test causes the second
    pool.oom_every_s = 3600.0
    pool.oom_loading_s = 2.0
    async with answering(pool, tmp_path / "keys"):
        yield pool


@pytest.fixture
async def restarting(tmp_path: Path) -> AsyncIterator[SimPool]:
    pool = SimPool("restart", seed=5)
    pool.restart_every_s = 5.0
    async with answering(pool, tmp_path / "keys"):
        yield pool


def configured(
    sim: SimPool, hook: str, alerts: str, policy: Remediation, own: dict[str, EngineRemediation]
) -> PoolConfig:
    text = sim.config_toml().replace("poll_interval_s = 1.0", "poll_interval_s = 0.5")
    text += f'\n[alerts]\n{alerts}\n\n[[notify]]\nkind = "webhook"\nurl = "{hook}"\n'
    config = parse_config(text, "hosts.toml")
    engines = [e.model_copy(update={"remediation": own[e.name]}) if e.name in own else e for e in config.engines]
    return config.model_copy(update={"engines": engines, "remediation": policy})


def alerts_of(hook: Receiver, status: str, alertname: str, engine: str) -> list[dict[str, Any]]:
    return [a for doc in hook.webhooks(status, alertname) for a in doc["alerts"] if a["labels"].get("engine") == engine]


def sent(sim: SimPool, engine: str) -> list[str]:
    """The commands the engine's host ran (restarts, profile writes and reads)."""
    return list(sim.sim_hosts[sim.engines[engine].spec.host].commands)


async def serves(sim: SimPool, name: str) -> bool:
    engine = sim.engines[name]
    body = {"model": engine.spec.models[0], "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
    headers = {"Authorization": f"Bearer {sim.key}"} if sim.key else {}
    async with httpx.AsyncClient(trust_env=False, timeout=10.0) as client:
        answer = await client.post(engine.url + "/v1/chat/completions", json=body, headers=headers)
    return answer.status_code == 200


async def test_a_crash_loop_is_rolled_back_to_the_promoted_profile_then_given_up_on(
    oom: SimPool, receiver: Receiver, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a restart within DELIBERATE_GRACE_S (120 s) after an action is taken for the action's own: shortened, so
    # the crash after the rollback counts within the test's minute
    monkeypatch.setattr(alerts, "DELIBERATE_GRACE_S", 2.0)
    spec = next(s for s in oom.engine_specs if s.name == OOM_ENGINE)
    base, longer = spec.profile, f"{spec.profile}-long"
    book = tmp_path / "audit.sqlite3"
    # an operator's rollover, promoted: the profile an automatic rollback goes back to is the one before it
    audit.record(book, "rollover", OOM_ENGINE, [], "ok", "promoted", 30.0, profile_from=base, profile_to=longer)
    audit.set_active_profile(book, OOM_ENGINE, longer)
    policy = Remediation(enabled=True, max_actions_per_hour=3, cooldown_s=0.0, grace_s=1.0)
    own = {OOM_ENGINE: EngineRemediation(on_crash_loop="rollback")}
    config = configured(oom, f"{receiver.url}/hook", "restart_loop_count = 2", policy, own)
    async with Watcher(config, tmp_path) as w:
        await until(lambda: alerts_of(receiver, "resolved", "down", OOM_ENGINE), 60, "the first crash, over")
        assert announced(receiver, "pending") == [], "acted on one crash"
        await oom.crash_oom(OOM_ENGINE)  # the second within restart_loop_minutes: a restart loop
        await until(lambda: announced(receiver, "acted"), 60, "the rollback")
        await asyncio.sleep(4.0)  # past grace_s: the rule still fires on the two crashes, and nothing climbs
        assert announced(receiver, "gave_up") == [] and announced(receiver, "failed") == []
        assert await serves(oom, OOM_ENGINE)
        await oom.crash_oom(OOM_ENGINE)  # it crashes again after the rollback: the top of the ladder
        await until(lambda: announced(receiver, "gave_up"), 60, "the ladder's top after a crash past the rollback")
        (pending,) = announced(receiver, "pending")
        assert (pending["labels"]["engine"], pending["labels"]["rule"]) == (OOM_ENGINE, "restart_loop")
        assert f"rolling back {OOM_ENGINE} in 1 s if it still holds" in pending["annotations"]["summary"]
        (acted,) = announced(receiver, "acted")
        said = acted["annotations"]["summary"]
        assert said.startswith(f"rolled back {OOM_ENGINE}: 2 restarts in the last 10 min"), said
        assert "; serving again after " in said and said.endswith("; 2 of 3 actions left this hour"), said
        assert acted["labels"]["action"] == "rollback" and acted["labels"]["rule"] == "restart_loop"
        (top,) = announced(receiver, "gave_up")
        assert top["labels"]["severity"] == "critical"
        summary = top["annotations"]["summary"]
        assert summary.startswith(f"gave up on {OOM_ENGINE}: needs a person: it restarted by itself again "), top
        await asyncio.sleep(3.0)  # given up: nothing more runs while the loop holds
        assert [c for c in sent(oom, OOM_ENGINE) if c == ROLL] == [ROLL]
        assert any(line.startswith(f"remediation: gave up on {OOM_ENGINE}") for line in w.said)
    profile = oom.sim_hosts[spec.host].profiles[OOM_ENGINE]
    assert profile.get("POOL_PROFILE") == base, profile
    latest, seeded = audit.entries(book)
    assert (latest.action, latest.target, latest.outcome) == ("rollover", OOM_ENGINE, "ok")
    assert (latest.profile_from, latest.profile_to) == (longer, base)
    assert latest.automatic is True and latest.rule == "restart_loop" and ROLL in latest.commands
    assert latest.to_json()["automatic"] is True and seeded.automatic is False
    assert audit.active_profile(book, OOM_ENGINE) == base


async def test_the_restart_scenarios_restarts_recover_by_themselves_and_nothing_is_acted_on(
    restarting: SimPool, receiver: Receiver, tmp_path: Path
) -> None:
    policy = Remediation(enabled=True, cooldown_s=0.0, grace_s=8.0, on_down="restart", on_stalled="restart")
    # the demo's alert settings (a stall_s of a few seconds takes a slow engine's long prefill for a stall)
    config = configured(restarting, f"{receiver.url}/hook", "restart_loop_count = 3", policy, {})
    async with Watcher(config, tmp_path) as w:
        refusing = RESTARTING[1]  # refuses connections 4 s: `down`, announced, cleared within the grace
        await until(lambda: alerts_of(receiver, "resolved", "down", refusing), 60, "a down that cleared")
        await asyncio.sleep(10.0)  # past its grace: nothing acts
        nothing_acted(restarting, receiver, w.said)
        assert ("pending", "down", refusing) in {
            (a["labels"]["stage"], a["labels"]["rule"], a["labels"]["engine"]) for a in steps_of(receiver)
        }
        loop = "the restart loop on both engines (3 restarts in 10 min)"
        await until(lambda: all(alerts_of(receiver, "firing", "restart_loop", e) for e in RESTARTING), 120, loop)
        await asyncio.sleep(3.0)  # notify-only: paged, and nothing acts
        nothing_acted(restarting, receiver, w.said)
    nothing_acted(restarting, receiver, w.said)
    assert audit.entries(tmp_path / "audit.sqlite3") == []


def steps_of(hook: Receiver) -> list[dict[str, Any]]:
    return [a for doc in hook.webhooks(alertname="remediation") for a in doc["alerts"]]


def nothing_acted(sim: SimPool, hook: Receiver, said: list[str]) -> None:
    """Only `down` cases announced as pending: no action, no climb, no give-up, no command to a host."""
    shown = [(a["labels"]["stage"], a["labels"]["rule"], a["annotations"]["summary"]) for a in steps_of(hook)]
    assert {(stage, rule) for stage, rule, _ in shown} <= {("pending", "down")}, "\n".join(map(str, shown))
    assert not [line for line in said if " restarted " in line or "gave up" in line], said
    for engine in RESTARTING:
        assert not [c for c in sent(sim, engine) if c.startswith(("docker restart", "umask"))], sent(sim, engine)
