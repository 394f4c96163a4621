"""The exposure audit: for every engine and gateway, does it answer without a key (the models list, a
one-token completion, /metrics), is CORS open to any web page, is llama.cpp's /slots open (its entries
carry the prompts and outputs of live requests), is a LiteLLM gateway running without a master key, and
does it listen on every interface or a public address rather than loopback or the tailnet (`ss -ltn` on
its host over SSH).

Never destructive: it sends a models list, a one-token completion (`--no-completion` skips it), and GETs
of /metrics and /slots, all without a key; the configured key is used only for a models list, when the
key-less one was not served: to learn a model name for the completion, and to tell a refusal answered with
an unusual status (LiteLLM without its database package says 500) from a failure. Response bodies are never
shown, logged or stored: only status codes, headers the checks need, model names and the number of /slots
entries are kept.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import httpx

from poolconsole.collect.auth import auth_headers
from poolconsole.collect.engines.kinds import Capability, adapter
from poolconsole.collect.ssh import SSHPool
from poolconsole.config.models import Engine, PoolConfig
from poolconsole.model.exposure import EngineExposure, Finding
from poolconsole.ops.listening import Listener, Reach, engine_port, reach, read_listeners
from poolconsole.ops.smoke.stream import failed_request

PROBE_ORIGIN = "https://exposure-probe.poolconsole.invalid"


def listen_findings(engine: Engine, listeners: list[Listener]) -> list[Finding]:
    findings: list[Finding] = []
    for sock in listeners:
        scope = sock.scope()
        via = f" (by {sock.process})" if sock.process else ""
        container = sock.process in ("docker-proxy", "rootlessport", "conmon", "pasta", "slirp4netns")
        bind = (
            f"publish the port on 127.0.0.1 or the tailnet address only (-p 127.0.0.1:{sock.port}:{sock.port})"
            if container
            else f"bind it with {adapter(engine.kind).bind_fix.format(port=sock.port)}"
        )
        if scope == "all":
            findings.append(
                Finding(
                    "listen_all_interfaces",
                    f"listens on {sock.text()}{via}: every interface, so every network the host is on reaches it",
                    f"{bind}, and reach it over the tailnet or through the gateway; or firewall port {sock.port}",
                    True,
                )
            )
        elif scope == "public":
            findings.append(
                Finding(
                    "listen_public",
                    f"listens on the public address {sock.text()}{via}",
                    f"{bind}, or firewall port {sock.port} from the internet",
                    True,
                )
            )
        elif scope == "lan":
            findings.append(
                Finding(
                    "listen_lan",
                    f"listens on the LAN address {sock.text()}{via}: everyone on that network reaches it",
                    f"{bind} if the LAN is not trusted",
                    False,
                )
            )
    return findings


@dataclass
class Probe:
    """What the key-less requests answered (status codes; never a body)."""

    models_status: int | None = None
    models: tuple[str, ...] = ()
    keyed_models_status: int | None = None
    """The models list with the configured key, asked only when the key-less one was not served."""
    cors: str | None = None
    completion_status: int | None = None
    metrics_status: int | None = None
    slots_status: int | None = None
    slots_entries: int | None = None
    errors: tuple[str, ...] = ()


def _names(response: httpx.Response) -> tuple[str, ...]:
    try:
        doc = response.json()
    except ValueError:
        return ()
    data = doc.get("data") if isinstance(doc, dict) else None
    if not isinstance(data, list):
        return ()
    return tuple(str(e["id"]) for e in data if isinstance(e, dict) and "id" in e)[:50]


async def probe(client: httpx.AsyncClient, engine: Engine, completion: bool) -> Probe:
    base = engine.url
    errors: list[str] = []
    result = Probe()
    waited = client.timeout.read  # the words of a timed-out probe: "no answer within N s"
    try:
        listed = await client.get(base + "/v1/models", headers={"Origin": PROBE_ORIGIN})
        result.models_status = listed.status_code
        result.cors = listed.headers.get("access-control-allow-origin")
        if listed.status_code == 200:
            result.models = _names(listed)
    except httpx.HTTPError as exc:
        errors.append(failed_request(base + "/v1/models", exc, waited))
        result.errors = tuple(errors)
        return result  # the engine does not answer: nothing else to learn
    model = result.models[0] if result.models else None
    if model is None and result.models_status != 200 and auth_headers(engine):
        try:  # the configured key only learns a model name and tells a refusal from a failure; nothing else
            keyed = await client.get(base + "/v1/models", headers=auth_headers(engine))
            result.keyed_models_status = keyed.status_code
            names = _names(keyed) if keyed.status_code == 200 else ()
            model = names[0] if names else None
        except httpx.HTTPError:
            pass
    if completion:
        body = {"model": model or "poolconsole-exposure-probe", "prompt": "Hi", "max_tokens": 1, "temperature": 0}
        try:
            answer = await client.post(base + "/v1/completions", json=body)
            result.completion_status = answer.status_code
        except httpx.HTTPError as exc:
            errors.append(failed_request(base + "/v1/completions", exc, waited))
    kind = adapter(engine.kind)
    if kind.probes_metrics:
        try:
            result.metrics_status = (await client.get(base + "/metrics")).status_code
        except httpx.HTTPError as exc:
            errors.append(failed_request(base + "/metrics", exc, waited))
    if Capability.SLOTS in kind.capabilities:
        try:
            slots = await client.get(base + "/slots")
            result.slots_status = slots.status_code
            if slots.status_code == 200:
                try:
                    doc = slots.json()  # counted, then dropped: entries carry callers' prompts and outputs
                    result.slots_entries = len(doc) if isinstance(doc, list) else None
                    del doc
                except ValueError:
                    result.slots_entries = None
        except httpx.HTTPError as exc:
            errors.append(failed_request(base + "/slots", exc, waited))
    result.errors = tuple(errors)
    return result


def _verdict(status: int | None) -> bool | None:
    """Did a key-less request get served (True), refused for want of a key (False), or can't tell (None)?"""
    if status is None:
        return None
    if 200 <= status < 300:
        return True
    if status in (401, 403):
        return False
    return None


def _llamacpp_models(got: Probe, unchecked: list[str]) -> bool | None:
    """A key-less /v1/models answer from llama.cpp: some builds list their models to anyone even with
    --api-key (it was among their public endpoints), so the key-guarded /metrics and /slots tell: served
    without a key, there is none; refused (401/403), there is one; neither, only the completion tells."""
    guarded = [_verdict(s) for s in (got.metrics_status, got.slots_status)]
    if True in guarded:
        return True
    if False in guarded:
        return False
    if got.completion_status is None:
        unchecked.append(
            "whether it requires a key: its /v1/models answers without one, which some llama.cpp builds do "
            "with --api-key too, and neither /metrics nor /slots tells; the one-token completion would"
        )
    return None


def _cors_finding(cors: str, at: Reach, unauthenticated: bool | None) -> Finding:
    """Open CORS lets a web page drive a browser that reaches the engine: only a browser on the host itself
    when it listens on loopback only (contained), a tailnet peer's browser when on the tailnet (the page's
    author is not on the tailnet, so key-less that is exposed)."""
    who = "any web page opened in a browser on its host" if at.local else "any web page a pool user opens"
    if at.contained and not at.local:
        why = (
            " (listening on the tailnet only does not stop it: the browser is on the tailnet)"
            if unauthenticated
            else ""
        )
    else:
        why = at.where
    return Finding(
        "cors_open",
        f"CORS is open (Access-Control-Allow-Origin: {cors}): {who} can call it from the browser"
        + (" without a key" if unauthenticated else "")
        + why,
        "allow only the origins that need it (vLLM --allowed-origins, LiteLLM's CORS settings; llama-server "
        "allows every origin: keep its key on and its address private), or strip the header at a proxy",
        bool(unauthenticated) and not at.local,
    )


def _slots_finding(entries: int | None, at: Reach) -> Finding:
    """/slots carries the prompts and outputs of every caller's live requests: contained only when nobody
    but the host's own users and processes reaches it (loopback only); any tailnet peer reading the others'
    prompts is a leak."""
    count = f"{entries} slot(s)" if entries is not None else "its slots"
    where = (
        " (it listens on the tailnet: any tailnet peer can read them)" if at.contained and not at.local else at.where
    )
    return Finding(
        "slots_open",
        f"llama.cpp's /slots answers without a key ({count}){where}: its entries carry the prompts and generated "
        "text of live requests, so it leaks callers' data (poolconsole never reads that text)",
        "start llama-server with --no-slots, or with --api-key so /slots needs the key too",
        not at.local,
    )


def judge(engine: Engine, got: Probe, listeners: list[Listener] | None, listen_why: str | None) -> EngineExposure:
    """The findings from what the probes answered and where the engine listens."""
    findings: list[Finding] = []
    unchecked = list(got.errors)
    if listen_why:
        unchecked.append(listen_why)
    mine = [s for s in listeners if s.port == engine_port(engine)] if listeners is not None else None
    if mine is not None and not mine:
        unchecked.append(
            f"nothing listens on port {engine_port(engine)} on its host as `ss` sees it (another network namespace?)"
        )
    at = reach(mine)
    contained, where = at.contained, at.where
    models_open = _verdict(got.models_status)
    if models_open is None and got.models_status is not None and got.keyed_models_status == 200:
        # refused without the key, served with it: a refusal, whatever its status (LiteLLM without its
        # database package answers a key-less caller with HTTP 500 rather than 401)
        models_open = False
    kind = adapter(engine.kind)
    if kind.models_public_with_key and models_open:
        models_open = _llamacpp_models(got, unchecked)
    completion_open = _verdict(got.completion_status)
    gateway = kind.is_gateway
    unauthenticated = completion_open if completion_open is not None else models_open
    key_fix = kind.key_fix
    if completion_open:
        who = "the gateway accepts a caller without a key" if gateway else "it generates for a caller without a key"
        findings.append(
            Finding(
                "completion_without_key",
                f"{who}: a one-token completion answered HTTP {got.completion_status}{where}",
                key_fix,
                not contained,
            )
        )
    if models_open:
        exposed_list = not contained and completion_open is not False
        findings.append(
            Finding(
                "models_without_key",
                f"/v1/models answers without a key (HTTP {got.models_status}, {len(got.models)} model(s)){where}",
                key_fix,
                exposed_list,
            )
        )
    if gateway and models_open:
        findings.append(
            Finding(
                "litellm_master_key",
                f"no master key is set: LiteLLM without general_settings.master_key lets every caller in{where}",
                key_fix,
                not contained,
            )
        )
    if got.cors in ("*", PROBE_ORIGIN):
        findings.append(_cors_finding(got.cors, at, unauthenticated))
    if got.metrics_status == 200:
        findings.append(
            Finding(
                "metrics_without_key",
                f"/metrics answers without a key{where}: load, models and request counts for anyone who reaches it",
                "let only the Prometheus scraper reach it: bind the engine to loopback or the tailnet, or serve "
                "/metrics through a proxy with auth",
                False,
            )
        )
    if got.slots_status == 200:
        findings.append(_slots_finding(got.slots_entries, at))
    if mine:
        findings += listen_findings(engine, mine)
    return EngineExposure(
        engine.name,
        str(engine.kind),
        engine.url,
        unauthenticated,
        tuple(s.text() for s in mine) if mine is not None else None,
        tuple(findings),
        tuple(unchecked),
    )


async def audit(config: PoolConfig, completion: bool = True) -> list[EngineExposure]:
    """Every engine and gateway of the config, in its order."""
    hosts = {e.host for e in config.engines if e.host}
    known = [h for h in config.hosts if h.name in hosts]
    pool = SSHPool(known, config.settings.ssh_timeout_s, config.settings.ssh_concurrency)
    timeout = httpx.Timeout(config.settings.http_timeout_s)
    try:
        async with httpx.AsyncClient(timeout=timeout, trust_env=False) as client:
            reads = await asyncio.gather(*(read_listeners(pool, h) for h in known))
            by_host = dict(zip((h.name for h in known), reads, strict=True))
            probes = await asyncio.gather(*(probe(client, e, completion) for e in config.engines))
    finally:
        await pool.close()
    out: list[EngineExposure] = []
    for engine, got in zip(config.engines, probes, strict=True):
        listeners, why = by_host.get(engine.host or "", (None, None))
        if engine.host is None:
            why = "listening addresses not read: the engine names no host"
        elif engine.host not in by_host:
            why = f"listening addresses not read: host {engine.host} has no [[hosts]] entry"
        out.append(judge(engine, got, listeners, why))
    return out


def not_checked(results: list[EngineExposure]) -> list[str]:
    """The engines the audit could not check (unreachable, no answer to the key probe): not 'ok'."""
    return [r.name for r in results if r.verdict == "not checked"]


def summary(results: list[EngineExposure]) -> str:
    """The audit's verdict in one line, as `exposure` prints it and the exposure screen heads it. 'nothing
    exposed (8 checked)' had been said of eight engines none of which could be reached."""
    exposed = [r.name for r in results if r.exposed]
    unchecked = not_checked(results)
    head = f"EXPOSED: {', '.join(exposed)} ({len(exposed)} of {len(results)})" if exposed else ""
    if unchecked:
        missed = f"NOT CHECKED: {', '.join(unchecked)} ({len(unchecked)} of {len(results)} could not be reached)"
        return f"{head}; {missed}" if head else missed
    return head or f"nothing exposed ({len(results)} checked)"


def exit_code(results: list[EngineExposure]) -> int:
    """0 only when every engine was checked and none is exposed; 1 when one is exposed or any could not be
    checked (a cron job must notice an audit that saw nothing)."""
    return 1 if any(r.exposed for r in results) or not_checked(results) else 0


def document(results: list[EngineExposure], completion: bool) -> dict[str, Any]:
    return {
        "exposed": any(r.exposed for r in results),
        "not_checked": not_checked(results),
        "completion_probe": completion,
        "engines": [r.to_json() for r in results],
    }


def text_lines(results: list[EngineExposure]) -> list[str]:
    """The audit as `exposure` prints it: each engine's verdict, its findings with their fixes, what was not
    checked, and the summary."""
    lines = []
    for r in results:
        state = {True: "answers without a key", False: "requires a key", None: "key not checked"}[r.unauthenticated]
        listen = ", ".join(r.listen) if r.listen else "listen n/a"
        lines.append(f"{r.verdict:11s} {r.name} ({r.kind}, {r.url}): {state}; {listen}")
        for f in r.findings:
            lines.append(f"  {'!!' if f.exposed else '--'} {f.found}\n     fix: {f.fix}")
        for why in r.unchecked:
            lines.append(f"  ?? {why}")
    lines.append(summary(results))
    return lines
