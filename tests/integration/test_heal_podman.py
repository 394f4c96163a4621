"""The watcher heals a real wedge in a real podman container (issue 38, "under podman"): `kill -STOP` of the
containerised llama-server (its socket still accepts, nothing replies); `poolconsole watch` with
`on_down = "restart"` notices it, says it will restart after the grace, runs `podman restart` over SSH (the
podman backend; podman SIGKILLs the stopped process after --stop-timeout and starts the container again), sees
it serve again, and audits the restart as automatic with the rule. Skipped, with the reason, where podman
cannot run a container here."""

from __future__ import annotations

import asyncio
import os
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from poolconsole.ops import audit
from tests.helpers.healpodman import podman_heal_rig, podman_reason
from tests.helpers.healrig import ENGINE, Watcher, serves
from tests.helpers.podman import import_llama_image, podman

pytestmark = pytest.mark.engine


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    reason = podman_reason()
    if reason is not None:  # a missing engine fails, never skips (as test_podman_real): scripts/test.sh installs it
        raise RuntimeError(reason)
    tag = f"localhost/poolconsole-heal-llama:{uuid.uuid4().hex[:12]}"
    import_llama_image(tmp_path_factory.mktemp("image"), tag)
    try:
        yield tag
    finally:
        podman("rmi", "-f", tag, check=False)


async def test_a_sigstopped_llama_server_in_a_container_is_restarted_through_podman(image: str, tmp_path: Path) -> None:
    with podman_heal_rig(tmp_path, image, policy='on_down = "restart"\non_stalled = "restart"') as box:
        wedged, started = box.pid(), box.started_at()
        assert wedged > 0
        async with Watcher(box.config(), tmp_path) as w:
            await asyncio.sleep(3.0)  # a few polls of the engine serving
            assert await serves(box.url)
            os.kill(wedged, signal.SIGSTOP)
            stopped = time.monotonic()
            assert not await serves(box.url)  # the wedge: the port accepts, nothing answers
            notice, said = await w.until(f"restarting {ENGINE} in 2 s if it still holds", timeout_s=60, after=stopped)
            assert said.startswith("remediation: down: "), said
            acted, said = await w.until(f"restarted {ENGINE}: down", timeout_s=120, after=stopped)
            assert "serving again after" in said and "2 of 3 actions left this hour" in said, said
            assert notice - stopped < 30 and acted - stopped < 90, (notice - stopped, acted - stopped)
            assert box.pid() not in (0, wedged) and box.started_at() != started  # the container really restarted
            assert await serves(box.url)
    (entry,) = audit.entries(box.audit)
    assert (entry.action, entry.target, entry.outcome) == ("restart", ENGINE, "ok")
    assert entry.automatic is True and entry.rule == "down"
    assert entry.commands == [f"{tmp_path / 'podman-here'} restart {box.name}"], entry.commands
