"""`poolconsole demo --scenario oom` diagnosed and audited as an operator would: the engine that runs out of
GPU memory under load is read through its control backend (`docker logs` over the simulated host's SSH),
and both `logs --json` and the runtime's alert name the failure mode and the adjustment; `exposure --json`
flags the one engine that answers without a key and passes those that require one."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from poolconsole import cli
from poolconsole.config import PoolConfig, parse_config
from poolconsole.model.alerts import AlertEvent
from poolconsole.model.view import EngineView
from poolconsole.runtime.live import LivePool, Update
from poolconsole.sim.demo import DEMO_KEY_ENV, KEYLESS_ENGINE, OOM_ENGINE, SimPool
from poolconsole.sim.logs import OOM_LINE
from tests.conftest import FIXTURES

ADJUSTMENT = "Lower --gpu-memory-utilization / --mem-fraction-static"


@pytest.fixture
async def oom_demo(tmp_path: Path) -> AsyncIterator[tuple[SimPool, PoolConfig, Path]]:
    pool = SimPool("oom", seed=5)
    pool.oom_after_s = 4.0
    pool.oom_loading_s = 2.0
    await pool.start(tmp_path / "keys")
    try:
        await pool.wait_ready()
        path = tmp_path / "demo.toml"
        path.write_text(pool.config_toml())
        yield pool, parse_config(path.read_text(), str(path)), path
    finally:
        await pool.stop()


def test_the_crash_line_is_verbatim_from_a_public_issue() -> None:
    posted = (FIXTURES / "log-lines" / "issue-lines.txt").read_text()
    assert OOM_LINE in posted and "vllm-project/vllm/issues/2140" in posted


def is_ok(view: EngineView | None) -> bool:
    return view is not None and view.state == "ok"


async def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """The CLI as an operator runs it (its own asyncio.run), in a thread beside the demo's event loop."""
    code = await asyncio.to_thread(cli.main, argv)
    return code, capsys.readouterr().out


async def test_oom_under_load_names_the_failure_mode_in_the_alert_and_logs_json(
    oom_demo: tuple[SimPool, PoolConfig, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    pool, config, path = oom_demo
    live = LivePool(config)
    fired: list[AlertEvent] = []

    def heard(update: Update) -> None:
        fired.extend(e for e in update.events if e.fired and e.rule == "log:cuda_out_of_memory")

    live.subscribe(heard)
    live.start(settle_gc=False)
    track = live.state.engines[OOM_ENGINE]
    try:
        deadline = time.monotonic() + 45
        while time.monotonic() < deadline and not (fired and track.history.restarts and is_ok(track.view)):
            await asyncio.sleep(0.2)
        assert fired, "no log:cuda_out_of_memory alert after the crash"
        event = fired[0]
        assert event.target == OOM_ENGINE
        assert "CUDA out of memory" in event.message and ADJUSTMENT in event.message
        assert pool.engines[OOM_ENGINE].restarts == 1 and track.history.restarts  # it restarted, and serves
        assert is_ok(track.view)
        diagnosis = live.state.engines[OOM_ENGINE].diagnosis
        assert diagnosis is not None and diagnosis.source == f"docker logs {OOM_ENGINE}"
        assert [f.pattern for f in diagnosis.findings] == ["cuda_out_of_memory"]
        assert all(e.target == OOM_ENGINE for e in fired)  # no other engine was diagnosed with it
    finally:
        await live.stop()

    code, out = await run_cli(["logs", OOM_ENGINE, "--config", str(path), "--json", "--since", "10m"], capsys)
    doc = json.loads(out)
    assert code == 1  # a failure mode was found
    assert doc["source"] == f"docker logs {OOM_ENGINE}" and doc["error"] is None
    assert any(OOM_LINE in line for line in doc["lines"])
    assert any("Application startup complete" in line for line in doc["lines"][-3:])  # it restarted after
    (finding,) = doc["findings"]
    assert finding["pattern"] == "cuda_out_of_memory" and OOM_LINE in finding["line"]
    assert ADJUSTMENT in finding["adjustment"] and "out of memory" in finding["diagnosis"]
    assert any(c.startswith("{ docker logs --tail 500 --since 600s") for c in pool.sim_hosts["tp4"].commands)

    code, out = await run_cli(["logs", "qwen3-30b-a3b", "--config", str(path), "--json"], capsys)
    assert code == 0 and json.loads(out)["findings"] == []  # a healthy engine's log shows nothing


async def test_exposure_flags_the_keyless_engine_and_passes_the_keyed_ones(
    oom_demo: tuple[SimPool, PoolConfig, Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    pool, _, path = oom_demo
    assert pool.key is not None
    monkeypatch.setenv(DEMO_KEY_ENV, pool.key)
    code, out = await run_cli(["exposure", "--config", str(path), "--json"], capsys)
    doc = json.loads(out)
    by_name = {e["name"]: e for e in doc["engines"]}
    assert code == 1 and doc["exposed"] is True
    keyless = by_name[KEYLESS_ENGINE]
    assert keyless["unauthenticated"] is True and keyless["exposed"] is True
    assert "models_without_key" in {f["check"] for f in keyless["findings"]}
    # where each engine listens is read from its simulated host's `ss -ltnH`, not guessed: the key-less
    # engine is bound to every interface, the keyed ones to loopback
    assert "listen_all_interfaces" in {f["check"] for f in keyless["findings"]}
    assert keyless["listen"] == [f"0.0.0.0:{pool.engines[KEYLESS_ENGINE].port}"], keyless
    unread = {e["name"]: e["unchecked"] for e in doc["engines"] if any("listening" in u for u in e["unchecked"])}
    assert set(unread) == {"deepseek-studio"}, unread  # the Mac has no `ss`
    assert "studio has no `ss`" in unread["deepseek-studio"][0]
    for name in ("qwen3-next-80b", "gemma3-27b-nvfp4", "qwen2.5-coder-3090", "gateway"):
        entry = by_name[name]
        assert entry["unauthenticated"] is False, (name, entry)
        assert entry["exposed"] is False, (name, entry["findings"])
    assert [e["name"] for e in doc["engines"] if e["unauthenticated"]] == [KEYLESS_ENGINE]
