"""`poolconsole prometheus-rules`: the watcher's pager rules as a Prometheus rule file (issue 37), over the
engines' native metrics as `poolconsole prometheus-config` scrapes them (each target labelled `engine` and,
where hosts.toml says, `host`; the hosts' node_exporter targets labelled `host`), with the thresholds of
`[alerts]`. A team on Prometheus and Alertmanager then pages the same way without a watcher: the same
alertnames, severities and labels as `poolconsole watch` sends.

- down: a scrape target of an engine or host that does not answer (`up == 0`) for `down_for_s`.
- stalled: per engine kind, requests running or waiting and no generation or prompt token counted for
  `stall_s`."""

from __future__ import annotations

import json

from poolconsole.config.models import EngineKind, PoolConfig

STALL_METRICS = {
    EngineKind.VLLM: (
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:generation_tokens_total",
        "vllm:prompt_tokens_total",
    ),
    EngineKind.SGLANG: (
        "sglang:num_running_reqs",
        "sglang:num_queue_reqs",
        "sglang:generation_tokens_total",
        "sglang:prompt_tokens_total",
    ),
    EngineKind.LLAMACPP: (
        "llamacpp:requests_processing",
        "llamacpp:requests_deferred",
        "llamacpp:tokens_predicted_total",
        "llamacpp:prompt_tokens_total",
    ),
}
"""kind -> (requests running, requests waiting, generated tokens counter, prompt tokens counter), the names
specs.py reads. The prompt counter counts as progress too: a long prefill is not a wedge."""


def _duration(seconds: float) -> str:
    return f"{max(0, round(seconds))}s"


def _rule(alert: str, expr: str, for_s: float, severity: str, summary: str) -> list[str]:
    return [
        f"      - alert: {alert}",
        f"        expr: {json.dumps(expr)}",
        f"        for: {_duration(for_s)}",
        f"        labels: {{severity: {severity}}}",
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
    kinds = sorted({e.kind for e in config.engines if e.kind in STALL_METRICS} or set(STALL_METRICS))
    by = "sum by (engine, host)"
    parts = []
    for kind in kinds:
        running, waiting, generated, prompt = STALL_METRICS[kind]
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
    return "\n".join(lines) + "\n"
