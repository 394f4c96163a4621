"""The pool as a whole, for a person at a glance: a one-line verdict in words ("2 problems: ws48
unreachable (connection refused), spark swap in use" / "healthy: 8/8 engines up"), a few lines of totals,
and per target the short reason it needs attention (the overview's "why" column, and its attention-first
order). Pure: computed from the pool state and the alerts, drawn by the console, no Textual or Rich.

Unknown stays unknown: a total over targets of which some are not known says how many are missing
("n/a" when none is known), never counts them as 0."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from poolconsole.config.models import EngineKind
from poolconsole.model import gpu_health
from poolconsole.model.alerts import Alerts, severity
from poolconsole.model.failure_modes import MODES
from poolconsole.model.gateway import gateway_reports
from poolconsole.model.hosts import HostState
from poolconsole.model.pool_state import PoolState
from poolconsole.model.snapshots import EngineState
from poolconsole.model.tally import Tally, tally_of
from poolconsole.model.units import NA, num

CRITICAL = "critical"
WARNING = "warning"
SEVERITY = {
    "down": CRITICAL,
    "restart_loop": CRITICAL,
    "stalled": CRITICAL,
    "canary": CRITICAL,
    "slo_burn_page": CRITICAL,
    "swap": WARNING,
    "tps_collapse": WARNING,
}
"""Each alert rule's severity; a rule not named here is a warning (a GPU-health rule has model.alerts')."""


def _severity(rule: str) -> str:
    if rule in SEVERITY:
        return SEVERITY[rule]
    return CRITICAL if gpu_health.split(rule) is not None and severity(rule) == CRITICAL else WARNING


_BRIEF: tuple[tuple[str, str], ...] = (
    (r"refused by .*authenticat|authentication refused|HTTP 40[13]", "auth refused"),
    (r"host key of .* does not match", "host key changed"),
    (r"host key of .* is not in", "host key unknown"),
    (r"connection refused|refused", "connection refused"),
    (r"no answer|timed out|timeout", "timed out"),
    (r"connection .* lost", "connection lost"),
    (r"disconnected", "disconnected"),
    (r"does not resolve", "name does not resolve"),
    (r"HTTP (\d{3})", r"HTTP \1"),
)
BRIEF_MAX = 32
SHORT = {
    "connection refused": "refused",
    "connection lost": "conn lost",
    "name does not resolve": "no DNS",
    "host key changed": "key changed",
    "host key unknown": "key unknown",
    "no reason given": "no reason",
}
"""The row's "why" in a narrow column: what `brief` says, shorter still."""


_SOURCE = re.compile(r"(/[^\s:;(]*|[A-Za-z][\w.-]*): +")
"""What an error is said of, before its words: a path ("/metrics: ...") or a tool ("amd-smi: ...")."""


@functools.lru_cache(maxsize=4096)
def brief(error: str | None) -> str:
    """An error in a few words ("connection refused", "timed out", "HTTP 503", "body contains NUL bytes");
    the full text stays in the detail screen. The words name the problem, not only where it was seen: a
    path follows them ("page cut mid-line on /metrics"), a tool leads them ("rocm-smi: not found"), when
    that still fits in BRIEF_MAX. Cached: a target that keeps failing says the same words every poll, and
    the summary asks for them on every refresh (4.4 % of the console's samples at 1,000 engines)."""
    if not error:
        return "no reason given"
    for pattern, words in _BRIEF:
        found = re.search(pattern, error, re.IGNORECASE)
        if found:
            return found.expand(words)
    source, rest = None, error
    while (said := _SOURCE.match(rest)) and (source is None or said.group(1) == source):
        source, rest = said.group(1), rest[said.end() :]  # "amd-smi: amd-smi: ..." is said of amd-smi once
    if not rest.strip():  # nothing said after it
        source, rest = None, error
    first = re.split(r":\s|:$|;|\s\(", rest, maxsplit=1)[0].strip() or rest.strip()
    if source is not None:
        sourced = f"{first} on {source}" if source.startswith("/") else f"{source}: {first}"
        if len(sourced) <= BRIEF_MAX:
            return sourced
    return first if len(first) <= BRIEF_MAX else first[: BRIEF_MAX - 1] + "…"


def short(error: str | None) -> str:
    """An error in the fewest words ("refused", "timed out", "HTTP 503"): a row's "why"."""
    words = brief(error)
    return SHORT.get(words, words)


@dataclass(frozen=True)
class Problem:
    target: str
    """An engine or host name."""
    kind: str
    """'engine' or 'host'."""
    severity: str
    """CRITICAL or WARNING."""
    why: str
    """In a few words, for the row ("connection refused", "47 waiting", "swap in use")."""
    words: str
    """The target and why, for the verdict ("qwen3-next-80b queueing 47 (degrade to qwen3-30b-a3b)")."""


@dataclass(frozen=True)
class Summary:
    verdict: str
    healthy: bool
    problems: tuple[Problem, ...]
    lines: tuple[str, ...]
    """The totals, a few lines under the verdict."""
    generation_tokens_per_s: float | None
    """The sum of the rows' tok/s as they show it (each rounded as its cell): the column adds up."""
    prompt_tokens_per_s: float | None
    running: float | None
    waiting: float | None
    alerts_by_severity: dict[str, int]

    def why(self) -> dict[str, str]:
        """Target name -> its most severe reason (the row's "why")."""
        out: dict[str, str] = {}
        for p in self.problems:
            out.setdefault(p.target, p.why)
        return out

    def rank(self) -> dict[str, int]:
        """Target name -> 0 (something critical), 1 (a warning); targets that need nothing are absent."""
        out: dict[str, int] = {}
        for p in self.problems:
            out[p.target] = min(out.get(p.target, 2), 0 if p.severity == CRITICAL else 1)
        return out


def _alert_problem(state: PoolState, target: str, rule: str, message: str) -> tuple[str, str] | None:
    """(why, verdict words) of one firing alert, or None for rules the state already says (down)."""
    if rule == "down":
        return None
    engine = state.engines.get(target)
    view = engine.view if engine else None
    if rule == "queue":
        waiting = view.requests_waiting if view else None
        why = f"{num(waiting)} waiting"
        degrade = engine.config.degrade_to if engine else None
        return why, f"{target} queueing {num(waiting)}" + (f" (degrade to {degrade})" if degrade else "")
    if rule == "kv_full":
        kv = view.kv_cache_usage if view else None
        shown = NA if kv is None else f"{kv * 100:.0f}%"
        return f"KV {shown} full", f"{target} KV cache {shown} full"
    if rule == "swap":
        return "swap in use", f"{target} swap in use"
    if rule == "tps_collapse":
        return "tok/s fell", f"{target} tok/s collapsed"
    if rule == "restart_loop":
        return "restart loop", f"{target} in a restart loop"
    per_gpu = gpu_health.split(rule)
    if per_gpu is not None:  # "GPU2 Xid 31", "GPU2 throttled"
        base, index = per_gpu
        what = {"gpu_xid": "Xid", "gpu_ecc": "ECC", "gpu_throttle": "throttled", "gpu_pcie": "PCIe low"}[base]
        code = re.search(r"Xid (\d+)", message) if base == "gpu_xid" else None
        said = f"{what} {code.group(1)}" if code else what
        return f"GPU{index} {said}", f"{target} GPU {index} {message.split(': ', 1)[-1]}"
    if rule.startswith("vram_gpu"):
        found = re.search(r"(\d+)% used", message)
        share = f" {found.group(1)}%" if found else ""
        return f"GPU{rule[8:]}{share} mem", f"{target} GPU {rule[8:]} memory{share} used"
    return rule.replace("_", " "), f"{target} {rule.replace('_', ' ')}"


FINDING_SHORT = {
    "vllm_kv_cache_too_small": "KV too small",
    "vllm_no_cache_blocks": "no KV memory",
    "quantization_unsupported": "quant unsupported",
    "cuda_graph_capture": "graph capture",
    "nccl_error": "NCCL error",
    "sglang_mem_fraction": "mem pool full",
    "metal_out_of_memory": "Metal OOM",
    "llamacpp_buffer_alloc": "alloc failed",
    "ollama_system_memory": "RAM too small",
    "gb10_nv_err_no_memory": "GB10 OOM",
    "cuda_out_of_memory": "CUDA OOM",
}
"""A log finding in the row's narrow "why" column (its title is in the verdict)."""
_TITLES = {mode.id: mode.title for mode in MODES}


def _finding(rule: str, message: str) -> tuple[str, str]:
    """(short words, title) of a log finding's alert ("log:cuda_out_of_memory")."""
    mode = rule[4:]
    found = re.search(r"its log shows (.+?): ", message)
    title = _TITLES.get(mode) or (found.group(1) if found else mode.replace("_", " "))
    return FINDING_SHORT.get(mode, title if len(title) <= 16 else title[:15] + "…"), title


def _no_engine(models: list[str]) -> str:
    plural = len(models) > 1
    return f"gateway route{'s' if plural else ''} {', '.join(models)} ha{'ve' if plural else 's'} no engine"


def problems(state: PoolState, alerts: Alerts, tally: Tally | None = None) -> list[Problem]:
    """Every target that needs a person, the most severe first, one per target with its causes together:
    targets not answering (from their state, at once, with what their log showed), then the alerts that
    fire. An engine down with its host says so once, on the host; a gateway route it leaves with no engine
    is said with it. (A route no engine down explains, config drift, is counted on the gateway's line.) Only
    the targets not ok and the alerts are read, not the pool (the tally keeps which are not ok)."""
    tally = tally_of(state) if tally is None else tally
    out: list[Problem] = []
    logs: dict[str, list[tuple[str, str]]] = {}
    for (target, rule), event in alerts.active.items():
        if rule.startswith("log:"):
            logs.setdefault(target, []).append(_finding(rule, event.message))
    told: set[str] = set()  # targets whose log findings are in their down problem
    orphans: dict[str, list[str]] = {}  # a down engine -> the routes it leaves with no engine
    for _, model, engine in _routes(state, tally)[0]:  # those no engine down explains: counted on the gateway's line
        if engine is not None:
            orphans.setdefault(engine, []).append(model)
    down_hosts: dict[str, list[str]] = {}
    for name in tally.hosts_down():
        down_hosts[state.hosts[name].config.name] = []
    for engine_name in tally.engines_down():
        track = state.engines[engine_name]
        v = track.view
        if v is None or v.state is EngineState.OK:
            continue
        host = track.config.host or ""
        host_snap = state.hosts[host].snapshot if host in down_hosts else None
        if host_snap is not None and not host_snap.state.answering and not v.state.answering:
            down_hosts[host].append(track.config.name)
            out.append(Problem(v.name, "engine", CRITICAL, "host down", ""))
            continue
        severity = WARNING if v.state is EngineState.DEGRADED else CRITICAL
        found = logs.get(v.name, [])
        causes = "; ".join([brief(v.error)] + [f"its log: {title}" for _, title in found])
        words = f"{v.name} {v.state.value.replace('_', ' ')} ({causes})"
        if v.name in orphans:
            words += f", so {_no_engine(orphans.pop(v.name))}"
        told.add(v.name)
        out.append(Problem(v.name, "engine", severity, found[0][0] if found else short(v.error), words))
    for name, engines in down_hosts.items():
        snap = state.hosts[name].snapshot
        assert snap is not None
        severity = WARNING if snap.state is HostState.DEGRADED else CRITICAL
        why = short(snap.error)
        words = f"{name} {_state_words(state, name)} ({brief(snap.error)})"
        if engines:
            words += f", its engine{'s' if len(engines) > 1 else ''} {', '.join(engines)} down"
            routes = [model for engine in engines for model in orphans.pop(engine, [])]
            words += f", so {_no_engine(routes)}" if routes else ""
        out.append(Problem(name, "host", severity, why, words))
    for engine, routes in orphans.items():  # down, but not counted above (its view says so otherwise)
        out.append(Problem(engine, "engine", CRITICAL, "route orphaned", f"{engine} down, so {_no_engine(routes)}"))
    for (target, rule), event in alerts.active.items():
        if rule.startswith("log:"):
            if target not in told:
                why, title = _finding(rule, event.message)
                kind = "engine" if target in state.engines else "host"
                out.append(Problem(target, kind, WARNING, why, f"{target}'s log: {title}"))
            continue
        found_alert = _alert_problem(state, target, rule, event.message)
        if found_alert is not None:
            kind = "engine" if target in state.engines else "host"
            out.append(Problem(target, kind, _severity(rule), found_alert[0], found_alert[1]))
    rank = {CRITICAL: 0, WARNING: 1}
    return _one_per_target(sorted(out, key=lambda p: (rank[p.severity], p.kind != "host", p.target)))


def _one_per_target(found: list[Problem]) -> list[Problem]:
    """A target's problems as one, its most severe first, the others' causes after it ("x queueing 47;
    KV cache 97% full"); a problem said on another target (an engine down with its host) stays apart."""
    out: list[Problem] = []
    first: dict[str, int] = {}
    for p in found:
        at = first.get(p.target) if p.words else None
        if at is None:
            if p.words:
                first[p.target] = len(out)
            out.append(p)
            continue
        cause = p.words.removeprefix(f"{p.target}: ").removeprefix(f"{p.target}'s ").removeprefix(f"{p.target} ")
        out[at] = Problem(p.target, out[at].kind, out[at].severity, out[at].why, f"{out[at].words}; {cause}")
    return out


def _state_words(state: PoolState, host: str) -> str:
    snap = state.hosts[host].snapshot
    return snap.state.value.replace("_", " ") if snap else "polling"


def _unserved(state: PoolState) -> list[tuple[str, str, str | None]]:
    """(gateway, model, the down engine that served it or None) for each gateway route served by no engine."""
    out = []
    for report in gateway_reports(state):
        for route in report.routes:
            if route.engine is None and not route.unlisted:  # unlisted: an engine may serve it, unknown which
                out.append((report.gateway, route.model, served_before(state, route.model)))
    return out


def served_before(state: PoolState, model: str) -> str | None:
    """The engine not answering now that served `model` when last read (or is named for it)."""
    for track in state.engines.values():
        v = track.view
        if track.config.kind is EngineKind.LITELLM or v is None or v.state.answering:
            continue
        served = track.last_read.models if track.last_read is not None else ()
        if model in served or model in (track.config.name, track.config.model):
            return track.config.name
    return None


def _gateway(state: PoolState, unserved: list[tuple[str, str, str | None]]) -> str:
    """Each gateway's state, readiness and routes served by no engine; the name left out when the only
    gateway is called "gateway" (the line already says it)."""
    out = []
    gateways = [t for t in state.engines.values() if t.config.kind is EngineKind.LITELLM]
    for track in gateways:
        name = track.config.name
        label = "" if len(gateways) == 1 and name == "gateway" else f"{name} "
        v = track.view
        if v is None:
            out.append(f"{label}polling")
            continue
        readiness = v.details.get("readiness")
        ready = readiness.get("status") if isinstance(readiness, dict) else None
        words = v.state.value if v.state is EngineState.OK else f"{v.state.value} ({brief(v.error)})"
        words += f", {ready}" if ready and v.state.answering else ""
        missing = [model for gateway, model, _ in unserved if gateway == name]
        if missing:
            words += f", {len(missing)} route{'s' if len(missing) > 1 else ''} with no engine"
        out.append(f"{label}{words}")
    return "; ".join(out) if out else "none configured"


def _routes(state: PoolState, tally: Tally) -> tuple[list[tuple[str, str, str | None]], str]:
    """The gateways' routes served by no engine and the gateway line, made again only when what they read
    changed (an engine's models, whether it answers, a gateway's state): at 1,000 engines, not every tick."""
    if not tally.gateways:
        return [], "none configured"
    if tally.routes_changed or tally.routes is None:
        unserved = _unserved(state)
        tally.routes, tally.routes_changed = (unserved, _gateway(state, unserved)), False
    return tally.routes


def summarise(state: PoolState, alerts: Alerts, now: float | None = None) -> Summary:
    """The pool at a glance, now (default: the state's clock). Its totals are the tally's, kept from the
    targets that changed since the last call (model.tally); what is read afresh is what needs a person (the
    targets not ok, the alerts firing), not the pool."""
    now = state.clock() if now is None else now
    tally = tally_of(state)
    found = problems(state, alerts, tally)
    engines, polled, ok = len(state.engines), tally.polled, tally.ok
    hosts, hosts_polled, hosts_ok = len(state.hosts), tally.hosts_polled, tally.hosts_ok
    targets = {p.target for p in found if p.words}  # an engine down with its host is the host's problem
    if found:
        verdict = f"{len(targets)} problem{'s' if len(targets) > 1 else ''}: " + ", ".join(
            p.words for p in found if p.words
        )
    elif not engines and not hosts:  # "healthy: 0/0" said of a config with nothing in it
        verdict = "nothing to poll: the config has no [[engines]] and no [[hosts]]"
    elif polled < engines or hosts_polled < hosts:  # not "healthy" of what has not answered yet
        verdict = f"starting: {polled}/{engines} engines and {hosts_polled}/{hosts} hosts polled, none down so far"
    else:
        verdict = f"healthy: {ok}/{engines} engines up, {hosts_ok}/{hosts} hosts up"

    by_state: dict[str, list[str]] = {}
    for name in tally.engines_down():
        v = state.engines[name].view
        assert v is not None
        by_state.setdefault(v.state.value.replace("_", " "), []).append(f"{v.name} ({brief(v.error)})")
    line1 = f"engines {ok}/{engines} ok"
    for word, names in by_state.items():
        line1 += f" · {len(names)} {word}: {', '.join(names)}"
    if engines - polled:
        line1 += f" · {engines - polled} polling"
    down_hosts = []
    for name in tally.hosts_down():
        h = state.hosts[name].snapshot
        assert h is not None
        down_hosts.append(f"{h.name} {h.state.value.replace('_', ' ')} ({brief(h.error)})")
    line1 += f" · hosts {hosts_ok}/{hosts} ok" + (f": {', '.join(down_hosts)}" if down_hosts else "")

    line2 = (
        f"generation {tally.gen.text(' tok/s')} · prompt {tally.prompt.text(' tok/s')}"
        f" · running {tally.running.text()} · waiting {tally.waiting.text()}"
    )
    line3 = (
        f"VRAM dedicated {tally.memory_text('dedicated')} · unified {tally.memory_text('unified')}"
        f" · power {tally.power_text()}"
    )
    severities = {CRITICAL: 0, WARNING: 0}
    for _, rule in alerts.active:
        severities[_severity(rule)] = severities.get(_severity(rule), 0) + 1
    alert_words = (
        ", ".join(f"{n} {s}" for s, n in severities.items() if n) if any(severities.values()) else "none firing"
    )
    line4 = f"alerts {alert_words} · gateway {_routes(state, tally)[1]} · {tally.oldest_text(now)}"
    return Summary(
        verdict,
        not found and bool(engines or hosts),
        tuple(found),
        (line1, line2, line3, line4),
        tally.gen.value(),
        tally.prompt.value(),
        tally.running.value(),
        tally.waiting.value(),
        severities,
    )
