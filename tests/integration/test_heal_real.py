"""The watcher heals a real wedge (issue 38): `kill -STOP` of a real llama-server under a real supervisord stops
it answering (its socket still accepts, nothing replies); `poolconsole watch` with `on_down = "restart"` notices
it, says it will restart after the grace, restarts it through supervisorctl over SSH (supervisord SIGKILLs the
stopped process after stopwaitsecs and starts a new one), sees it serve again, and audits the restart as
automatic with the rule. Fails when the remediation does not act (a new process never starts) or acts without
the notice first."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import pytest

from poolconsole.ops import audit
from tests.helpers.healrig import ENGINE, Watcher, heal_rig, serves

pytestmark = pytest.mark.engine


async def test_a_sigstopped_llama_server_is_restarted_through_supervisord(tmp_path: Path) -> None:
    with heal_rig(tmp_path, policy='on_down = "restart"\non_stalled = "restart"') as rig:
        wedged = rig.supervisor.pid(ENGINE)
        assert wedged > 0
        async with Watcher(rig.config(), tmp_path) as w:
            await asyncio.sleep(3.0)  # a few polls of the engine serving
            assert await serves(rig.url)
            os.kill(wedged, signal.SIGSTOP)
            stopped = time.monotonic()
            assert not await serves(rig.url)  # the wedge: the port accepts, nothing answers
            notice, said = await w.until(f"restarting {ENGINE} in 2 s if it still holds", timeout_s=60, after=stopped)
            assert said.startswith("remediation: down: "), said
            acted, said = await w.until(f"restarted {ENGINE}: down", timeout_s=120, after=stopped)
            assert "serving again after" in said and "2 of 3 actions left this hour" in said, said
            assert notice - stopped < 30 and acted - stopped < 90, (notice - stopped, acted - stopped)
            fresh = rig.supervisor.pid(ENGINE)
            assert fresh not in (0, wedged)
            assert await serves(rig.url)
    (entry,) = audit.entries(rig.audit)
    assert (entry.action, entry.target, entry.outcome) == ("restart", ENGINE, "ok")
    assert entry.automatic is True and entry.rule == "down"
    assert any("supervisorctl" in c and f"restart {ENGINE}" in c for c in entry.commands)
