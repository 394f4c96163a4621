"""The gateway's side of the ledger: per UTC day, gateway, route (LiteLLM model group) and caller key, the
requests and tokens the gateway itself counted; the same beside the engines the routes reach, with a
mismatch flagged (traffic that bypassed the gateway); and who calls the pool now (requests per minute and
mean concurrency per caller, the rate limits in use, who is saturating it).

Pure, like poolconsole.model.ledger: it reads the gateway's stored rows, whose `details.gateway_usage` holds
the running counters its Prometheus page had at the poll (poolconsole.collect.engines.litellm_usage).
Counting follows the engines' rule: each row adds every series' growth since the gateway's previous stored
reading (a series lower than before is a gateway restart: its new value counts); the gateway's first
reading counts nothing; a series that first shows up after it counts from 0 (LiteLLM creates a series at
its first request). A caller is its key's alias or a 12-digit prefix of the key's hash, never the key.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from poolconsole.model.ledger import MAX_GAP_S, StoredRow, growth, short, utc_date
from poolconsole.model.ledger import _number as number
from poolconsole.model.ledger import _tree as tree
from poolconsole.model.units import NA

COUNTERS = ("requests", "failed_requests", "prompt_tokens", "output_tokens", "latency_s")
NOW_WINDOW_S = 60.0
"""Requests per minute and concurrency "now" are measured over the gateway's rows of the last minute."""
MISMATCH_SHARE = 0.02
MISMATCH_MIN_TOKENS = 50
"""Engine and gateway output tokens of a day differ by more than this share (and this many tokens) before it
is called a mismatch: the engine and the gateway are polled at different instants, so a day's edge can
split a few requests between two days."""
SATURATED_SHARE = 0.9
"""A caller using this share of its requests-per-minute limit is at its limit."""


@dataclass
class _Day:
    key: str | None = None
    models: dict[str, None] = field(default_factory=dict)
    counters: dict[str, float] = field(default_factory=lambda: dict.fromkeys(COUNTERS, 0.0))


@dataclass
class _Gateway:
    read: bool = False
    """A usage reading was seen: a series absent from it and present later counts from 0."""
    raw: dict[tuple[str, str, str], float] = field(default_factory=dict)
    at: float | None = None
    recent: list[tuple[float, dict[str, tuple[float, float]]]] = field(default_factory=list)
    """(at, caller -> (requests incl. failed, request seconds)) of the last minute's rows."""
    keys: dict[str, str | None] = field(default_factory=dict)
    limits: list[dict[str, Any]] = field(default_factory=list)
    in_flight: float | None = None


class GatewayLedger:
    """Fed every stored row in time order by the Ledger; `start <= at < end` rows count."""

    def __init__(self, start: float, end: float) -> None:
        self.start, self.end = start, end
        self._days: dict[tuple[str, str, str, str], _Day] = {}
        self._gateways: dict[str, _Gateway] = {}
        self.unknown: dict[tuple[str, str], str] = {}
        """(date, gateway) -> why its accounting is missing that day."""
        self._waiting: dict[str, tuple[float, float]] = {}
        """engine -> (at, requests waiting) of its latest row."""

    def engine(self, row: StoredRow) -> None:
        waiting = number(row.values.get("requests_waiting"))
        if waiting is not None:
            self._waiting[row.name] = (row.at, waiting)

    def gateway(self, row: StoredRow) -> None:
        v = row.values
        details = tree(v, "details")
        usage = tree(details, "gateway_usage")
        callers = usage.get("callers")
        gw = self._gateways.setdefault(row.name, _Gateway())
        counting = self.start <= row.at < self.end
        date = utc_date(row.at)
        if not isinstance(callers, list):
            if counting and v.get("state") in ("ok", "degraded"):
                why = details.get("gateway_usage_unknown") or "no per-caller counters in this row"
                self.unknown.setdefault((date, row.name), str(why))
            return
        now: dict[str, tuple[float, float]] = {}
        for c in callers:
            if not isinstance(c, dict):
                continue
            route, caller = str(c.get("route")), str(c.get("caller"))
            day = self._days.get((date, row.name, route, caller)) if counting else None
            if counting and day is None:
                day = self._days[(date, row.name, route, caller)] = _Day()
            values: dict[str, float] = {}
            for name in COUNTERS:
                raw = number(c.get(name))
                if raw is None:
                    continue
                key = (route, caller, name)
                grew = growth(raw, gw.raw.get(key, 0.0 if gw.read else None), None)
                gw.raw[key] = values[name] = raw
                if day is not None:
                    day.counters[name] += grew
            if day is not None:
                day.key = c.get("key") if isinstance(c.get("key"), str) else day.key
                for model in c.get("models") or ():
                    day.models[str(model)] = None
            gw.keys[caller] = c.get("key") if isinstance(c.get("key"), str) else None
            requests, seconds = now.get(caller, (0.0, 0.0))
            now[caller] = (
                requests + values.get("requests", 0.0) + values.get("failed_requests", 0.0),
                seconds + values.get("latency_s", 0.0),
            )
        gw.read = True
        gw.at = row.at
        gw.recent = [r for r in gw.recent if r[0] >= row.at - NOW_WINDOW_S] + [(row.at, now)]
        limits = usage.get("limits")
        gw.limits = [x for x in limits if isinstance(x, dict)] if isinstance(limits, list) else []
        gw.in_flight = number(usage.get("in_flight"))

    # -- the document ------------------------------------------------------------------------------------
    def entries(self) -> list[dict[str, Any]]:
        """One per date, gateway, route and caller, in that order."""
        out = []
        for (date, gateway, route, caller), day in sorted(self._days.items()):
            c = day.counters
            out.append(
                {
                    "date": date,
                    "gateway": gateway,
                    "route": route,
                    "caller": caller,
                    "key": day.key,
                    "models": list(day.models),
                    "requests": round(c["requests"]),
                    "failed_requests": round(c["failed_requests"]),
                    "prompt_tokens": round(c["prompt_tokens"]),
                    "output_tokens": round(c["output_tokens"]),
                    "request_s": round(c["latency_s"], 3),
                }
            )
        return out

    def unknown_entries(self) -> list[dict[str, str]]:
        return [{"date": d, "gateway": g, "reason": why} for (d, g), why in sorted(self.unknown.items())]

    def callers_now(self) -> dict[str, Any]:
        """Requests per minute and mean concurrency (request seconds per second) per caller over the last
        minute of each gateway's rows, the rate-limit windows the gateway reports, and who saturates."""
        callers: list[dict[str, Any]] = []
        fresh = [(n, g) for n, g in self._gateways.items() if g.at is not None and 0 <= self.end - g.at <= MAX_GAP_S]
        measured_s: float | None = None
        for name, gw in sorted(fresh):
            if len(gw.recent) < 2:
                continue
            (first_at, first), (last_at, last) = gw.recent[0], gw.recent[-1]
            span = last_at - first_at
            if span <= 0:
                continue
            measured_s = span if measured_s is None else min(measured_s, span)
            limits: dict[str, dict[str, Any]] = {}
            for entry in gw.limits:
                limits.setdefault(str(entry.get("caller")), {})[str(entry.get("type"))] = entry
            rows = []
            for caller, (requests, seconds) in last.items():
                r0, s0 = first.get(caller, (0.0, 0.0))
                d_req = requests - r0 if requests >= r0 else requests  # lower: the gateway restarted
                d_sec = seconds - s0 if seconds >= s0 else seconds
                req_limit = limits.get(caller, {}).get("requests", {})
                tok_limit = limits.get(caller, {}).get("tokens", {})
                rows.append(
                    {
                        "gateway": name,
                        "caller": caller,
                        "key": gw.keys.get(caller),
                        "rpm": round(d_req / span * 60, 2),
                        "concurrency": round(d_sec / span, 3),
                        "share": None,
                        "rpm_used": req_limit.get("used"),
                        "rpm_limit": req_limit.get("limit"),
                        "tpm_used": tok_limit.get("used"),
                        "tpm_limit": tok_limit.get("limit"),
                        "window_s": round(span, 1),
                    }
                )
            total = sum(r["rpm"] for r in rows)
            for r in rows:
                r["share"] = round(r["rpm"] / total, 3) if total > 0 else None
            callers += sorted(rows, key=lambda r: (-r["concurrency"], -r["rpm"], r["caller"]))
        waiting = sum(w for at, w in self._waiting.values() if 0 <= self.end - at <= MAX_GAP_S)
        in_flight = [g.in_flight for _, g in fresh if g.in_flight is not None]
        return {
            "callers": callers,
            "engines_waiting": waiting if self._waiting else None,
            "gateway_in_flight": sum(in_flight) if in_flight else None,
            **_saturation(callers, waiting, measured_s, bool(fresh)),
        }


def _saturation(callers: list[dict[str, Any]], waiting: float, span: float | None, fresh: bool) -> dict[str, Any]:
    if not fresh:
        return {"saturating": None, "reason": f"no gateway row in the last {MAX_GAP_S / 60:.0f} minutes"}
    if span is None:
        return {"saturating": None, "reason": "one gateway row so far: rates need two"}
    busy = [c for c in callers if c["rpm"] > 0 or c["concurrency"] > 0]
    at_limit = [
        f"{c['caller']} at {c['rpm_used']:.0f} of its {c['rpm_limit']:.0f} requests/min limit"
        for c in callers
        if c["rpm_used"] is not None and c["rpm_limit"] and c["rpm_used"] >= SATURATED_SHARE * c["rpm_limit"]
    ]
    limits = ("; " + "; ".join(at_limit)) if at_limit else ""
    if not busy:
        return {"saturating": None, "reason": f"no requests through the gateway in the last {span:.0f} s{limits}"}
    top = busy[0]
    share = f"{top['share']:.0%} of {top['gateway']}'s requests" if top["share"] is not None else "its requests"
    said = (
        f"{top['caller']}: {share} in the last {top['window_s']:.0f} s ({top['rpm']:.1f}/min, "
        f"{top['concurrency']:.2f} concurrent on average)"
    )
    if waiting > 0:
        return {
            "saturating": top["caller"],
            "reason": f"{said} while the engines queue {waiting:.0f}: it is saturating the pool{limits}",
        }
    return {"saturating": None, "reason": f"{said}; no engine queues: nobody is saturating the pool{limits}"}


# -- gateway beside engines ---------------------------------------------------------------------------------
def compare(gateway: list[dict[str, Any]], engines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per date and the engines a day's routes reach (a route reaches the engines whose served models that
    day include the route's name or a model the gateway says served it): the engines' tokens and requests
    beside the gateway's, with `mismatch` and the words for it."""
    served: dict[str, dict[str, set[str]]] = {}
    for e in engines:
        served.setdefault(e["date"], {})[e["engine"]] = set(e.get("models") or ())
    groups: dict[tuple[str, tuple[str, ...]], dict[str, Any]] = {}
    unmatched: dict[tuple[str, str], dict[str, Any]] = {}
    for g in gateway:
        names = {g["route"], *g.get("models", ())}
        reached = tuple(sorted(e for e, models in served.get(g["date"], {}).items() if models & names))
        if not reached:
            entry = unmatched.setdefault((g["date"], g["route"]), {"date": g["date"], "route": g["route"]})
            entry["output_tokens"] = entry.get("output_tokens", 0) + g["output_tokens"]
            continue
        group = groups.setdefault(
            (g["date"], reached),
            {
                "gateways": set(),
                "routes": set(),
                "gateway_requests": 0,
                "gateway_prompt_tokens": 0,
                "gateway_output_tokens": 0,
            },
        )
        group["gateways"].add(g["gateway"])
        group["routes"].add(g["route"])
        group["gateway_requests"] += g["requests"]
        group["gateway_prompt_tokens"] += g["prompt_tokens"]
        group["gateway_output_tokens"] += g["output_tokens"]
    by_key = {(e["date"], e["engine"]): e for e in engines}
    out = []
    for (date, reached), group in sorted(groups.items()):
        rows = [by_key[(date, name)] for name in reached]

        def total(key: str, rows: list[dict[str, Any]] = rows) -> int | None:
            values = [r.get(key) for r in rows]
            known = [int(v) for v in values if v is not None]
            return sum(known) if len(known) == len(values) else None

        engine_out = total("output_tokens")
        gw_out = group["gateway_output_tokens"]
        per_request = gw_out / group["gateway_requests"] if group["gateway_requests"] else 0.0
        # The gateway counts a request's tokens when it finishes, the engine as they come: the requests running
        # at the day's last poll are ahead on the engine, those running at its first on the gateway (the demo's
        # consistent pool had read as 6 mismatches after two minutes). Allowed: that many requests' worth.
        ahead_engine = sum(r.get("running_at_end") or 0 for r in rows) * per_request
        ahead_gateway = sum(r.get("running_at_start") or 0 for r in rows) * per_request
        label = "+".join(reached)
        doc: dict[str, Any] = {
            "date": date,
            "engine": label,
            "engines": list(reached),
            "gateways": sorted(group["gateways"]),
            "routes": sorted(group["routes"]),
            "engine_requests": total("requests"),
            "gateway_requests": group["gateway_requests"],
            "engine_prompt_tokens": total("prompt_tokens"),
            "gateway_prompt_tokens": group["gateway_prompt_tokens"],
            "engine_output_tokens": engine_out,
            "gateway_output_tokens": gw_out,
            "bypassed_output_tokens": None,
            "mismatch": False,
            "reason": None,
        }
        if engine_out is None:
            doc["reason"] = f"{label}: the engine's output tokens are unknown that day: nothing to compare"
        else:
            diff = engine_out - gw_out
            tolerance = max(MISMATCH_MIN_TOKENS, MISMATCH_SHARE * engine_out)
            if diff > tolerance + ahead_engine:
                doc.update(
                    bypassed_output_tokens=diff,
                    mismatch=True,
                    reason=f"{label}: engine {short(engine_out)} output tokens, gateway {short(gw_out)}: "
                    f"{short(diff)} bypassed the gateway",
                )
            elif -diff > tolerance + ahead_gateway:
                doc.update(
                    mismatch=True,
                    reason=f"{label}: gateway {short(gw_out)} output tokens, engine only {short(engine_out)}: "
                    "the engine's counters missed polls, or the routes also reach engines outside the pool",
                )
            else:
                edge = abs(diff) > tolerance  # within what the requests in flight at an edge explain
                doc["bypassed_output_tokens"] = 0 if edge else max(0, diff)
                doc["reason"] = f"{label}: engine {short(engine_out)} output tokens, gateway {short(gw_out)}: " + (
                    "they agree but for the requests in flight at the window's edge" if edge else "they agree"
                )
        out.append(doc)
    for (date, route), entry in sorted(unmatched.items()):
        out.append(
            {
                "date": date,
                "engine": None,
                "engines": [],
                "routes": [route],
                "gateway_output_tokens": entry["output_tokens"],
                "mismatch": False,
                "reason": f"route {route}: no engine in the store served a model of that name that day",
            }
        )
    return out


# -- text ----------------------------------------------------------------------------------------------
def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]


def text_lines(doc: dict[str, Any]) -> list[str]:
    """The gateway part of `poolconsole ledger` without --json (nothing without a gateway)."""
    lines: list[str] = []
    gateway = doc.get("gateway") or []
    if gateway:
        rows = [["DATE", "GATEWAY", "ROUTE", "CALLER", "REQS", "FAILED", "PROMPT", "OUTPUT"]]
        for g in gateway:
            rows.append(
                [
                    g["date"],
                    g["gateway"],
                    g["route"],
                    g["caller"],
                    str(g["requests"]),
                    str(g["failed_requests"]),
                    short(g["prompt_tokens"]),
                    short(g["output_tokens"]),
                ]
            )
        lines += ["", *_table(rows)]
    for u in doc.get("gateway_unknown") or []:
        lines.append(f"{u['date']} {u['gateway']}: no gateway accounting ({u['reason']})")
    beside = doc.get("gateway_vs_engines") or []
    if beside:
        lines.append("")
        lines += [f"{c['date']} {'MISMATCH ' if c['mismatch'] else ''}{c['reason']}" for c in beside]
    now = doc.get("callers_now") or {}
    if gateway or now.get("callers"):
        lines.append("")
        if now.get("callers"):
            rows = [["CALLER NOW", "GATEWAY", "REQ/MIN", "CONCURRENT", "SHARE", "RPM LIMIT (USED)"]]
            for c in now["callers"]:
                limit = (
                    f"{c['rpm_limit']:.0f} ({c['rpm_used']:.0f})"
                    if c["rpm_limit"] is not None and c["rpm_used"] is not None
                    else NA
                )
                share = f"{c['share']:.0%}" if c["share"] is not None else NA
                rows.append([c["caller"], c["gateway"], f"{c['rpm']:.1f}", f"{c['concurrency']:.2f}", share, limit])
            lines += _table(rows)
        lines.append(f"now: {now.get('reason', 'n/a')}")
    return lines
