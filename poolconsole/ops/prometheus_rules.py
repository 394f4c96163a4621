"""`poolconsole prometheus-rules`: the watcher's pager rules as a Prometheus rule file (issue 37), over the
engines' native metrics as `poolconsole prometheus-config` scrapes them (each target labelled `engine` and,
where hosts.toml says, `host`; the hosts' node_exporter targets labelled `host`), with the thresholds of
`[alerts]`. A team on Prometheus and Alertmanager then pages the same way without a watcher: the same
alertnames, severities and labels as `poolconsole watch` sends.

- down: a scrape target of an engine or host that does not answer (`up == 0`) for `down_for_s`.
- stalled: per engine kind, requests running or waiting and no generation or prompt token counted for
  `stall_s`.
- gpu_xid, gpu_ecc: where hosts are configured, over the DCGM exporter's Xid and ECC fields.
- slo_burn: per `[[slo]]`, recording rules of the share of requests over its TTFT bound in 5 min, 30 min, 1 h
  and 6 h, and the multi-window burn-rate alerts over them (critical and warning)."""

from __future__ import annotations

import json

from poolconsole.collect.engines.kinds import adapters
from poolconsole.collect.engines.kinds.base import StallSeries
from poolconsole.config.models import EngineKind, PoolConfig


def stall_series() -> dict[EngineKind, StallSeries]:
    """kind -> what the stalled rule reads of it (its adapter's stall_series): requests running and waiting,
    a counter of generation progress, and the prompt tokens counter, which counts as progress too (a long
    prefill is not a wedge)."""
    return {a.kind: a.stall_series for a in adapters() if a.stall_series is not None}


def ttft_histograms() -> dict[EngineKind, str]:
    """kind -> the TTFT histogram slo_burn reads (its adapter's; llama.cpp exposes none)."""
    return {a.kind: a.ttft_histogram for a in adapters() if a.ttft_histogram is not None}


def _duration(seconds: float) -> str:
    return f"{max(0, round(seconds))}s"


def _rule(alert: str, expr: str, for_s: float, severity: str, summary: str, labels: str = "") -> list[str]:
    return [
        f"      - alert: {alert}",
        f"        expr: {json.dumps(expr)}",
        f"        for: {_duration(for_s)}",
        f"        labels: {{severity: {severity}{labels}}}",
        f"        annotations: {{summary: {json.dumps(summary)}}}",
    ]


def render(config: PoolConfig) -> str:
    """The rule file's YAML (JSON-quoted expressions and summaries: valid YAML, no escaping left to chance)."""
    a = config.alerts
    lines = [
        "# poolconsole prometheus-rules: the pager rules of `poolconsole watch` for a Prometheus scraping the pool",
        "# as `poolconsole prometheus-config` writes it. Check with: promtool check rules FILE",
        "groups:",
        "  - name: poolconsole",
        "    rules:",
    ]
    lines += _rule(
        "down",
        'up{engine!=""} == 0 or up{engine="", host!=""} == 0',
        a.down_for_s,
        "critical",
        "{{ if $labels.engine }}{{ $labels.engine }}: down: its /metrics{{ else }}{{ $labels.host }}: down: its "
        "exporter{{ end }} does not answer ({{ $labels.instance }}, {{ $labels.job }})",
    )
    window = _duration(a.stall_s)
    series = stall_series()
    kinds = sorted({e.kind for e in config.engines if e.kind in series} or set(series))
    by = "sum by (engine, host)"
    parts = []
    for kind in kinds:
        running, waiting, generated, prompt = series[kind]
        parts.append(
            f'(({by} ({running}{{engine!=""}}) + {by} ({waiting}{{engine!=""}})) > 0 '
            f'and {by} (increase({generated}{{engine!=""}}[{window}])) == 0 '
            f'and {by} (increase({prompt}{{engine!=""}}[{window}])) == 0)'
        )
    summary = (
        f"{{{{ $labels.engine }}}}: stalled: requests running or waiting, no token generated or prompt token "
        f"processed for {window}"
    )
    lines += _rule("stalled", " or ".join(parts), 0, "critical", summary)
    lines += _slo_rules(config)
    lines += _dcgm_rules(config)
    return "\n".join(lines) + "\n"


def _dcgm_rules(config: PoolConfig) -> list[str]:
    """gpu_xid and gpu_ecc over NVIDIA's DCGM exporter, where hosts are configured (`prometheus-config`
    scrapes a DCGM exporter on each, labelled `host`): an Xid raised in the last 5 minutes (the exporter keeps
    the last Xid's value, so a change of it is the new one), uncorrected volatile ECC errors, a row remap or a
    page retirement pending. One alert per host and GPU, as the watcher sends them."""
    if not config.hosts:
        return []
    a = config.alerts
    by = "max by (host, gpu)"
    xid = (
        f'{by} (DCGM_FI_DEV_XID_ERRORS{{host!=""}}) != 0 and {by} (changes(DCGM_FI_DEV_XID_ERRORS{{host!=""}}[5m])) > 0'
    )
    ecc = " or ".join(
        f'{by} ({name}{{host!=""}}) > 0'
        for name in ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "DCGM_FI_DEV_ROW_REMAP_PENDING", "DCGM_FI_DEV_RETIRED_PENDING")
    )
    return _rule(
        "gpu_xid",
        xid,
        a.gpu_xid_for_s,
        "critical",
        "{{ $labels.host }}: GPU {{ $labels.gpu }}: Xid {{ $value }} in the last 5 min (DCGM exporter)",
    ) + _rule(
        "gpu_ecc",
        ecc,
        a.gpu_ecc_for_s,
        "critical",
        "{{ $labels.host }}: GPU {{ $labels.gpu }}: uncorrected ECC errors, or a row remap or page retirement "
        "pending (DCGM exporter)",
    )


WINDOWS = {"5m": "5m", "30m": "30m", "1h": "1h", "6h": "6h"}
RECORD = "poolconsole:slo_ttft_errors:ratio_rate"


def _le(seconds: float) -> str:
    """A bucket bound as prometheus_client writes it (vLLM's and SGLang's `le`): 1.0, 0.25, 10.0."""
    return repr(float(seconds))


def _slo_rules(config: PoolConfig) -> list[str]:
    """slo_burn as Google's multi-window alerts: per objective, the share of requests over its TTFT bound in
    each window (recording rules over the engines' TTFT histograms), then a page when 1 h and 5 min are both
    over 14.4x its error budget and a warning when 6 h and 30 min are both over 6x."""
    lines: list[str] = []
    alerts: list[str] = []
    ttft = ttft_histograms()
    kinds = {e.name: e.kind for e in config.engines}
    hosts = {e.name: e.host for e in config.engines}
    for slo in config.slo:
        if slo.engine is not None:
            used = [kinds[slo.engine]] if kinds.get(slo.engine) in ttft else []
            selector, labels = f'engine="{slo.engine}"', {"engine": slo.engine}
            if hosts.get(slo.engine):
                labels["host"] = str(hosts[slo.engine])
        else:
            used = sorted(ttft)
            selector, labels = f"model_name={json.dumps(slo.model)}", {"model": str(slo.model)}
        if not used:
            lines.append(f"      # slo {slo.target}: its engine kind exposes no TTFT histogram")
            continue
        shown = ", ".join(f"{k}: {json.dumps(v)}" for k, v in labels.items())
        le = f',le="{_le(slo.ttft_s)}"'
        for window in WINDOWS:
            # per kind the requests over the bound (count - bucket): a bound the engine does not expose reads
            # as no series, so no errors, never as every request slow
            over = " + ".join(
                f"((sum(rate({ttft[k]}_count{{{selector}}}[{window}])) - "
                f"sum(rate({ttft[k]}_bucket{{{selector}{le}}}[{window}]))) or vector(0))"
                for k in used
            )
            total = " + ".join(f"(sum(rate({ttft[k]}_count{{{selector}}}[{window}])) or vector(0))" for k in used)
            expr = f"({over}) / ({total})"
            lines += [f"      - record: {RECORD}{window}", f"        expr: {json.dumps(expr)}"]
            lines.append(f"        labels: {{{shown}}}")
        budget = 1 - slo.objective
        match = "{" + ", ".join(f"{k}={json.dumps(v)}" for k, v in labels.items()) + "}"
        for (long, short, factor), severity in ((("1h", "5m", 14.4), "critical"), (("6h", "30m", 6.0), "warning")):
            line = f"{factor * budget:.6g}"
            expr = f"{RECORD}{long}{match} > {line} and {RECORD}{short}{match} > {line}"
            summary = (
                f"{slo.target}: slo burn: TTFT over {slo.ttft_s:g} s for more than {factor:g}x the "
                f"{budget * 100:g}% error budget over {long} and {short}"
            )
            alerts += _rule("slo_burn", expr, config.alerts.slo_burn_for_s, severity, summary, f", {shown}")
    return lines + alerts
