"""`poolconsole watch` with `[remediation]` on (issue 38), against the demo's `--scenario wedge` over its real SSH
hosts: the wedged engine (its /health 200, requests running, no token) fires `stalled`, the watcher announces it,
waits grace_s, restarts it ONCE through workflows.restart (the simulated host records one `docker restart`), the
audit shows the restart with automatic: true and rule "stalled", a webhook receiver on 127.0.0.1 gets the
announcement ("restarted ...: stalled ...; serving again after N s; 2 of 3 actions left this hour"), and the
engine serves again. With max_actions_per_hour = 1 (and no cooldown), a second wedge within the hour is a
"budget spent" notification and no second command (a safety rule: fails with the budget check removed). With
--dry-run the watcher (in this process, and the command) says "would restart ..." and no command reaches the
host, nothing is audited, nothing is announced. stall_s is 3 s and grace_s 1 s to keep it short; only the
wedged engine's policy restarts (the command's config: every engine's)."""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from poolconsole.config import parse_config
from poolconsole.config.models import EngineRemediation, PoolConfig, Remediation
from poolconsole.ops import audit
from poolconsole.runtime.notifier import Notifier
from poolconsole.runtime.remediation_board import Pending
from poolconsole.runtime.watch import Watching, watch
from poolconsole.sim.demo import WEDGE_ENGINE, SimPool
from poolconsole.workflows import remediation_cancel
from poolconsole.workflows.remediation import remediation
from tests.helpers.receivers import Receiver, until
from tests.helpers.simpools import answering

ROOT = Path(__file__).resolve().parents[2]
RESTART = f"docker restart {WEDGE_ENGINE}"


@pytest.fixture
async def wedged(tmp_path: Path) -> AsyncIterator[SimPool]:
    pool = SimPool("wedge", seed=5)
    pool.wedge_after_s = 1.0
    async with answering(pool, tmp_path / "keys"):
        yield pool


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    r = await Receiver().start()
    yield r
    await r.stop()


def pool_config(sim: SimPool, hook: str, budget: int) -> PoolConfig:
    text = sim.config_toml().replace("poll_interval_s = 1.0", "poll_interval_s = 0.5")
    text += f'\n[alerts]\nstall_s = 3.0\n\n[[notify]]\nkind = "webhook"\nurl = "{hook}"\n'
    config = parse_config(text, "hosts.toml")
    engines = [
        e.model_copy(update={"remediation": EngineRemediation(on_stalled="restart")}) if e.name == WEDGE_ENGINE else e
        for e in config.engines
    ]
    policy = Remediation(enabled=True, max_actions_per_hour=budget, cooldown_s=0.0, grace_s=1.0)
    return config.model_copy(update={"engines": engines, "remediation": policy})


class Watcher:
    """`watch` with the remediation as its companion, in this process."""

    def __init__(self, config: PoolConfig, tmp_path: Path, *, dry_run: bool = False) -> None:
        self.config = config
        self.store = tmp_path / "history.sqlite3"
        self.audit = tmp_path / "audit.sqlite3"
        self.dry_run = dry_run
        self.said: list[str] = []
        self.stop = asyncio.Event()
        self.watching: Watching | None = None
        self.task: asyncio.Task[Notifier] | None = None

    async def __aenter__(self) -> Watcher:
        def ready(w: Watching) -> None:
            self.watching = w

        heal = remediation(self.config, self.audit, dry_run=self.dry_run, say=self.said.append)
        self.task = asyncio.create_task(
            watch(self.config, self.store, self.stop, ready=ready, gather_s=0.2, settle_gc=False, companions=[heal])
        )
        await until(lambda: self.watching is not None or self.task is None or self.task.done(), 30, "the watcher")
        if self.task.done():
            self.task.result()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.stop.set()
        assert self.task is not None
        await asyncio.wait_for(self.task, 60)


def restarts(sim: SimPool) -> list[str]:
    host = sim.sim_hosts[sim.engines[WEDGE_ENGINE].spec.host]
    return [c for c in host.commands if c == RESTART]


def announced(hook: Receiver, stage: str) -> list[dict[str, Any]]:
    out = []
    for doc in hook.webhooks("firing", "remediation"):
        out += [a for a in doc["alerts"] if a["labels"].get("stage") == stage]
    return out


async def serves(sim: SimPool) -> bool:
    engine = sim.engines[WEDGE_ENGINE]
    body = {"model": engine.spec.models[0], "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
    async with httpx.AsyncClient(trust_env=False, timeout=10.0) as client:
        answer = await client.post(engine.url + "/v1/chat/completions", json=body)
    return answer.status_code == 200


async def test_the_wedged_engine_is_restarted_once_audited_as_automatic_and_announced(
    wedged: SimPool, receiver: Receiver, tmp_path: Path
) -> None:
    config = pool_config(wedged, f"{receiver.url}/hook", budget=3)
    async with Watcher(config, tmp_path) as w:
        await until(lambda: announced(receiver, "acted"), 120, "the announcement of the restart")
        assert len(restarts(wedged)) == 1
        (pending,) = announced(receiver, "pending")
        assert pending["labels"]["engine"] == WEDGE_ENGINE and pending["labels"]["rule"] == "stalled"
        assert f"restarting {WEDGE_ENGINE} in 1 s if it still holds" in pending["annotations"]["summary"]
        (acted,) = announced(receiver, "acted")
        said = acted["annotations"]["summary"]
        assert said.startswith(f"restarted {WEDGE_ENGINE}: stalled: ") and " running and " in said, said
        assert "; serving again after " in said and said.endswith("; 2 of 3 actions left this hour"), said
        assert acted["labels"]["action"] == "restart" and acted["labels"]["alertname"] == "remediation"
        assert not wedged.engines[WEDGE_ENGINE].wedged and await serves(wedged)
        await asyncio.sleep(5.0)  # the stall clears; no second action follows
        assert len(restarts(wedged)) == 1
        assert any(line.startswith(f"remediation: restarted {WEDGE_ENGINE}") for line in w.said)
    (entry,) = audit.entries(tmp_path / "audit.sqlite3")
    assert (entry.action, entry.target, entry.outcome) == ("restart", WEDGE_ENGINE, "ok")
    assert entry.automatic is True and entry.rule == "stalled" and entry.commands == [RESTART]
    assert entry.to_json()["automatic"] is True


async def test_with_a_budget_of_one_a_second_case_within_the_hour_is_notified_not_acted_on(
    wedged: SimPool, receiver: Receiver, tmp_path: Path
) -> None:
    config = pool_config(wedged, f"{receiver.url}/hook", budget=1)
    async with Watcher(config, tmp_path):
        await until(lambda: announced(receiver, "acted"), 120, "the first restart")
        assert "0 of 1 actions left this hour" in announced(receiver, "acted")[0]["annotations"]["summary"]
        await until(lambda: receiver.webhooks("resolved", "stalled"), 60, "the stall to clear after the restart")
        wedged.wedge(WEDGE_ENGINE)  # the second case, minutes later, no cooldown in the way
        second = "the budget-spent notification (or a second restart)"
        await until(lambda: announced(receiver, "budget_spent") or len(restarts(wedged)) > 1, 120, second)
        assert len(restarts(wedged)) == 1, "a second automatic restart within the hour, past a budget of 1"
        (spent,) = announced(receiver, "budget_spent")
        assert spent["labels"]["severity"] == "critical"
        assert spent["annotations"]["summary"].startswith("budget spent: stalled: ")
        assert "needs a person" in spent["annotations"]["summary"]
        await asyncio.sleep(3.0)
        assert len(restarts(wedged)) == 1 and wedged.engines[WEDGE_ENGINE].wedged
    assert len(audit.entries(tmp_path / "audit.sqlite3")) == 1


async def test_a_dry_run_says_what_it_would_do_and_sends_no_command(
    wedged: SimPool, receiver: Receiver, tmp_path: Path
) -> None:
    config = pool_config(wedged, f"{receiver.url}/hook", budget=3)
    async with Watcher(config, tmp_path, dry_run=True) as w:
        await until(lambda: any(line.startswith("would restart") for line in w.said), 120, "the dry run's line")
        line = next(line for line in w.said if line.startswith("would restart"))
        assert line.startswith(f"would restart {WEDGE_ENGINE}: stalled: "), line
        await until(lambda: receiver.webhooks("firing", "stalled"), 30, "the stalled page itself")
        await asyncio.sleep(3.0)
    assert restarts(wedged) == [] and wedged.engines[WEDGE_ENGINE].wedged
    assert audit.entries(tmp_path / "audit.sqlite3") == []
    assert receiver.webhooks(alertname="remediation") == []


async def test_the_command_with_dry_run_prints_would_restart_and_sends_no_command(
    wedged: SimPool, tmp_path: Path
) -> None:
    hosts = tmp_path / "hosts.toml"
    text = wedged.config_toml().replace("poll_interval_s = 1.0", "poll_interval_s = 0.5")
    text += '\n[alerts]\nstall_s = 3.0\n\n[remediation]\nenabled = true\ngrace_s = 1\non_stalled = "restart"\n'
    hosts.write_text(text)
    argv = ["-m", "poolconsole", "watch", "--dry-run", "--config", str(hosts), "--store", str(tmp_path / "h.sqlite3")]
    proc = await asyncio.create_subprocess_exec(
        sys.executable, *argv, cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    lines: list[str] = []
    try:
        assert proc.stdout is not None

        async def read() -> None:
            assert proc.stdout is not None
            while not any(line.startswith(f"would restart {WEDGE_ENGINE}: stalled: ") for line in lines):
                raw = await proc.stdout.readline()
                if not raw:
                    return
                lines.append(raw.decode().rstrip("\n"))

        await asyncio.wait_for(read(), 120)
        proc.send_signal(signal.SIGTERM)
        _, err = await asyncio.wait_for(proc.communicate(), 60)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 0, err.decode()
    said = "\n".join(lines)
    assert "remediation on (DRY RUN: says what it would do, does nothing): " in said, said
    assert f"would restart {WEDGE_ENGINE}: stalled: " in said, said
    sent = [c for host in wedged.sim_hosts.values() for c in host.commands]
    assert not [c for c in sent if c.startswith(("docker restart", "systemctl", "supervisorctl"))], sent
    assert wedged.engines[WEDGE_ENGINE].wedged


async def test_a_cancellation_from_the_console_while_the_grace_runs_means_no_restart(
    wedged: SimPool, receiver: Receiver, tmp_path: Path
) -> None:
    """Item 3: the watcher shows its pending restart on the board in its state file; a cancellation written
    through workflows.remediation_cancel (as the console's key does) while the grace runs drops it: no restart,
    the cancellation announced and audited, the board empty, and the case notify-only while it holds."""
    config = pool_config(wedged, f"{receiver.url}/hook", budget=3)
    config = config.model_copy(update={"remediation": config.remediation.model_copy(update={"grace_s": 8.0})})
    async with Watcher(config, tmp_path) as w:
        rows: list[Pending] = []

        async def shown() -> bool:
            rows[:] = await asyncio.to_thread(remediation_cancel.pending, w.store)
            return bool(rows)

        for _ in range(240):
            if await shown():
                break
            await asyncio.sleep(0.5)
        assert rows, f"no pending row on the board; the watcher said {w.said}"
        (row,) = rows
        assert (row.engine, row.rule, row.action, row.left, row.per_hour) == (WEDGE_ENGINE, "stalled", "restart", 3, 3)
        assert row.due_at == row.opened_at + 8.0
        plan = remediation_cancel.plan(w.store, row, "ann", time.time())
        outcome = await remediation_cancel.run(plan, w.audit)
        assert outcome.ok, outcome.detail
        await until(lambda: announced(receiver, "cancelled"), 30, "the cancellation's announcement")
        (said,) = announced(receiver, "cancelled")
        assert said["annotations"]["summary"].startswith(f"auto-restart of {WEDGE_ENGINE} cancelled by an operator")
        assert await asyncio.to_thread(remediation_cancel.pending, w.store) == []
        await asyncio.sleep(max(0.0, row.due_at - time.time()) + 4.0)  # past the grace: nothing runs
        assert restarts(wedged) == [] and wedged.engines[WEDGE_ENGINE].wedged
    (entry,) = audit.entries(w.audit)
    assert (entry.action, entry.target, entry.outcome) == ("cancel_remediation", f"{WEDGE_ENGINE}/stalled", "ok")
    assert entry.automatic is False
