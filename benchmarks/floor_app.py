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

`--steady` is the floor in steady state (issue 39, deliverable 3): every second it GETs every engine's
/metrics over one keep-alive session, reads each page with the project's own parser (`parse_metrics` with a
page memo per engine, the console's fast path) and keeps the table current by key (running, waiting,
generated tokens, tok/s from the counter's growth). Nothing else: no alerts, no store, no summary, no
charts. It is what the console's 1 s poll of N direct engines cannot cost less than on this stack.
"""

from __future__ import annotations

import argparse
import asyncio
import time
import tomllib
from pathlib import Path

import pydantic
from textual.app import App, ComposeResult
from textual.widgets import DataTable

from poolconsole.collect.engines.mapping import parse_metrics
from poolconsole.collect.engines.page_memo import PageMemo
from poolconsole.collect.engines.specs import VLLM
from poolconsole.collect.prom import ParseError
from poolconsole.collect.tls import import_aiohttp

import_aiohttp()
import aiohttp  # noqa: E402


class Engine(pydantic.BaseModel):
    name: str
    url: str


def engines(path: Path) -> list[Engine]:
    doc = tomllib.loads(path.read_text())
    return [Engine(name=e["name"], url=e["url"]) for e in doc.get("engines", [])]


POLL_S = 1.0
STEADY_COLUMNS = ("engine", "running", "waiting", "generated", "tok/s")


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


class SteadyFloor(App[None]):
    """Poll, parse, update the rows by key, once a second, until quit."""

    def __init__(self, pool: list[Engine]) -> None:
        super().__init__()
        self.pool = pool
        self.memos = {e.name: PageMemo() for e in pool}
        self.last: dict[str, tuple[float, float]] = {}
        """engine -> (when, generated tokens) at its last poll: the rate's base."""

    def compose(self) -> ComposeResult:
        yield DataTable()

    async def on_mount(self) -> None:
        table = self.query_one(DataTable)
        for column in STEADY_COLUMNS:
            table.add_column(column, key=column)
        for engine in self.pool:
            table.add_row(engine.name, "", "", "", "", key=engine.name)
        self.run_worker(self.poll_forever(), exclusive=True)

    async def poll_forever(self) -> None:
        table = self.query_one(DataTable)
        async with aiohttp.ClientSession() as session:

            async def one(engine: Engine) -> tuple[Engine, bytes | None]:
                try:
                    async with session.get(engine.url + "/metrics") as r:
                        return engine, await r.read()
                except (aiohttp.ClientError, TimeoutError):
                    return engine, None

            while True:
                started = time.monotonic()
                for engine, page in await asyncio.gather(*(one(e) for e in self.pool)):
                    self.show(table, engine, page)
                await asyncio.sleep(max(0.0, POLL_S - (time.monotonic() - started)))

    def show(self, table: DataTable[str], engine: Engine, page: bytes | None) -> None:
        if page is None:
            table.update_cell(engine.name, "running", "down")
            return
        try:
            metrics, _, _ = parse_metrics(page, VLLM, self.memos[engine.name])
        except ParseError:
            table.update_cell(engine.name, "running", "unreadable")
            return
        generated = metrics.get("generation_tokens_total") or 0.0
        now = time.monotonic()
        before = self.last.get(engine.name)
        self.last[engine.name] = (now, generated)
        rate = max(0.0, (generated - before[1]) / (now - before[0])) if before and now > before[0] else 0.0
        for column, value in (
            ("running", metrics.get("requests_running")),
            ("waiting", metrics.get("requests_waiting")),
            ("generated", generated),
            ("tok/s", rate),
        ):
            table.update_cell(engine.name, column, "" if value is None else f"{value:.0f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", type=Path, required=True)
    parser.add_argument("--steady", action="store_true", help="poll and parse every second, rows kept current")
    args = parser.parse_args()
    pool = engines(args.config)
    (SteadyFloor(pool) if args.steady else Floor(pool)).run()


if __name__ == "__main__":
    main()
