"""The floor under the console's fleet path (issue 39, deliverable 2): the same instant queries on the same
cadence, decoded, and a table of the rows in view kept current. Nothing else.

`python benchmarks/floor_prometheus.py --config FILE [--times FILE]` reads the console's hosts.toml (its
`[prometheus]` url, engines and hosts) and builds the queries with the console's own code
(`prometheus.queries.batch_groups` for the engines, `prometheus.hosts.host_groups` for the hosts), so they
are the strings the console sends (scale_bench logs both sides' and compares them). Every 2 s (the console's
default poll interval; the next tick is armed after this one ends, as the console's loops are) it sends
them all at once over one keep-alive aiohttp session, decodes each answer into its series as the console
does (`prometheus.api.parse_vector`: msgspec, in one pass), and updates, by row key, only the cells of the
engines the table has room for (the terminal's height) whose values moved. The engines' groups go as the
console's do: once read, their scrape times first, then the series of the instances scraped since the scrape
this program last read of them (`batch_expression`).
No model, no alerts, no store, no summary, no charts, no hosts' rows (their queries are sent and decoded,
as the console's are).

`benchmarks/scale_bench.py --only batched --only floor` runs it beside the console on one Prometheus.
Each answer is decoded and its rows shown as soon as it is in (the console applies each group as it answers).
With `--times FILE` it appends to FILE each tick's table updates in seconds (the counterpart of the console's
`refresh_screen`), and to FILE.decode each tick's decoding in CPU seconds of its thread (wall time on a
loaded machine counts the waits for a core); FILE.queries lists the groups' fixed queries it sent (a group's
one query, its scrape times' query), each once.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO
from urllib.parse import quote

from textual.app import App, ComposeResult
from textual.widgets import DataTable

from poolconsole.collect.engines.poll import SPEC
from poolconsole.collect.prometheus.api import Series, parse_vector
from poolconsole.collect.prometheus.host_queries import address_key, addresses_matcher, instance_address
from poolconsole.collect.prometheus.host_queries import batch_expression as host_batch_expression
from poolconsole.collect.prometheus.hosts import host_groups
from poolconsole.collect.prometheus.queries import SCRAPE_OF, batch_expression, batch_groups, instances_matcher
from poolconsole.collect.tls import import_aiohttp
from poolconsole.config.load import load_config
from poolconsole.config.models import Engine, Host

import_aiohttp()
import aiohttp  # noqa: E402

POLL_S = 2.0
"""The console's default poll interval (settings.poll_interval_s)."""
COLUMNS = ("Engine", "up", "running", "waiting", "generated")


@dataclass(frozen=True)
class Query:
    """One group of the console's batch: its query; for engines matched by instance and hosts matched by
    address, the scrape times' query sent first once they were read, the group's members (instances,
    addresses), which member an instance label names, and the query of the members scraped since."""

    expr: str
    stamps: str = ""
    members: list[str] = field(default_factory=list)
    member_of: Callable[[str], str | None] = lambda instance: instance
    read: Callable[[list[str]], str] = lambda members: ""


def engine_queries(engines: list[Engine]) -> list[Query]:
    kinds = {e.instance: e.kind for e in engines}

    def read(members: list[str]) -> str:
        return batch_expression({kinds[m] for m in members}, instances_matcher(members))

    return [
        Query(g.expr, g.stamps, [engines[k].instance for k in g.keys], read=read)
        for g in batch_groups(dict(enumerate(engines)))
    ]


def host_queries(hosts: list[Host]) -> list[Query]:
    def read(members: list[str]) -> str:
        return host_batch_expression(addresses_matcher(members))

    return [
        Query(g.expr, g.stamps, [address_key(hosts[k].address) for k in g.keys], instance_address, read)
        for g in host_groups(dict(enumerate(hosts)))
    ]


def columns_of(engine: Engine) -> dict[str, str]:
    """family -> the column it fills, for this engine's kind (its spec's names)."""
    spec = SPEC[engine.kind]
    out = {"up": "up"}
    out.update({n: "running" for n in spec.gauges["requests_running"][0]})
    out.update({n: "waiting" for n in spec.gauges["requests_waiting"][0]})
    out.update({n: "generated" for n in spec.counters["generation_tokens_total"]})
    return out


class FloorPrometheus(App[None]):
    """Query, decode, update the rows in view by key, every POLL_S, until quit."""

    def __init__(self, url: str, queries: list[Query], engines: list[Engine], times: Path | None) -> None:
        super().__init__()
        self.url = url
        self.queries = queries
        self.held: dict[str, tuple[tuple[str, float], ...]] = {}
        """member -> its targets' scrape times last read (the console's pollers keep theirs)."""
        self.engines = sorted(engines, key=lambda e: e.name)
        self.shown: dict[str, Engine] = {}
        """instance -> engine, for the rows in view."""
        self.columns: dict[str, dict[str, str]] = {}
        """instance -> its families' columns, for the rows in view."""
        self.cells: dict[tuple[str, str], str] = {}
        """What each shown cell holds: a cell is written only when its text moves."""
        self.times: TextIO | None = None
        self.decodes: TextIO | None = None
        self.sent: TextIO | None = None
        if times is not None:
            self.times = times.open("a", buffering=1)  # open while the app runs
            self.decodes = Path(f"{times}.decode").open("a", buffering=1)  # noqa: SIM115
            self.sent = Path(f"{times}.queries").open("w", buffering=1)  # noqa: SIM115
        self.fixed = {q.expr for q in queries} | {q.stamps for q in queries if q.stamps}
        """The queries that do not change with the tick: each is logged the first time it is sent."""

    def compose(self) -> ComposeResult:
        yield DataTable()

    def on_mount(self) -> None:
        table: DataTable[str] = self.query_one(DataTable)
        for column in COLUMNS:
            table.add_column(column, key=column)
        room = max(1, self.size.height - 1)  # the header takes a line
        self.shown = {e.instance: e for e in self.engines[:room]}
        self.columns = {i: columns_of(e) for i, e in self.shown.items()}
        self.run_worker(self.poll_forever(), exclusive=True)

    async def poll_forever(self) -> None:
        table: DataTable[str] = self.query_one(DataTable)
        async with aiohttp.ClientSession() as session:

            async def get(expr: str) -> bytes | None:
                if expr in self.fixed and self.sent is not None:
                    self.fixed.discard(expr)
                    self.sent.write(expr + "\n")
                path = f"{self.url}/api/v1/query?query={quote(expr, safe='')}"
                try:
                    async with session.get(path, timeout=aiohttp.ClientTimeout(total=10)) as r:
                        return await r.read()
                except (aiohttp.ClientError, TimeoutError):
                    return None

            async def one(query: Query) -> tuple[float, float]:
                """One group: its answer decoded and its rows shown as soon as it is in (the console too
                applies each group as it answers): (CPU s decoding, s updating the table)."""
                decoding = 0.0
                expr = query.expr
                if query.stamps and any(m in self.held for m in query.members):  # as the console
                    body = await get(query.stamps)
                    if body is None:
                        return 0.0, 0.0
                    started = time.thread_time()
                    fresh = self.fresh(body, query)
                    decoding = time.thread_time() - started
                    if not fresh:
                        return decoding, 0.0
                    expr = query.read(fresh)
                body = await get(expr)
                if body is None:
                    return decoding, 0.0
                started = time.thread_time()
                values = self.decode(body, query)
                decoding += time.thread_time() - started
                drawing = time.perf_counter()
                self.show(table, values)
                return decoding, time.perf_counter() - drawing

            while True:
                started = time.monotonic()
                spent = await asyncio.gather(*(one(q) for q in self.queries))
                if self.times is not None and self.decodes is not None:
                    self.decodes.write(f"{sum(d for d, _ in spent):.6f}\n")
                    self.times.write(f"{sum(s for _, s in spent):.6f}\n")
                await asyncio.sleep(max(0.0, POLL_S - (time.monotonic() - started)))

    @staticmethod
    def scraped(result: Sequence[Series], query: Query) -> dict[str, tuple[tuple[str, float], ...]]:
        """Each member's targets' scrape times in an answer's tagged timestamp() series."""
        times: dict[str, list[tuple[str, float]]] = {}
        for s in result:
            labels = s.labels
            member = query.member_of(labels.get("instance", ""))
            if SCRAPE_OF in labels and member is not None:
                times.setdefault(member, []).append((labels.get("instance", ""), s.value))
        return {m: tuple(sorted(t)) for m, t in times.items()}

    def fresh(self, body: bytes, query: Query) -> list[str]:
        """The members of a scrape times' answer scraped since this program last read them."""
        latest = self.scraped(parse_vector(body), query)
        return [m for m in query.members if m not in latest or self.held.get(m) != latest[m]]

    def decode(self, body: bytes, query: Query) -> dict[str, dict[str, float]]:
        """An answer decoded whole (as the console decodes it); the shown engines' values picked out, and
        the scrape times read."""
        values: dict[str, dict[str, float]] = {}
        result = parse_vector(body)
        self.held.update(self.scraped(result, query))
        for s in result:
            labels = s.labels
            instance = labels.get("instance", "")
            column = self.columns.get(instance, {}).get(labels.get("__name__", ""))
            if column is None:
                continue
            row = values.setdefault(self.shown[instance].name, {})
            row[column] = row.get(column, 0.0) + s.value
        return values

    def show(self, table: DataTable[str], values: dict[str, dict[str, float]]) -> None:
        """Rows added at the first answer (so the first frame with data is the first frame with rows), then
        only the cells whose text moved."""
        with self.batch_update():
            for engine in self.shown.values():
                row = values.get(engine.name)
                if row is None:
                    continue
                texts = {c: f"{row[c]:.0f}" if c in row else "n/a" for c in COLUMNS[1:]}
                if (engine.name, "Engine") not in self.cells:
                    self.cells[(engine.name, "Engine")] = engine.name
                    table.add_row(engine.name, *texts.values(), key=engine.name)
                    self.cells.update({(engine.name, c): t for c, t in texts.items()})
                    continue
                for column, text in texts.items():
                    if self.cells[(engine.name, column)] != text:
                        self.cells[(engine.name, column)] = text
                        table.update_cell(engine.name, column, text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", type=Path, required=True, help="the console's hosts.toml")
    parser.add_argument("--times", type=Path, help="append each tick's table update (s) here")
    args = parser.parse_args()
    config = load_config(args.config)
    if config.prometheus is None:
        raise SystemExit(f"{args.config} has no [prometheus] url")
    engines = [e for e in config.engines if e.read == "prometheus"]
    hosts = [h for h in config.hosts if h.read == "prometheus"]
    queries = engine_queries(engines) + host_queries(hosts)
    FloorPrometheus(config.prometheus.url.rstrip("/"), queries, engines, args.times).run()


if __name__ == "__main__":
    main()
