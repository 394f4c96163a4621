"""workflows.drain on the real LiteLLM proxy (1.108.7, no database) with two real llama-servers serving `tiny`
(issue 38): the gateway's router settings are read from its own `/router/settings`, the drain says what the
callers will see from them, and the settings the Plan prints do carry the callers across: with engine a
gone (its port refusing) while a client sends requests through the gateway, none fails. Without them
(num_retries 0) some do, which is why the Plan prints them."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import httpx
import pytest

from poolconsole.config import parse_config
from poolconsole.workflows import drain
from tests.helpers.engines import litellm_binary, llama_server, llama_server_binary, model_path, running, wait_http
from tests.helpers.rawhttp import free_port

pytestmark = pytest.mark.engine
KEY = "sk-drain-test"
PLANNED = "router_settings: {num_retries: 3, allowed_fails: 1, cooldown_time: 30, fallbacks: [{tiny: [tiny-spare]}]}"


@contextmanager
def gateway(tmp: Path, a: str, b: str, router: str) -> Iterator[str]:
    port = free_port()
    conf = tmp / f"litellm-{port}.yaml"
    rows = [("tiny", a, "eng-a"), ("tiny", b, "eng-b"), ("tiny-spare", b, "eng-b-spare")]
    conf.write_text(
        "model_list:\n"
        + "".join(
            f"  - model_name: {name}\n"
            f'    litellm_params: {{model: openai/tiny, api_base: "{url}/v1", api_key: "none"}}\n'
            f"    model_info: {{id: {ident}}}\n"
            for name, url, ident in rows
        )
        + "litellm_settings: {telemetry: false, drop_params: true}\n"
        + f"{router}\ngeneral_settings: {{master_key: {KEY}}}\n"
    )
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_TELEMETRY": "False"}
    cmd = [litellm_binary(), "--config", str(conf), "--host", "127.0.0.1", "--port", str(port)]
    with running(cmd, "/health/liveliness", port, tmp / f"litellm-{port}.log", 120, env) as url:
        yield url


@contextmanager
def engine_a(tmp: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A llama-server this test kills itself."""
    port = free_port()
    cmd = [llama_server_binary(), "-m", str(model_path("tiny", seed=1)), "--host", "127.0.0.1", "--port", str(port)]
    cmd += ["--metrics", "--alias", "tiny", "-t", "1"]
    log = tmp / "engine-a.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_http(f"http://127.0.0.1:{port}/health", proc, 60, log)
        yield f"http://127.0.0.1:{port}", proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)


def caller(url: str) -> httpx.AsyncClient:
    """A caller of the gateway, with its key."""
    return httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {KEY}"}, timeout=60, trust_env=False)


async def chat_ok(c: httpx.AsyncClient, max_tokens: int) -> bool:
    """One chat completion of `tiny` through the gateway: answered 200, or failed (any other answer, or none)."""
    body = {"model": "tiny", "messages": [{"role": "user", "content": "hello"}], "max_tokens": max_tokens}
    try:
        return (await c.post("/v1/chat/completions", json=body)).status_code == 200
    except httpx.HTTPError:
        return False


async def failures_while_a_is_gone(url: str, a: subprocess.Popen[bytes], n: int = 30) -> int:
    """`n` requests at 10/s through the gateway; engine a killed after the fifth."""
    async with caller(url) as c:

        async def one() -> bool:
            return await chat_ok(c, 16)

        tasks = []
        for i in range(n):
            if i == 5:
                os.kill(a.pid, signal.SIGKILL)
            tasks.append(asyncio.create_task(one()))
            await asyncio.sleep(0.1)
        return sum(not ok for ok in await asyncio.gather(*tasks))


@contextmanager
def pool(tmp: Path, router: str) -> Iterator[tuple[str, str, str, subprocess.Popen[bytes]]]:
    """(gateway, a, b, a's process): two llama-servers behind one LiteLLM with `router` settings."""
    with ExitStack() as stack:
        b = stack.enter_context(llama_server(tmp, model_path("tiny", seed=1), "-t", "1"))
        a, proc = stack.enter_context(engine_a(tmp))
        yield stack.enter_context(gateway(tmp, a, b, router)), a, b, proc


async def test_the_planned_settings_are_read_and_carry_the_callers_across(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    planned = "\n".join(drain.settings_text("tiny", ("b",), None))  # what the Plan prints is what runs here
    for setting in ("num_retries: 3", "allowed_fails: 1", "cooldown_time: 30", "fallbacks: [{tiny: [tiny-spare]}]"):
        assert setting in planned and setting in PLANNED
    with pool(tmp_path, PLANNED) as (url, a, b, proc):
        text = (
            f'[[engines]]\nname = "gw"\nkind = "litellm"\nurl = "{url}"\napi_key_env = "PC_DRAIN_TEST_KEY"\n'
            f'[[engines]]\nname = "a"\nkind = "llamacpp"\nurl = "{a}"\nmodel = "tiny"\n'
            f'[[engines]]\nname = "b"\nkind = "llamacpp"\nurl = "{b}"\nmodel = "tiny"\n'
        )
        cfg = parse_config(text)
        monkeypatch.setenv("PC_DRAIN_TEST_KEY", KEY)
        read = await drain.read_router_settings(cfg.engines[0])
        assert read == drain.RouterSettings(3, ("tiny",), 1, 30.0)
        said: list[str] = []
        assert await drain.before(cfg, cfg.engines[1], said.append, wait=False)
        assert said == [
            "drain: tiny: gateway gw has 3 retries and a fallback: its callers' requests go to the other deployments"
        ]
        assert await failures_while_a_is_gone(url, proc) == 0


async def test_without_retries_the_callers_see_errors(tmp_path: Path) -> None:
    with pool(tmp_path, "router_settings: {num_retries: 0}") as (url, _, _, proc):
        assert await failures_while_a_is_gone(url, proc) > 0
