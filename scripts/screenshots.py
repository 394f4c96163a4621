"""Render every console screen from the live demo pool to SVG and PNG in screenshots/.

Run by hand: `.venv/bin/python scripts/screenshots.py`. The PNGs are drawn by headless Chromium with Fira Code,
the font the SVGs name (Debian: `apt-get install chromium fonts-firacode`): rasterized by cairosvg with another
font, the block glyphs had another width, and the tok/s trend was drawn over the TTFT column. Look at every PNG
before committing it.
"""

from __future__ import annotations

import asyncio
import math
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from poolconsole.cli import DEMO_HINT  # noqa: E402
from poolconsole.config import parse_config  # noqa: E402
from poolconsole.sim.demo import SimPool  # noqa: E402
from poolconsole.ui.app import PoolApp  # noqa: E402
from poolconsole.ui.grid import PoolGrid  # noqa: E402

OUT = ROOT / "screenshots"
SIZE = (160, 45)


async def main() -> None:
    OUT.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        pool = SimPool(scenario="normal", seed=7)
        await pool.start(Path(tmp) / "keys")
        try:
            await pool.wait_ready()
            config = parse_config(pool.config_toml())
            hint = DEMO_HINT.format(user="~/.config/poolconsole/hosts.toml")  # as `poolconsole` shows the demo
            app = PoolApp(config, theme_state=Path(tmp) / "ui.json", subtitle="demo pool (normal)", hint=hint)
            async with app.run_test(size=SIZE) as pilot:
                await asyncio.sleep(40)  # let history build up
                shots: list[tuple[str, tuple[str, ...]]] = [
                    ("overview", ()),
                    ("detail", ("enter",)),
                    ("gateway", ("escape", "g")),
                    ("alerts", ("escape", "a")),
                    ("help", ("escape", "question_mark")),
                    ("filter", ("escape", "slash", *"vllm")),
                    ("events", ("escape", "escape", "E")),
                    ("grouped-by-model", ("escape", "G")),
                ]
                table = app.screen.query_one("#pool", PoolGrid)
                keys = list(table.order)
                table.move_cursor(row=keys.index("engine:qwen3-next-80b"))
                for name, keys_to_press in shots:
                    await pilot.press(*keys_to_press)
                    await asyncio.sleep(1.2)
                    app.clear_notifications()
                    await pilot.pause()
                    app.save_screenshot(str(OUT / f"{name}.svg"))
                await pilot.press("G", "G")  # back to grouping by host
                for theme in ("pool-light", "pool-high-contrast", "pool-colorblind"):
                    await pilot.press("escape", "escape")
                    app.set_theme(theme)
                    await asyncio.sleep(1.0)
                    app.clear_notifications()
                    await pilot.pause()
                    app.save_screenshot(str(OUT / f"theme-{theme}.svg"))
                app.set_theme("pool-dark")
        finally:
            await pool.stop()
    for svg in sorted(OUT.glob("*.svg")):
        to_png(svg)
        print(svg.with_suffix(".png").relative_to(ROOT))


def to_png(svg: Path) -> None:
    """The SVG at its own size, through headless Chromium (no network: the SVG's web-font URLs are not
    fetched; Fira Code is found installed, by its local() name)."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise SystemExit("no chromium on PATH (Debian: apt-get install chromium fonts-firacode)")
    found = re.search(r'viewBox="0 0 ([\d.]+) ([\d.]+)"', svg.read_text())
    if found is None:
        raise SystemExit(f"{svg}: no viewBox")
    width, height = (math.ceil(float(v)) for v in found.groups())
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run(
            [
                chromium,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--hide-scrollbars",
                f"--user-data-dir={profile}",
                f"--window-size={width},{height}",
                f"--screenshot={svg.with_suffix('.png')}",
                svg.resolve().as_uri(),
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )


if __name__ == "__main__":
    if sys.argv[1:] == ["--png-only"]:  # the PNGs again from the SVGs as they are
        for svg in sorted(OUT.glob("*.svg")):
            to_png(svg)
    else:
        asyncio.run(main())
