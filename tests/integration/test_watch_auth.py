"""A receiver URL with `user:password@` and a `token_env` on the same `[[notify]]`: the page goes out with the
bearer token (one Authorization header; aiohttp had refused every send), and a silence created in
Alertmanager carries the token too (httpx had sent the URL's Basic credentials instead). Without a token the
URL's credentials still go as Basic auth."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Iterator
from pathlib import Path

import pytest

from poolconsole.config import parse_config
from poolconsole.model.notify import Silence, bearer_target
from poolconsole.ops.silence import create_alertmanager_silence
from tests.helpers.rawhttp import free_port
from tests.helpers.receivers import Receiver, until
from tests.helpers.tiny_engine import TinyEngine
from tests.integration.test_watch import Watcher, config_text, notify

SECRET = "t0ken-beside-basic-4e1a"


@pytest.fixture
def engine() -> Iterator[TinyEngine]:
    tiny = TinyEngine(free_port())
    tiny.start()
    yield tiny
    tiny.stop()


def test_the_token_replaces_the_urls_credentials_and_nothing_else() -> None:
    assert bearer_target("http://u:p@127.0.0.1:9/hook?x=1", "t") == "http://127.0.0.1:9/hook?x=1"
    assert bearer_target("http://u:p@127.0.0.1:9/hook", None) == "http://u:p@127.0.0.1:9/hook"
    assert bearer_target("http://127.0.0.1:9/a@b", "t") == "http://127.0.0.1:9/a@b"


async def test_a_token_beside_url_credentials_pages_with_the_token(
    engine: TinyEngine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("POOL_HOOK_TOKEN", SECRET)
    hook = await Receiver().start()
    basic = await Receiver().start()
    try:
        url = f"http://alice:pw@127.0.0.1:{hook.port}/hook"
        plain = f"http://bob:pw2@127.0.0.1:{basic.port}/hook"
        text = config_text(engine, notify("webhook", url, 'token_env = "POOL_HOOK_TOKEN"') + notify("webhook", plain))
        config = parse_config(text, "hosts.toml")
        async with Watcher(config, tmp_path / "history.sqlite3") as w:
            assert w.watching is not None
            assert any("instead of the URL's user:password" in r for r in w.watching.receivers)
            engine.stop()
            await until(lambda: hook.webhooks("firing", "down") and basic.received, 30, "the pages")
            assert not any("retrying" in p for p in w.problems), w.problems
        assert hook.received[0].headers["Authorization"] == f"Bearer {SECRET}"
        expected = "Basic " + base64.b64encode(b"bob:pw2").decode()
        assert basic.received[0].headers["Authorization"] == expected
    finally:
        await hook.stop()
        await basic.stop()


async def test_a_silence_carries_the_token_not_the_urls_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POOL_AM_TOKEN", SECRET)
    am = await Receiver().start()
    try:
        text = notify("alertmanager", f"http://alice:pw@127.0.0.1:{am.port}", 'token_env = "POOL_AM_TOKEN"')
        config = parse_config(text, "hosts.toml")
        silence = Silence("s1", {"alertname": "down"}, 0.0, 3600.0, "op", "test")
        await asyncio.wait_for(create_alertmanager_silence(config.notify[0], silence), 30)
        assert am.received and am.received[0].headers["Authorization"] == f"Bearer {SECRET}"
        assert am.received[0].path == "/api/v2/silences"
    finally:
        await am.stop()
