"""Safety rules a mutation of the code survived in the fast tier (issue 35): a profile's values never reach the
audit log, --read-only refuses restart and rollover (the CLI and the lifecycle both), and an exception inside
one engine's poll is that engine's failure, the other engines polled as before. (The Bearer scrub is
tests/unit/test_secret_text.py's.)"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import cast

import pytest

from poolconsole import cli
from poolconsole.collect.engines.kinds.metrics_engine import MetricsEngineAdapter
from poolconsole.collect.engines.poll import EnginePoller
from poolconsole.collect.engines.scratch import Scratch
from poolconsole.collect.http import Fetched
from poolconsole.collect.ssh import CommandResult, HostConnection, SSHFailure
from poolconsole.config import load_config
from poolconsole.config.models import Engine, EngineKind
from poolconsole.model.hosts import HostState
from poolconsole.model.snapshots import EngineState
from poolconsole.ops import audit, lifecycle
from poolconsole.sim.demo import SimPool
from poolconsole.sim.demo_files import demo_stores
from tests.unit.test_hostile_input import PAGE, vllm_pages

ROOT = Path(__file__).resolve().parents[2]

# -- the audit log never holds a profile's values ---------------------------------------------------------------


def test_a_profiles_values_are_scrubbed_from_the_audit_entry_on_disk(tmp_path: Path) -> None:
    """`secrets` are a rollover's profile values (env values a profile file carries, read from the operator's
    environment): a command or a failure's words that echo one must not keep it, even under a name that
    does not look secret (PLAIN=...), where only the values scrub can catch it."""
    path = tmp_path / "audit.sqlite3"
    value = "s3cret-from-env"
    audit.record(
        path,
        "rollover",
        "e",
        [f"printf PLAIN={value} | install /srv/e.env", "docker restart e"],
        "failed",
        f"`docker restart e` exited 1: bad value {value}",
        2.0,
        "a",
        "b",
        secrets=(value, "x"),  # "x": too short to scrub, or every x in the entry would go
    )
    (entry,) = audit.entries(path)
    assert entry.commands == ["printf PLAIN=<redacted> | install /srv/e.env", "docker restart e"]
    assert entry.detail == "`docker restart e` exited 1: bad value <redacted>"
    assert value.encode() not in path.read_bytes()


# -- --read-only refuses, before anything runs -----------------------------------------------------------------


class NoHost:
    """A host connection that keeps every command it is asked to run, and fails it (a restart that got this
    far ends at once, instead of waiting for an engine to serve)."""

    def __init__(self) -> None:
        self.commands: list[str] = []

    async def run(self, command: str, timeout_s: float | None = None, stdin: str | None = None) -> CommandResult:
        self.commands.append(command)
        raise SSHFailure(HostState.UNREACHABLE, "no host here")


async def test_the_lifecycle_refuses_restart_and_rollover_in_read_only_mode(tmp_path: Path) -> None:
    """The guard under every caller (console, CLI, watcher): refused and audited as refused, no command sent."""
    config = load_config(ROOT / "hosts.toml")
    engine = next(e for e in config.engines if e.control is not None and e.control.profile_file and e.profiles)
    host = NoHost()
    path = tmp_path / "audit.sqlite3"
    ctx = lifecycle.ActionContext(config, cast(HostConnection, host), path, progress=lambda _: None, read_only=True)
    with pytest.raises(lifecycle.ActionRefused, match=r"^read-only mode: restart refused$"):
        await lifecycle.restart(ctx, engine)
    with pytest.raises(lifecycle.ActionRefused, match=r"^read-only mode: rollover refused$"):
        await lifecycle.rollover(ctx, engine, engine.profiles[-1].name, force=True)
    assert host.commands == []
    said = [(e.action, e.outcome, e.detail, e.commands) for e in audit.entries(path)]
    assert sorted(said) == [
        ("restart", "refused", "read-only mode: restart refused", []),
        ("rollover", "refused", "read-only mode: rollover refused", []),
    ]


@contextlib.asynccontextmanager
async def demo_pool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[SimPool, Path]]:
    """The simulated pool answering over SSH, its hosts.toml as `poolconsole demo` writes it."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    pool = SimPool(seed=23)
    await pool.start(tmp_path / "demo-23.toml.ssh")
    try:
        await pool.wait_ready()
        path = tmp_path / "demo-23.toml"
        path.write_text(pool.config_toml())
        yield pool, path
    finally:
        await pool.stop()


async def test_read_only_refuses_the_clis_restart_and_rollover_with_yes_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`poolconsole --read-only restart X --yes` against a pool that would restart (the demo's: the same
    command without --read-only restarts it, tests/ui/test_demo_stores.py): refused, the engine untouched,
    nothing audited. --read-only before the command or after it."""
    async with demo_pool(tmp_path, monkeypatch) as (pool, path):
        config = load_config(path)
        engine = next(e for e in config.engines if e.control is not None and e.control.profile_file and e.profiles)
        profile = engine.profiles[-1].name
        at = ["--config", str(path), "--yes"]
        for argv in (
            ["--read-only", "restart", engine.name, *at],
            ["restart", engine.name, *at, "--read-only"],
            ["--read-only", "rollover", engine.name, profile, "--force", "--no-smoke", *at],
            ["rollover", engine.name, profile, "--force", "--no-smoke", *at, "--read-only"],
        ):
            capsys.readouterr()
            assert await asyncio.to_thread(cli.main, argv) == cli.EXIT_PROBLEM, argv
            assert capsys.readouterr().err.strip().endswith("refused: read-only mode"), argv
        assert pool.engines[engine.name].restarts == 0
    own_audit = demo_stores(path)[0]
    assert not own_audit.exists() or audit.entries(own_audit) == []


# -- one engine's internal error stays that engine's -----------------------------------------------------------


async def test_an_exception_inside_one_engines_poll_is_its_failure_and_the_others_poll_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The last-resort handler in EnginePoller.poll: what no parser foresaw (here the read of one engine's
    /metrics page raises) becomes that engine's degraded state with the exception in words; the poll of the
    engine beside it, at the same time, reads as if nothing happened."""
    sick = EnginePoller(Engine(name="sick", kind=EngineKind.VLLM, url="http://sick"), vllm_pages(PAGE.encode()))
    well = EnginePoller(Engine(name="well", kind=EngineKind.VLLM, url="http://well"), vllm_pages(PAGE.encode()))

    vllm = cast(MetricsEngineAdapter, sick.adapter)  # one adapter object per kind, shared by both pollers
    read_metrics = vllm.read_metrics

    def unforeseen(poller: EnginePoller, poll: Scratch, fetched: Fetched) -> None:
        if poller is sick:
            raise KeyError("data")
        read_metrics(poller, poll, fetched)

    monkeypatch.setattr(vllm, "read_metrics", unforeseen)
    bad, good = await asyncio.gather(sick.poll(), well.poll())
    assert bad.state is EngineState.DEGRADED and bad.metrics is None
    assert bad.error == "internal error while reading this engine: KeyError: 'data'"
    assert bad.missing["requests_running"] == "engine degraded"
    assert good.state is EngineState.OK and good.error is None and good.models
    assert good.metrics is not None and good.metrics.get("requests_running") is not None
    again = await sick.poll()  # the next poll of the sick engine is its own again: nothing carried over wrongly
    assert again.state is EngineState.DEGRADED and again.error == bad.error
