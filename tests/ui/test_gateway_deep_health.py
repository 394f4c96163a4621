"""LiteLLM's deep /health on its own cadence (settings.litellm_health_interval_s): shown on the gateway
screen, with the warning that each probe spends tokens; never probed when the setting is 0."""

from __future__ import annotations

import asyncio
from pathlib import Path

from poolconsole.config import parse_config
from poolconsole.ui.app import PoolApp
from poolconsole.ui.screens.others import GatewayScreen
from tests.ui.test_console import demo_pool


def gateway_text(app: PoolApp) -> str:
    from textual.widgets import Static

    return str(app.screen.query_one("#gateway-summary", Static).render())


async def test_deep_health_is_probed_on_its_cadence_and_shown(tmp_path: Path) -> None:
    async with demo_pool(5, None) as pool:
        text = pool.config_toml().replace("http_timeout_s = 3.0", "http_timeout_s = 3.0\nlitellm_health_interval_s = 1")
        config = parse_config(text)
        assert any("spends tokens" in w for w in config.warnings())
        app = PoolApp(config, theme_state=tmp_path / "ui.json")
        async with app.run_test(size=(140, 40)) as pilot:
            for _ in range(60):
                if "gateway" in app.state.deep_health:
                    break
                await asyncio.sleep(0.25)
            _, result = app.state.deep_health["gateway"]
            assert "healthy" in result, result
            await pilot.press("g")
            await pilot.pause()
            assert isinstance(app.screen, GatewayScreen)
            assert "deep /health" in gateway_text(app) and "healthy" in gateway_text(app)


async def test_deep_health_is_off_by_default(tmp_path: Path) -> None:
    async with demo_pool(6, None) as pool:
        config = parse_config(pool.config_toml())
        assert not any("spends tokens" in w for w in config.warnings())
        app = PoolApp(config, theme_state=tmp_path / "ui.json")
        async with app.run_test(size=(140, 40)):
            await asyncio.sleep(2.0)
            assert app.state.deep_health == {}
