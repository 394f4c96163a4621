"""The floor under the console's first frame with data, as a program the peers harness can run beside it.

`python benchmarks/floor_app.py --config FILE` reads the engines of a hosts.toml (name and url) into a
pydantic model, then runs a Textual app of one DataTable that fetches every engine's /metrics and
/v1/models with one aiohttp session and shows a row per engine: its name, its first model's id and the
size of its page. It is what the design card's stack (Textual, aiohttp, pydantic) costs to put the pool's
first data on screen, with nothing of poolconsole's own but aiohttp's import without the CA store (as the
console imports it). In the harness (`../shared/peers/measure.sh`), with MARKER the model's name:

    W=... ../shared/peers/measure.sh floor 32 tiny -- .venv/bin/python benchmarks/floor_app.py \\
        --config $W/conf/poolconsole-32.toml

Measured on 2026-12-03 (README, Measured): the console's first frame is at this floor.
"""

from __future__ import annotations

import argparse
import asyncio
import tomllib
from pathlib import Path

import pydantic
from textual.app import App, ComposeResult
from textual.widgets import DataTable

from poolconsole.collect.tls import import_aiohttp

import_aiohttp()
import aiohttp  # noqa: E402


class Engine(pydantic.BaseModel):
    name: str
    url: str


def engines(path: Path) -> list[Engine]:
    doc = tomllib.loads(path.read_text())
    return [Engine(name=e["name"], url=e["url"]) for e in doc.get("engines", [])]


class Floor(App[None]):
    def __init__(self, pool: list[Engine]) -> None:
        super().__init__()
        self.pool = pool

    def compose(self) -> ComposeResult:
        yield DataTable()

    async def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns("engine", "model", "bytes")
        async with aiohttp.ClientSession() as session:

            async def one(engine: Engine) -> tuple[str, str, int]:
                async with session.get(engine.url + "/metrics") as r:
                    page = await r.text()
                async with session.get(engine.url + "/v1/models") as r:
                    models = await r.json()
                return engine.name, str(models["data"][0]["id"]), len(page)

            for row in await asyncio.gather(*(one(e) for e in self.pool)):
                table.add_row(*row)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", type=Path, required=True)
    Floor(engines(parser.parse_args().config)).run()


if __name__ == "__main__":
    main()
