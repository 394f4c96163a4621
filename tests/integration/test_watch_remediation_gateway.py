"""`poolconsole watch` heals an engine that sits behind a real LiteLLM gateway (issue 38, items 2 and 4): engine
`llama` (llama-server under supervisord, `on_down = "restart"`) and engine `b` (a second llama-server) both
serve `tiny` through LiteLLM 1.108.7 (no database) with the router settings the Plan prints. `llama` is killed
while a client sends 5 requests/s through the gateway; the watcher notices, reads the gateway's router settings
(the drain), says what the callers see, restarts `llama` through supervisorctl over SSH, and its notification
(the webhook's) says it: "restarted llama: down: ...; while it was away, tiny: gateway gw has 3 retries and a
fallback: its callers' requests go to the other deployments; 2 of 3 actions left this hour". No client request
fails. Skipped where the LiteLLM proxy is not built (scripts/setup-litellm.sh; scripts/test.sh builds it and
sets POOLCONSOLE_LITELLM)."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from poolconsole.ops import audit
from poolconsole.workflows import restart
from poolconsole.workflows.workspace import Workspace
from tests.helpers.healgateway import client, gateway_heal_rig, litellm_built
from tests.helpers.healrig import ENGINE, Watcher
from tests.helpers.receivers import Receiver, until
from tests.integration.test_drain_real import PLANNED

pytestmark = pytest.mark.engine
SEE = "tiny: gateway gw has 3 retries and a fallback: its callers' requests go to the other deployments"


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    r = await Receiver().start()
    yield r
    await r.stop()


@pytest.mark.skipif(not litellm_built(), reason="the LiteLLM proxy is not built (scripts/setup-litellm.sh)")
async def test_watch_restarts_an_engine_behind_the_gateway_and_says_what_its_callers_see(
    tmp_path: Path, receiver: Receiver
) -> None:
    with gateway_heal_rig(tmp_path, policy='on_down = "restart"', router=PLANNED) as (rig, gw):
        config = rig.config(f'[[notify]]\nkind = "webhook"\nurl = "{receiver.url}/hook"\n')
        ws = Workspace(config, rig.audit)
        planned = " ".join(restart.plan(ws, ENGINE).text())  # what an operator's confirmation would say
        await ws.close()
        assert "drain: LiteLLM without its database cannot take one deployment out of routing" in planned
        assert "tiny's callers to b: they see no errors where the gateway has these settings" in planned
        killed = rig.supervisor.pid(ENGINE)
        async with Watcher(config, tmp_path) as w:
            await asyncio.sleep(3.0)  # a few polls of both engines and the gateway
            stop = asyncio.Event()
            sending = asyncio.create_task(client(gw, stop))
            await asyncio.sleep(1.0)
            os.kill(killed, signal.SIGKILL)
            t0 = time.monotonic()
            await w.until(f"remediation: drain: {SEE}", timeout_s=60, after=t0)
            _, said = await w.until(f"remediation: restarted {ENGINE}: down", timeout_s=90, after=t0)
            await asyncio.sleep(2.0)  # the gateway routes to it again
            stop.set()
            failed, sent = await sending
            await until(lambda: announced(receiver), 30, "the webhook's announcement of the restart")
        assert said.endswith(f"; while it was away, {SEE}; 2 of 3 actions left this hour"), said
        (acted,) = announced(receiver)
        assert acted["annotations"]["summary"] == said.removeprefix("remediation: ")
        assert sent > 20 and failed == 0, (
            f"{failed} of {sent} client request(s) failed through the gateway while {ENGINE} was away"
        )
        assert rig.supervisor.pid(ENGINE) not in (0, killed)
    (entry,) = audit.entries(rig.audit)
    assert (entry.action, entry.outcome, entry.automatic, entry.rule) == ("restart", "ok", True, "down")


def announced(receiver: Receiver) -> list[dict[str, Any]]:
    docs = receiver.webhooks("firing", "remediation")
    return [a for d in docs for a in d["alerts"] if a["labels"].get("stage") == "acted"]
