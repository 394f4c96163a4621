"""`poolconsole status`: every target polled a few times, as a table or one JSON document: a bounded sampling run
of the runtime's own pollers, read through the pool-source contract (runtime.sampling.SampleSource)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import TYPE_CHECKING, Any

from poolconsole.commands.common import EXIT_CONFIG, EXIT_OK, EXIT_PROBLEM, Subparsers, discovered, empty, load
from poolconsole.model import units

if TYPE_CHECKING:
    from poolconsole.config.models import PoolConfig
    from poolconsole.runtime.sampling import PoolSample


def add_parser(sub: Subparsers) -> None:
    status = sub.add_parser("status", help="poll every target: a table, or one JSON document")
    status.add_argument("--config", metavar="FILE", default=argparse.SUPPRESS)
    status.add_argument("--prometheus", metavar="URL", default=argparse.SUPPRESS, help="discover the pool there")
    status.add_argument("--json", action="store_true", help="print one JSON document")
    status.add_argument("--samples", type=int, default=2, metavar="N", help="polls per target (default 2)")
    status.add_argument("--interval", type=float, default=1.0, metavar="S", help="seconds between polls (default 1)")
    status.set_defaults(func=run)


def _fmt(value: Any, kind: str = "") -> str:
    if value is None:
        return units.NA
    if kind == "pct":
        return units.pct(value)
    if kind == "s":
        return units.seconds(value, 2)
    if isinstance(value, float):
        return f"{value:.1f}" if not value.is_integer() else f"{value:.0f}"
    return str(value)


def _table(doc: dict[str, Any]) -> str:
    header = ["ENGINE", "KIND", "HOST", "STATE", "RUN", "WAIT", "KV", "GEN tok/s", "TTFT", "PREFIX", "MODELS"]
    rows = [header]
    for e in doc["engines"]:
        rows.append(
            [
                e["name"],
                e["kind"],
                e["host"] or "-",
                e["state"],
                _fmt(e["requests_running"]),
                _fmt(e["requests_waiting"]),
                _fmt(e["kv_cache_usage"], "pct"),
                _fmt(e["generation_tokens_per_s"]),
                _fmt(e["ttft_mean_s"], "s"),
                _fmt(e["prefix_cache_hit_rate"], "pct"),
                ",".join(e["models"][:3]) + ("..." if len(e["models"]) > 3 else ""),
            ]
        )
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(header))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    for e in doc["engines"]:
        if e["error"]:
            lines.append(f"! {e['name']}: {e['error']}")
    for h in doc.get("hosts", []):
        lines.append(f"host {h['name']}: {h['state']}" + (f" ({h['error']})" if h.get("error") else ""))
    return "\n".join(lines)


async def _sample(config: PoolConfig, samples: int, interval_s: float) -> PoolSample:
    """The bounded run, read through the pool-source contract: started, waited for, stopped."""
    from poolconsole.runtime.sampling import SampleSource

    source = SampleSource(config, samples, interval_s)
    source.start()
    try:
        return await source.finished()
    finally:
        await source.stop()


def run(args: argparse.Namespace) -> int:
    if args.samples < 1 or args.interval < 0:
        print("poolconsole status: --samples must be >= 1 and --interval >= 0", file=sys.stderr)
        return EXIT_CONFIG
    config = discovered(args.prometheus) if args.prometheus else load(args.config)
    if empty(config, args, "poll"):
        return EXIT_CONFIG
    taken = asyncio.run(_sample(config, args.samples, args.interval))
    doc = taken.to_json()
    if args.json:
        print(json.dumps(doc, indent=2, allow_nan=False, default=str))
    else:
        print(_table(doc))
    return EXIT_OK if taken.healthy else EXIT_PROBLEM
