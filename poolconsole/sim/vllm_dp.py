"""Build a vLLM data-parallel /metrics page from a real single-engine capture.

vLLM labels every series with `engine="N"` per data-parallel rank (vllm #24049); this replicates a
real page's `vllm:*` series across N ranks, keeping the families, label names and buckets, and adds
the speculative-decoding counters vLLM emits when `--speculative-config` is set. Used by tests and the
collect benchmark.
"""

from __future__ import annotations

import re

SPEC_FAMILIES = (
    ("vllm:spec_decode_num_drafts", 250),
    ("vllm:spec_decode_num_draft_tokens", 1000),
    ("vllm:spec_decode_num_accepted_tokens", 700),
)


def dp_payload(base: str, ranks: int, spec_decode: bool = True) -> str:
    out: list[str] = []
    for line in base.splitlines():
        if line.startswith("vllm:") and 'engine="0"' in line:
            for rank in range(ranks):
                out.append(line.replace('engine="0"', f'engine="{rank}"'))
        else:
            out.append(line)
    if spec_decode:
        model = re.search(r'model_name="([^"]*)"', base)
        name = model.group(1) if model else "model"
        for family, value in SPEC_FAMILIES:
            out.append(f"# HELP {family}_total Speculative decoding counter.")
            out.append(f"# TYPE {family}_total counter")
            for rank in range(ranks):
                out.append(f'{family}_total{{engine="{rank}",model_name="{name}"}} {float(value)}')
    return "\n".join(out) + "\n"
