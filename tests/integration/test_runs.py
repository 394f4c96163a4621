"""Condition-logged smoke runs (issue 15) on the demo pool (simulated engines speaking the real formats,
hosts over real SSH): a run stores the profile really active, which after a rollover is the audit log's
and not the one hosts.toml names, with the engine's kind, version, host and GPUs; `runs --json` lists it and
`runs --compare A B` shows the conditions that differ."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from poolconsole import cli
from poolconsole.collect.ssh import SSHPool
from poolconsole.config import PoolConfig, parse_config
from poolconsole.ops import lifecycle
from poolconsole.ops.fit import live_memory
from poolconsole.ops.planning import poll_hosts
from poolconsole.sim.demo import SimPool

ENGINE = "qwen3-next-80b"
NAMED, PROMOTED = "awq-4bit-tp4", "awq-4bit-tp4-long"


@pytest.fixture
async def demo(tmp_path: Path) -> AsyncIterator[tuple[PoolConfig, Path]]:
    pool = SimPool(seed=3)
    await pool.start(tmp_path / "keys")
    try:
        await pool.wait_ready()
        text = pool.config_toml().replace("health_timeout_s = 20", "health_timeout_s = 6")
        path = tmp_path / "demo.toml"
        path.write_text(text)
        yield parse_config(text, str(path)), path
    finally:
        await pool.stop()


async def rollover(config: PoolConfig, audit_db: Path, profile: str) -> lifecycle.Outcome:
    engine = next(e for e in config.engines if e.name == ENGINE)
    host = config.host(engine.host)
    assert host is not None
    ssh = SSHPool([host], 10, 4)
    try:
        live = live_memory((await poll_hosts(config, {host.name}))[host.name], engine, 0.0)
        ctx = lifecycle.ActionContext(config, ssh[host.name], audit_db, progress=lambda line: None)
        return await lifecycle.rollover(ctx, engine, profile, smoke=None, live=live)
    finally:
        await ssh.close()


async def smoke(config_path: Path, db: Path, audit_db: Path) -> None:
    argv = ["smoke", ENGINE, "--config", str(config_path), "--db", str(db), "--audit-db", str(audit_db)]
    argv += ["--requests", "1", "--json"]
    code = await asyncio.to_thread(cli.main, argv)  # its own event loop; the demo pool serves it from this one
    assert code in (0, 1)  # passed or failed, the run is stored either way


def runs_json(capsys: pytest.CaptureFixture[str], *extra: str) -> Any:
    capsys.readouterr()
    assert cli.main(["runs", *extra, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


async def test_runs_list_the_profile_really_active_after_a_rollover(
    demo: tuple[PoolConfig, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config, config_path = demo
    db, audit_db = tmp_path / "smoke.db", tmp_path / "audit.db"
    assert next(e for e in config.engines if e.name == ENGINE).profile == NAMED  # what hosts.toml says

    await smoke(config_path, db, audit_db)
    outcome = await rollover(config, audit_db, PROMOTED)
    assert outcome.outcome == "ok", outcome.detail
    await smoke(config_path, db, audit_db)

    after, before = runs_json(capsys, "--db", str(db), "--target", ENGINE)  # newest first
    was, now = before["conditions"][ENGINE], after["conditions"][ENGINE]
    assert (was["profile"], was["profile_source"]) == (NAMED, "hosts.toml")
    assert (now["profile"], now["profile_source"]) == (PROMOTED, "audit log")  # not hosts.toml's NAMED
    assert now["kind"] == "vllm" and now["version"] and now["host"] == "tp4"
    assert now["gpu_model"] and "3090" in now["gpu_model"]  # from a poll of the host over SSH
    assert after["results"] and all(r["target"] == ENGINE for r in after["results"])

    diff = runs_json(capsys, "--db", str(db), "--compare", str(before["run_id"]), str(after["run_id"]))
    changed = {c["condition"]: (c["a"], c["b"]) for c in diff["conditions"] if c["target"] == ENGINE}
    assert changed["profile"] == (NAMED, PROMOTED)
    assert changed["profile_source"] == ("hosts.toml", "audit log")
    assert "kind" not in changed and "version" not in changed and "host" not in changed  # only what differs

    capsys.readouterr()
    assert cli.main(["runs", "--db", str(db), "--compare", str(before["run_id"]), str(after["run_id"])]) == 0
    timed = [line for line in capsys.readouterr().out.splitlines() if " ttft_p50: " in line]
    assert timed and all(re.search(r"ttft_p50: [\d.]+ ms -> [\d.]+ ms", line) for line in timed), timed  # not 0.1147..
    assert cli.main(["runs", "--db", str(db)]) == 0
    assert f"{PROMOTED} (from audit log)" in capsys.readouterr().out
    assert cli.main(["runs", "--db", str(db), "--compare", "1", "99"]) == 2
    assert "no run 99" in capsys.readouterr().err
