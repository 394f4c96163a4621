"""The collector's policy for a long-running console holds from the start: the imports' objects frozen and
young collections rare as soon as the loops begin (at 1,000 engines the default policy spent 0.47 s in 646
collections, 5 of them full, before the first frame with data), then settled and full collections on a
timer (tests/ui/test_console.py walks those)."""

from __future__ import annotations

import asyncio
import gc
import json
import subprocess
import sys
import weakref
from pathlib import Path

from poolconsole.config import parse_config
from poolconsole.runtime.live import GC_THRESHOLD, GcPolicy, LivePool


def test_the_collector_policy_holds_from_the_start() -> None:
    threshold = gc.get_threshold()
    gc.unfreeze()
    gc.set_threshold(700, 10, 10)  # Python's defaults, whatever an earlier test left

    async def started() -> tuple[int, int, bool]:
        live = LivePool(parse_config("", "hosts.toml"))
        live.start()
        try:
            return gc.get_freeze_count(), gc.get_threshold()[0], live.gc.settled
        finally:
            await live.stop()

    try:
        frozen, young, settled = asyncio.run(started())
        assert frozen > 0 and young == GC_THRESHOLD and not settled
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)


def test_without_the_policy_the_collector_is_left_as_it_was() -> None:
    threshold = gc.get_threshold()
    gc.unfreeze()

    async def started() -> tuple[int, tuple[int, int, int]]:
        live = LivePool(parse_config("", "hosts.toml"))
        live.start(settle_gc=False)  # tests and embedders that keep their own
        try:
            return gc.get_freeze_count(), gc.get_threshold()
        finally:
            await live.stop()

    try:
        assert asyncio.run(started()) == (0, threshold)
    finally:
        gc.set_threshold(*threshold)


def _entry(argv: list[str], spy_console: bool = False) -> dict[str, object]:
    """`poolconsole ARGV` in a fresh interpreter, through the command's entry point: how many automatic
    collections ran before the collector was resumed, and whether it runs when the console would open."""
    script = f"""
import contextlib, gc, io, json, sys
ran = []
gc.callbacks.append(lambda phase, info: phase == "start" and ran.append(1))
real_enable = gc.enable
resumed_after = []
def enable():
    resumed_after.append(len(ran))
    real_enable()
gc.enable = enable
opened = []
if {spy_console!r}:
    gc.disable()  # as the entry point does, for the imports below
    import poolconsole.commands.launch as launch
    launch.open_console = lambda *a, **k: opened.append(gc.isenabled()) or 0
import poolconsole.__main__ as entry
sys.argv = ["poolconsole", *{argv!r}]
ran.clear()  # from here on: what the command's start-up runs
with contextlib.redirect_stdout(io.StringIO()):
    code = entry.main()
print(json.dumps({{"code": code, "resumed_after": resumed_after, "enabled": gc.isenabled(), "opened": opened}}))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    return dict(json.loads(done.stdout.splitlines()[-1]))


def test_start_up_runs_no_collection_and_a_command_gets_the_collector_back() -> None:
    """The imports (pydantic, the config models, the CLI) ran some 70 collections at every launch over objects
    that live as long as the process; paused, none ran before the command began."""
    seen = _entry(["schema"])
    assert seen["code"] == 0
    assert seen["resumed_after"] == [0]
    assert seen["enabled"] is True


def test_the_console_leaves_the_collector_paused_for_its_runtime(tmp_path: Path) -> None:
    config = tmp_path / "hosts.toml"
    config.write_text('[[engines]]\nname = "a"\nkind = "vllm"\nurl = "http://127.0.0.1:9"\n')
    seen = _entry(["--config", str(config)], spy_console=True)
    assert seen["opened"] == [False]  # GcPolicy.start resumes it as the loops begin


def test_settling_collects_what_start_up_left_unreachable() -> None:
    """`start` freezes whatever exists, start-up's garbage included (no collection ran before it); `settle`
    unfreezes first, so a cycle made before `start` is collected then and does not stay frozen for good."""
    threshold = gc.get_threshold()
    gc.disable()

    class Cycle:
        pass

    a = Cycle()
    a.self = a  # type: ignore[attr-defined]
    probe = weakref.ref(a)
    del a
    policy = GcPolicy()
    try:
        policy.start()
        gc.collect()
        assert probe() is not None  # frozen: out of the collector's sight
        policy.settle()
        assert probe() is None
    finally:
        gc.enable()
        gc.unfreeze()
        gc.set_threshold(*threshold)


def test_the_policy_resumes_a_paused_collector() -> None:
    threshold = gc.get_threshold()
    gc.disable()

    async def started() -> bool:
        live = LivePool(parse_config("", "hosts.toml"))
        live.start()
        try:
            return gc.isenabled()
        finally:
            await live.stop()

    try:
        assert asyncio.run(started()) is True
    finally:
        gc.enable()
        gc.unfreeze()
        gc.set_threshold(*threshold)
