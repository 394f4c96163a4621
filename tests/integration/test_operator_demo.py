"""The operator path on the demo pool (simulated engines speaking the real formats, hosts over real SSH):
the fit check from the live pool, a rollover without --force, the broken profile rolled back, a failed
smoke verdict rolled back, healthy meaning serving, a secret that never leaves stdin, and every restart
seen (the vLLM-style crash loop raises the restart-loop alert)."""

from __future__ import annotations

import asyncio
import re
import sqlite3
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from poolconsole.collect.engines.poll import EnginePoller
from poolconsole.collect.ssh import SSHPool
from poolconsole.config import PoolConfig, parse_config
from poolconsole.model.alerts import Alerts
from poolconsole.model.pool_state import PoolState
from poolconsole.ops import audit, lifecycle
from poolconsole.ops.fit import Verdict, fit, live_memory
from poolconsole.ops.health import NotServing, await_serving
from poolconsole.ops.planning import poll_hosts
from poolconsole.sim.demo import SimPool
from poolconsole.sim.hosts import BROKEN_PROFILE

ENGINE = "qwen3-next-80b"
CANARY = "hf_canary_5f1c9e0d7a"


@pytest.fixture
async def demo(tmp_path: Path) -> AsyncIterator[tuple[SimPool, PoolConfig]]:
    pool = SimPool(seed=3)
    await pool.start(tmp_path / "keys")
    try:
        await pool.wait_ready()
        text = pool.config_toml().replace("health_timeout_s = 20", "health_timeout_s = 6")
        # a profile whose token comes from the operator's environment, never from hosts.toml
        text = text.replace(
            'env = { POOL_SPEED = "0.9" }', 'env = { POOL_SPEED = "0.9", HF_TOKEN = { env = "POOL_TEST_HF_TOKEN" } }'
        )
        yield pool, parse_config(text, "demo.toml")
    finally:
        await pool.stop()


async def run_rollover(
    config: PoolConfig, tmp_path: Path, profile: str, smoke: lifecycle.Smoke | None = None
) -> tuple[lifecycle.Outcome, list[str]]:
    engine = next(e for e in config.engines if e.name == ENGINE)
    host = config.host(engine.host)
    assert host is not None
    said: list[str] = []
    ssh = SSHPool([host], 10, 4)
    try:
        snapshots = await poll_hosts(config, {host.name})
        live = live_memory(snapshots[host.name], engine, 0.0)
        ctx = lifecycle.ActionContext(config, ssh[host.name], tmp_path / "audit.db", progress=said.append)
        outcome = await lifecycle.rollover(ctx, engine, profile, smoke=smoke, live=live)
    finally:
        await ssh.close()
    return outcome, said


async def test_plan_fits_from_the_live_pool(demo: tuple[SimPool, PoolConfig]) -> None:
    _, config = demo
    engine = next(e for e in config.engines if e.name == ENGINE)
    snapshots = await poll_hosts(config, {"tp4", "spark"})
    live = live_memory(snapshots["tp4"], engine, 0.0)
    assert live is not None and sorted(live.gpu_totals_gib) == [0, 1, 2, 3]  # the demo config has no gpu_memory_gib
    verdicts = {p.name: fit(engine, p, config.host("tp4"), live).verdict for p in engine.profiles}
    assert verdicts == {
        "awq-4bit-tp4": Verdict.FITS,
        "awq-4bit-tp4-long": Verdict.FITS,
        BROKEN_PROFILE: Verdict.FITS,  # it fits by memory: only loading it shows it is broken
        "bf16-tp4": Verdict.DOES_NOT_FIT,
    }
    # without a poll and without gpu_memory_gib nothing is known: "cannot check", never "does not fit"
    assert fit(engine, engine.profiles[0], config.host("tp4"), None).verdict is Verdict.CANNOT_CHECK
    # unified: the engine being switched gives its own memory back
    spark_engine = next(e for e in config.engines if e.host == "spark")
    spark = live_memory(snapshots["spark"], spark_engine, 0.0)
    assert spark is not None and spark.unified_available_gib is not None
    assert fit(spark_engine, spark_engine.profiles[0], config.host("spark"), spark).verdict is Verdict.FITS


async def test_rollover_without_force_and_the_secret_stays_off_the_record(
    demo: tuple[SimPool, PoolConfig], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pool, config = demo
    monkeypatch.setenv("POOL_TEST_HF_TOKEN", CANARY)
    outcome, said = await run_rollover(config, tmp_path, "awq-4bit-tp4-long")
    assert outcome.outcome == "ok", outcome.detail
    host = pool.sim_hosts["tp4"]
    written = host.files["/srv/pool/qwen3-next-80b.env"]
    assert f"HF_TOKEN={CANARY}" in written  # the value did reach the host ...
    assert any("HF_TOKEN" in line for line in said)  # ... the progress names the variable ...
    everything = [*said, *outcome.commands, outcome.detail, *host.commands]
    assert not [line for line in everything if CANARY in line]  # ... and no command line or output holds it
    assert CANARY.encode() not in (tmp_path / "audit.db").read_bytes()
    rows = audit.entries(tmp_path / "audit.db")
    assert rows[0].outcome == "ok" and rows[0].profile_to == "awq-4bit-tp4-long"
    assert audit.active_profile(tmp_path / "audit.db", ENGINE) == "awq-4bit-tp4-long"


async def test_the_active_profile_again_is_a_re_apply_and_says_so(
    demo: tuple[SimPool, PoolConfig], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its file rewritten as hosts.toml says it now (an edited args or env), the engine restarted: the progress
    and the outcome say it was a re-apply, where "serving X" alone read as a switch that never was."""
    pool, config = demo
    monkeypatch.setenv("POOL_TEST_HF_TOKEN", CANARY)
    outcome, said = await run_rollover(config, tmp_path, "awq-4bit-tp4")  # the demo config's active profile
    assert outcome.outcome == "ok" and outcome.detail.startswith("serving awq-4bit-tp4 (re-applied), ready after ")
    assert "profile awq-4bit-tp4 is already active: it is applied again" in said[0]
    assert pool.sim_hosts["tp4"].profiles[ENGINE]["POOL_PROFILE"] == "awq-4bit-tp4"
    [entry] = audit.entries(tmp_path / "audit.db")
    assert (entry.profile_from, entry.profile_to, entry.outcome) == ("awq-4bit-tp4", "awq-4bit-tp4", "ok")


async def test_a_missing_environment_value_refuses_before_anything_runs(
    demo: tuple[SimPool, PoolConfig], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pool, config = demo
    monkeypatch.delenv("POOL_TEST_HF_TOKEN", raising=False)
    with pytest.raises(lifecycle.ActionRefused, match=r"POOL_TEST_HF_TOKEN.*not set"):
        await run_rollover(config, tmp_path, "awq-4bit-tp4-long")
    assert not pool.sim_hosts["tp4"].commands
    # the attempt is in the audit log, refused, with why and no command (it left no trace before)
    [entry] = audit.entries(tmp_path / "audit.db")
    assert (entry.action, entry.target, entry.outcome, entry.commands) == ("rollover", ENGINE, "refused", [])
    assert "POOL_TEST_HF_TOKEN" in entry.detail and entry.profile_to == "awq-4bit-tp4-long"


async def test_a_profile_that_does_not_fit_is_refused_and_the_refusal_audited(
    demo: tuple[SimPool, PoolConfig], tmp_path: Path
) -> None:
    pool, config = demo
    with pytest.raises(lifecycle.ActionRefused, match="profile bf16-tp4 does not fit on tp4"):
        await run_rollover(config, tmp_path, "bf16-tp4")
    assert not pool.sim_hosts["tp4"].commands
    [entry] = audit.entries(tmp_path / "audit.db")
    assert (entry.action, entry.outcome, entry.profile_to) == ("rollover", "refused", "bf16-tp4")
    engine = next(e for e in config.engines if e.name == ENGINE)
    assert engine.profile and entry.profile_from == engine.profile  # the profile it stays on, not None
    assert f"{engine.profile} -> bf16-tp4" in entry.text()
    assert entry.detail.startswith("profile bf16-tp4 does not fit on tp4")


async def test_the_broken_profile_is_rolled_back_without_a_smoke_test(
    demo: tuple[SimPool, PoolConfig], tmp_path: Path
) -> None:
    pool, config = demo
    outcome, _ = await run_rollover(config, tmp_path, BROKEN_PROFILE, smoke=None)
    assert outcome.outcome == "rolled back", outcome.detail
    # how long, and what it answered last: vLLM loading has its port bound but not listening (refused)
    assert "health timeout" in outcome.detail and "connection refused by 127.0.0.1:" in outcome.detail
    assert pool.sim_hosts["tp4"].profiles[ENGINE]["POOL_PROFILE"] == "awq-4bit-tp4"  # the old one is back
    assert (await EnginePoller(next(e for e in config.engines if e.name == ENGINE)).poll()).state.value == "ok"
    assert audit.entries(tmp_path / "audit.db")[0].outcome == "rolled back"
    assert audit.active_profile(tmp_path / "audit.db", ENGINE) is None  # nothing was promoted


async def test_an_action_stopped_midway_is_audited_as_abandoned_with_where_it_stood(
    demo: tuple[SimPool, PoolConfig], tmp_path: Path
) -> None:
    """The console quit (or Ctrl+C on the CLI) while the broken profile loads: no rollback runs, and the audit
    says so, with what the host's file holds; the next action knows the profile the file holds (it had read
    the old one as active, and a re-apply of it as "already active"). A restart stopped the same way too."""
    pool, config = demo
    engine = next(e for e in config.engines if e.name == ENGINE)
    host = config.host(engine.host)
    assert host is not None
    said: list[str] = []
    ssh = SSHPool([host], 10, 4)
    path = tmp_path / "audit.db"
    try:
        live = live_memory((await poll_hosts(config, {host.name}))[host.name], engine, 0.0)
        ctx = lifecycle.ActionContext(config, ssh[host.name], path, progress=said.append)
        for action in (
            lifecycle.rollover(ctx, engine, BROKEN_PROFILE, smoke=None, live=live),
            lifecycle.restart(ctx, engine),
        ):
            task = asyncio.ensure_future(action)
            for _ in range(200):  # until it waits for the engine to serve (the broken profile: 503, loading)
                if any(line.startswith("waiting for") for line in said):
                    break
                await asyncio.sleep(0.05)
            said.clear()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
    finally:
        await ssh.close()
    restart, rollover = audit.entries(path)  # newest first
    assert (rollover.outcome, rollover.profile_to) == ("abandoned", BROKEN_PROFILE)
    assert f"holds {BROKEN_PROFILE} and the engine was restarted on it, not yet seen serving" in rollover.detail
    assert rollover.detail.endswith("no rollback ran (roll over to awq-4bit-tp4 to restore it)")
    assert pool.sim_hosts["tp4"].profiles[ENGINE]["POOL_PROFILE"] == BROKEN_PROFILE  # what the audit says
    assert audit.active_profile(path, ENGINE) == BROKEN_PROFILE
    assert restart.outcome == "abandoned" and f"`docker restart {ENGINE}` was sent" in restart.detail
    assert restart.detail.startswith("stopped after ") and restart.commands == [f"docker restart {ENGINE}"]
    assert said[-1].startswith("== abandoned: stopped after ")


async def test_a_failed_smoke_verdict_rolls_back(
    demo: tuple[SimPool, PoolConfig], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pool, config = demo
    monkeypatch.setenv("POOL_TEST_HF_TOKEN", CANARY)
    calls = []

    async def failing(say: Callable[[str], None]) -> object:
        calls.append(1)
        return "correctness probe: expected /paris/, got 'Lyon'"

    outcome, _ = await run_rollover(config, tmp_path, "awq-4bit-tp4-long", smoke=failing)
    assert calls == [1]
    assert outcome.outcome == "rolled back" and "correctness probe" in outcome.detail
    assert pool.sim_hosts["tp4"].profiles[ENGINE]["POOL_PROFILE"] == "awq-4bit-tp4"
    assert audit.active_profile(tmp_path / "audit.db", ENGINE) is None


async def test_loading_is_waiting_in_each_engines_own_words(demo: tuple[SimPool, PoolConfig]) -> None:
    """Loading is waiting, not healthy, as each engine says it: llama-server answers every request 503
    "Loading model" (its /metrics too, so the poll reads it as loading); vLLM has its port bound but not
    listening, so connections are refused (the demo had served /metrics meanwhile, and the console drew a
    loading vLLM as ok)."""
    pool, config = demo
    llama = next(e for e in config.engines if e.name == "qwen2.5-coder-3090")
    pool.engines[llama.name].restart(loading_s=60.0)
    said: list[str] = []
    gave_up = r"health timeout \(last checked at \d+ s; the next check would have come after the timeout\); "
    with pytest.raises(NotServing, match=gave_up + "last answer: GET .*/health: HTTP 503"):
        await await_serving(llama, 2.5, said.append, first_wait_s=0.0, every_s=0.5)
    polled = await EnginePoller(llama).poll()
    assert polled.state.value == "degraded" and polled.error == "loading model (/health answers 503)"
    pool.engines[llama.name].loading_until = 0.0
    ready = await await_serving(llama, 10, said.append, first_wait_s=0.0, every_s=0.5)
    assert ready >= 0 and "one token generated" in said[-1]
    vllm = next(e for e in config.engines if e.name == ENGINE)
    pool.engines[ENGINE].restart(loading_s=60.0)
    with pytest.raises(NotServing, match=gave_up + "last answer: .*/health: connection refused by 127.0.0.1:"):
        await await_serving(vllm, 2.5, said.append, first_wait_s=0.0, every_s=0.5)
    assert (await EnginePoller(vllm).poll()).state.value == "down"


async def test_a_crash_loop_is_seen_as_restarts_and_raises_the_alert(demo: tuple[SimPool, PoolConfig]) -> None:
    """vLLM-style: connections refused for a while, then back with reset counters, three times."""
    pool, config = demo
    name = "qwen3-30b-a3b"
    state = PoolState(config)
    alerts = Alerts(config.alerts)
    poller = EnginePoller(next(e for e in config.engines if e.name == name), settings=config.settings)
    fired: list[str] = []

    async def poll(times: int) -> None:
        for _ in range(times):
            snap = await poller.poll()
            view = state.apply_engine(snap)
            fired.extend(e.rule for e in alerts.engine(view, snap.fetched_at) if e.fired)
            await asyncio.sleep(0.3)

    try:
        await poll(2)
        for _ in range(3):
            crash = asyncio.create_task(pool.restart(name, refuse_s=1.5))
            await poll(4)  # polls land while it refuses connections
            await crash
            await poll(2)
    finally:
        await poller.aclose()
    assert len(state.engines[name].history.restarts) == 3
    assert fired.count("down") == 3 and "restart_loop" in fired


def test_the_audit_holds_no_unredacted_secret_assignment(tmp_path: Path) -> None:
    audit.record(tmp_path / "a.db", "rollover", "e", ["echo API_KEY=sk-123456"], "ok", "TOKEN=abcdef", 1.0)
    raw = (tmp_path / "a.db").read_bytes() + b"".join(p.read_bytes() for p in tmp_path.glob("a.db-*") if p.is_file())
    assert b"sk-123456" not in raw and b"abcdef" not in raw
    with sqlite3.connect(tmp_path / "a.db") as db:
        (commands,) = db.execute("SELECT commands FROM actions").fetchone()
    assert re.search(r"API_KEY=<redacted>", commands)
