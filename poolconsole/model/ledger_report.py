"""The ledger as its clients show it: the `ledger --json` document (days, costs, decision, the gateway's
and the hosts' views) and the table `poolconsole ledger` prints."""

from __future__ import annotations

from typing import Any

from poolconsole.config.models import LedgerSettings
from poolconsole.model.ledger import GATEWAY_KINDS, Ledger, short, utc_date
from poolconsole.model.ledger_costs import costs, decide
from poolconsole.model.units import NA


def ledger_doc(
    ledger: Ledger, settings: LedgerSettings, *, start: float, end: float, store: str, config: str | None
) -> dict[str, Any]:
    """The whole `ledger --json` document."""
    days = ledger.days()
    unattributed = [
        {"date": date, "host": host, "energy_kwh": round(j / 3.6e6, 6)}
        for (date, host), j in sorted(ledger.unattributed_j.items())
    ]
    money = costs(days, settings, sum(j for j in ledger.unattributed_j.values()) / 3.6e6)
    entries = [d.to_json() for d in days]
    from poolconsole.model.gateway_ledger import compare

    gateway = ledger.gateways.entries()
    beside = compare(gateway, [e for e in entries if e["kind"] not in GATEWAY_KINDS])
    return {
        "store": store,
        "config": config,
        "from": utc_date(start),
        "to": utc_date(end),
        "entries": entries,
        "unattributed_energy": unattributed,
        "costs": money,
        "decision": decide(days, settings),
        "gateway": gateway,
        "gateway_unknown": ledger.gateways.unknown_entries(),
        "gateway_vs_engines": beside,
        "mismatches": [c for c in beside if c["mismatch"]],
        "callers_now": ledger.gateways.callers_now(),
        "hosts": ledger.hosts.entries(),
    }


def _cell(value: Any, kind: str = "") -> str:
    if value is None:
        return NA
    if kind == "tok":
        return short(value)
    if kind == "h":
        return f"{value:.0f}s" if value < 60 else f"{value / 60:.0f}m" if value < 3600 else f"{value / 3600:.1f}h"
    if kind == "s":
        return f"{value:.2f}s"
    if kind == "kwh":
        return f"{value * 1000:.1f} Wh" if value < 1 else f"{value:.2f} kWh"
    return str(value)


def text(doc: dict[str, Any]) -> str:
    """The table `poolconsole ledger` prints without --json."""
    header = ["DATE", "ENGINE", "PROMPT", "OUTPUT", "REQS", "BUSY", "IDLE", "TTFT p50", "p95", "ENERGY", "IDLE BURN"]
    rows = [header]
    for e in doc["entries"]:
        rows.append(
            [
                e["date"],
                e["engine"] + (" (gateway)" if e["kind"] in GATEWAY_KINDS else ""),
                _cell(e["prompt_tokens"], "tok"),
                _cell(e["output_tokens"], "tok"),
                _cell(e["requests"]),
                _cell(e["busy_s"], "h"),
                _cell(e["idle_s"], "h"),
                _cell(e["ttft_p50_s"], "s"),
                _cell(e["ttft_p95_s"], "s"),
                _cell(e["energy_kwh"], "kwh"),
                _cell(e["idle_energy_kwh"], "kwh"),
            ]
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    if not doc["entries"]:
        lines.append(f"no engine rows in {doc['store']} from {doc['from']} to {doc['to']}")
    c = doc["costs"]
    money = c["currency"] + " " if c["currency"] else ""
    lines.append("")
    lines.append(
        f"energy: {c['gpu_energy_kwh']:.3f} kWh of GPUs ({c['wall_energy_kwh']:.3f} kWh at the wall), "
        f"idle burn {c['idle_energy_kwh']:.3f} kWh"
    )
    for key, label in (
        ("value", "value produced (API-equivalent)"),
        ("energy_cost", "energy cost"),
        ("idle_cost", "idle burn cost"),
        ("depreciation_per_day", "depreciation per day"),
        ("net_per_day", "net per day"),
    ):
        shown = f"{money}{c[key]:.2f}" if c[key] is not None else f"{NA} ({c['unknown'].get(key, 'unknown')})"
        lines.append(f"{label}: {shown}")
    if c["payback_days"] is not None:
        lines.append(f"payback: {c['payback_days']:.0f} days")
    elif "payback_days" in c["unknown"]:
        lines.append(f"payback: {NA} ({c['unknown']['payback_days']})")
    lines.append(f"decision: {doc['decision']['reason']}")
    from poolconsole.model.gateway_ledger import text_lines

    lines += text_lines(doc)
    from poolconsole.model.host_ledger import text_lines as host_lines

    lines += host_lines(doc.get("hosts") or [], doc["to"])
    return "\n".join(lines)
