"""The watcher's heal behind a real gateway (issue 38): tests.helpers.healrig's engine `llama` (llama-server
under supervisord over a loopback sshd) and a second llama-server `b` both serving `tiny` through a real LiteLLM
proxy (1.108.7, no database; test_drain_real's gateway: deployments of `tiny` on both, `tiny-spare` on b), all
three in the pool's config; and a client that counts failed requests through the gateway."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.helpers.engines import CACHE, llama_server, model_path
from tests.helpers.healrig import Rig, heal_rig
from tests.integration.test_drain_real import KEY, caller, chat_ok, gateway

KEY_ENV = "PC_HEAL_GW_KEY"
"""The gateway's master key's variable in the pool's config (set by gateway_heal_rig)."""


def litellm_built() -> bool:
    """Whether the LiteLLM proxy is there without building it (scripts/test.sh sets POOLCONSOLE_LITELLM)."""
    named = os.environ.get("POOLCONSOLE_LITELLM")
    return bool(named and Path(named).exists()) or (CACHE / "litellm-1.108.7" / ".ready").exists()


@contextmanager
def gateway_heal_rig(tmp: Path, *, policy: str, router: str) -> Iterator[tuple[Rig, str]]:
    """(the rig, the gateway's URL); `router`: the gateway's router_settings line. rig.config() holds llama
    (model tiny), b and the gateway gw (its key in KEY_ENV, set here while the rig runs)."""
    before = os.environ.get(KEY_ENV)
    os.environ[KEY_ENV] = KEY
    try:
        with (
            heal_rig(tmp, policy=policy) as rig,
            llama_server(tmp, model_path("tiny", seed=1), "-t", "1") as b,
            gateway(tmp, rig.url, b, router) as gw,
        ):
            rig.config_text = rig.config_text.replace('kind = "llamacpp"\n', 'kind = "llamacpp"\nmodel = "tiny"\n', 1)
            rig.config_text += (
                f'[[engines]]\nname = "b"\nkind = "llamacpp"\nurl = "{b}"\nmodel = "tiny"\n'
                f'[[engines]]\nname = "gw"\nkind = "litellm"\nurl = "{gw}"\napi_key_env = "{KEY_ENV}"\n'
            )
            yield rig, gw
    finally:
        if before is None:
            os.environ.pop(KEY_ENV, None)
        else:
            os.environ[KEY_ENV] = before


async def client(url: str, stop: asyncio.Event, every_s: float = 0.2) -> tuple[int, int]:
    """A request through the gateway each `every_s` until `stop`: (failed, sent); failed is not 200."""
    async with caller(url) as c:
        tasks = []
        while not stop.is_set():
            tasks.append(asyncio.create_task(chat_ok(c, 8)))
            await asyncio.sleep(every_s)
        answers = await asyncio.gather(*tasks)
    return sum(not ok for ok in answers), len(answers)
