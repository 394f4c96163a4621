"""/metrics pages of the simulated engines, in exactly their real engine's format.

vLLM and llama.cpp are rendered from a real capture used as a template (templates/, copied verbatim
from the project's captures): every family, type, label name and histogram bucket stays as the real
engine wrote it, only the values of the modelled series change. SGLang cannot run here and no full
capture exists, so its page is generated with prometheus_client (the library SGLang itself uses),
with the metric and label names of SGLang 0.5.x.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from functools import cache
from importlib.resources import files

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from poolconsole.sim.load import EngineLoad, Hist, Req

_LINE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{[^}]*\})? (\S+)$")
_LE = re.compile(r'le="([^"]+)"')


@cache
def template(name: str) -> list[str]:
    return (files("poolconsole.sim") / "templates" / name).read_text().splitlines()


def _fmt(value: float) -> str:
    """Python prometheus_client style: 8.0, 1.7959928287385428e+09."""
    return repr(float(value)) if abs(value) < 1e6 or value == 0 else f"{value:.16e}".replace("e+0", "e+0")


def _bucket(hist: Hist, le: str) -> float:
    bound = math.inf if le == "+Inf" else float(le)
    for b, cumulative in hist.cumulative():
        if b >= bound - 1e-12:
            return cumulative
    return hist.count


def render_vllm(load: EngineLoad, model: str, wall_start: float) -> str:
    c = load.c
    scalars: dict[str, float] = {
        "vllm:num_requests_running": len(load.running),
        "vllm:num_requests_waiting": len(load.waiting),
        "vllm:kv_cache_usage_perc": load.kv_usage,
        "vllm:prompt_tokens_total": c.prompt_tokens,
        "vllm:generation_tokens_total": math.floor(c.generation_tokens),
        "vllm:num_preemptions_total": c.preemptions,
        "vllm:prefix_cache_queries_total": math.floor(c.prefix_queries),
        "vllm:prefix_cache_hits_total": math.floor(c.prefix_hits),
        "vllm:prompt_tokens_cached_total": math.floor(c.prefix_hits),
        "process_start_time_seconds": round(wall_start, 2),
    }
    labelled: dict[tuple[str, str], float] = {
        ("vllm:num_requests_waiting_by_reason", 'reason="capacity"'): len(load.waiting),
        ("vllm:request_success_total", 'finished_reason="stop"'): c.finished_stop,
        ("vllm:request_success_total", 'finished_reason="length"'): c.finished_length,
    }
    hists = {
        "vllm:time_to_first_token_seconds": load.ttft,
        "vllm:inter_token_latency_seconds": load.itl,
        "vllm:request_time_per_output_token_seconds": load.itl,
        "vllm:e2e_request_latency_seconds": load.e2e,
        "vllm:request_queue_time_seconds": load.queue_time,
    }
    out: list[str] = []
    for line in template("vllm-0.32.0-metrics.txt"):
        if line.startswith("#"):
            out.append(line)
            continue
        m = _LINE.match(line)
        if m is None:
            out.append(line)
            continue
        name, labels, value = m.group(1), m.group(2) or "", m.group(3)
        labels = labels.replace('model_name="tiny"', f'model_name="{model}"')
        new: float | None = None
        if name in scalars:
            new = scalars[name]
        elif name.endswith("_created"):
            new = wall_start
        else:
            for (lname, selector), v in labelled.items():
                if name == lname and selector in labels:
                    new = v
            for base, hist in hists.items():
                if name == base + "_bucket":
                    le = _LE.search(labels)
                    new = _bucket(hist, le.group(1)) if le else None
                elif name == base + "_sum":
                    new = hist.total
                elif name == base + "_count":
                    new = hist.count
        out.append(f"{name}{labels} {_fmt(new) if new is not None else value}")
    if load.spec_on:  # vLLM registers the spec_decode counters only with a --speculative-config
        for family, v in (
            ("vllm:spec_decode_num_drafts", c.spec_drafts),
            ("vllm:spec_decode_num_draft_tokens", c.spec_draft_tokens),
            ("vllm:spec_decode_num_accepted_tokens", c.spec_accepted),
        ):
            out += [
                f"# HELP {family}_total Speculative decoding counter.",
                f"# TYPE {family}_total counter",
                f'{family}_total{{engine="0",model_name="{model}"}} {_fmt(math.floor(v))}',
            ]
    return "\n".join(out) + "\n"


def in_slots(load: EngineLoad) -> list[Req]:
    """The requests llama.cpp's /slots shows in progress: one per slot."""
    return list(load.running)[: load.profile.max_seqs]


def render_llamacpp(load: EngineLoad, window_tps: float, window_prompt_tps: float) -> str:
    c = load.c
    # llama-server adds a request's tokens to tokens_predicted_total when it ends (at the slot's release);
    # the requests in progress show theirs in /slots' n_decoded.
    predicted = c.released_tokens
    values = {
        "llamacpp:prompt_tokens_total": c.prompt_tokens - c.prefix_hits,
        "llamacpp:prompt_tokens_cached_total": c.prefix_hits,
        "llamacpp:tokens_predicted_total": predicted,
        "llamacpp:n_decode_total": c.generation_tokens,
        "llamacpp:prompt_seconds_total": c.prompt_tokens / max(load.profile.prefill_tps, 1.0),
        "llamacpp:tokens_predicted_seconds_total": c.released_seconds,
        "llamacpp:prompt_tokens_seconds": window_prompt_tps,
        "llamacpp:predicted_tokens_seconds": window_tps,
        "llamacpp:requests_processing": len(load.running),
        "llamacpp:requests_deferred": len(load.waiting),
        "llamacpp:n_busy_slots_per_decode": max(1, len(load.running)),
    }
    out = []
    for line in template("llamacpp-b1-0c1e570-metrics.txt"):
        m = _LINE.match(line)
        if m and m.group(1) in values:
            v = values[m.group(1)]
            text = str(int(v)) if float(v).is_integer() or m.group(1).endswith("_total") else f"{v:.6g}"
            if m.group(1) in ("llamacpp:prompt_seconds_total", "llamacpp:tokens_predicted_seconds_total"):
                text = f"{v:.6g}"
            out.append(f"{m.group(1)} {text}")
        else:
            out.append(line)
    return "\n".join(out) + "\n"


SGLANG_GAUGES = {
    "num_running_reqs": "The number of running requests.",
    "num_used_tokens": "The number of used tokens.",
    "token_usage": "The token usage.",
    "gen_throughput": "The generation throughput (token/s).",
    "num_queue_reqs": "The number of requests in the waiting queue.",
    "cache_hit_rate": "The prefix cache hit rate.",
    "spec_accept_length": "The average acceptance length of speculative decoding.",
    "spec_accept_rate": "The acceptance rate of speculative decoding.",
    "max_total_num_tokens": "Maximum total number of tokens in the KV cache pool.",
    "num_retracted_reqs": "The number of retracted requests.",
}


def render_sglang(
    load: EngineLoad, model: str, gen_throughput: float, spec_window: tuple[float, float] | None = None
) -> bytes:
    """An SGLang 0.5.x page: scheduler gauges labelled engine_type, model_name, pp_rank, tp_rank;
    tokenizer counters and histograms labelled engine_type, model_name. SGLang serves /metrics in
    prometheus_client's multiprocess mode, which writes no _created samples. `spec_window`: the
    acceptance rate and length over the last interval, where drafts were proposed in it."""
    sched_labels = ["engine_type", "model_name", "pp_rank", "tp_rank"]
    sched = ["unified", model, "0", "0"]
    tok_labels = ["engine_type", "model_name"]
    tok = ["unified", model]
    c = load.c
    typical = (load.profile.spec_accept or 0.0) if load.spec_on else 0.0
    values = {
        "num_running_reqs": len(load.running),
        "num_used_tokens": round(load.kv_used),
        "token_usage": round(load.kv_usage, 4),
        "gen_throughput": gen_throughput,
        "num_queue_reqs": len(load.waiting),
        "cache_hit_rate": c.prefix_hits / c.prefix_queries if c.prefix_queries else 0.0,
        "spec_accept_length": spec_window[1] if spec_window else 1 + 3 * typical if typical else 0.0,
        "spec_accept_rate": spec_window[0] if spec_window else typical,
        "max_total_num_tokens": load.profile.kv_tokens,
        "num_retracted_reqs": 0,
    }
    families: list[Metric] = []
    for key, help_text in SGLANG_GAUGES.items():
        family = GaugeMetricFamily(f"sglang:{key}", help_text, labels=sched_labels)
        family.add_metric(sched, float(values[key]))
        families.append(family)
    for name, help_text, total in (
        ("sglang:prompt_tokens", "Number of prefill tokens processed.", c.prompt_tokens),
        ("sglang:generation_tokens", "Number of generation tokens processed.", math.floor(c.generation_tokens)),
        ("sglang:num_requests", "Number of requests processed.", c.finished_stop + c.finished_length),
    ):
        counter = CounterMetricFamily(name, help_text, labels=tok_labels)
        counter.add_metric(tok, float(total))
        families.append(counter)
    retracted = CounterMetricFamily("sglang:num_retracted_requests", "Number of retracted requests.")
    retracted.add_metric([], float(c.preemptions))
    families.append(retracted)
    for name, help_text, hist in (
        ("sglang:time_to_first_token_seconds", "Histogram of time to first token in seconds.", load.ttft),
        ("sglang:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", load.itl),
        ("sglang:e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds", load.e2e),
    ):
        family_h = HistogramMetricFamily(name, help_text, labels=tok_labels)
        buckets = [("+Inf" if math.isinf(b) else repr(float(b)), n) for b, n in hist.cumulative()]
        family_h.add_metric(tok, buckets, hist.total)
        families.append(family_h)

    class _Collector(Collector):
        def collect(self) -> Iterable[Metric]:
            return families

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector())
    return generate_latest(registry)
