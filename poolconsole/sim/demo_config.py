"""The simulated pool's hosts.toml: what `poolconsole demo` hands the console (hosts over SSH with the demo's
key, engines with two or more profiles each, their control and smoke sections)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from poolconsole.sim.demo_files import CONFIG_HEADER
from poolconsole.sim.demo_pool import EngineSpec, KvShape
from poolconsole.sim.hosts import BROKEN_PROFILE, NO_SPEC_ENV, NO_SPEC_SUFFIX

if TYPE_CHECKING:
    from poolconsole.sim.demo import SimPool

DEMO_KEY_ENV = "POOLCONSOLE_DEMO_KEY"
"""With keys on (`--scenario oom`): the environment variable the demo's hosts.toml names as api_key_env."""
KEYLESS_ENGINE = "embeddings"
"""With keys on: the one engine that answers without a key (Ollama has no keys)."""


def config_toml(sim: SimPool) -> str:
    """The hosts.toml that points the console at `sim`: its hosts over SSH with the demo's key, its engines
    with their profiles, control and smoke sections."""
    lines = [
        CONFIG_HEADER + " (127.0.0.1, free ports).",
        "# Commands given this file keep to the demo's own stores beside it; delete the first line to use yours.",
        "",
        "[settings]",
        "poll_interval_s = 1.0",
        "http_timeout_s = 3.0",
        "",
    ]
    for host_spec in sim.hosts:
        host = sim.sim_hosts.get(host_spec.name)
        if host is None or sim.keys_dir is None:
            continue
        lines += [
            "[[hosts]]",
            f'name = "{host_spec.name}"',
            'address = "127.0.0.1"',
            f"port = {host.port}",
            'user = "demo"',
            f'identity_file = "{sim.keys_dir / "id_ed25519"}"',
            f'known_hosts = "{sim.keys_dir / "known_hosts"}"',
            f'description = "{host_spec.description} (simulated)"',
        ]
        if host_spec.platform in ("nvidia-unified", "apple"):
            lines.append('memory_kind = "unified"')
        lines.append("")
    for spec in sim.engine_specs:
        engine = sim.engines[spec.name]
        lines += [
            "[[engines]]",
            f'name = "{spec.name}"',
            f'kind = "{spec.kind}"',
            f'url = "{engine.url}"',
            f'host = "{spec.host}"',
            f'model = "{spec.description}"',
            f'profile = "{spec.profile}"',
            f'container = "{spec.name}"',
        ]
        if sim.key is not None and spec.name != KEYLESS_ENGINE:
            lines.append(f'api_key_env = "{DEMO_KEY_ENV}"')
        if spec.gpus:
            lines.append(f"gpus = [{', '.join(str(g) for g in spec.gpus)}]")
        if spec.degrade_to is not None:
            lines.append(f'degrade_to = "{spec.degrade_to}"')
        if spec.tools and spec.kind in ("vllm", "sglang", "llamacpp"):
            # the simulated engines answer tools with a tool call and response_format with JSON
            lines += ["", "[engines.smoke]", "tools = true", "json_schema = true"]
        if spec.kind in ("vllm", "sglang", "llamacpp") and sim.sim_hosts:
            lines += [
                "",
                "[engines.control]",
                'backend = "docker"',
                f'name = "{spec.name}"',
                f'profile_file = "/srv/pool/{spec.name}.env"',
                "health_timeout_s = 20",
                "drain_timeout_s = 0",
            ]
            lines += demo_profiles(spec)
        elif spec.kind == "ollama" and sim.sim_hosts:
            lines += ["", "[engines.logs]", 'source = "docker"', f'name = "{spec.name}"']
        lines.append("")
    return "\n".join(lines)


def demo_profiles(spec: EngineSpec) -> list[str]:
    """Two profiles per engine for the operator loop (a speculative engine has a third, `-nospec`, the same
    model without its draft); on the 80B node two more: fp8-tp4, the demo's broken
    profile (it fits by memory, so the fit check passes, but the engine never loads it: /health answers
    503 until the rollover's timeout, and the rollover rolls back), and bf16-tp4, which does not fit in
    4x24 GB (the fit check refuses it). Each carries the model's KV figures (`spec.kv`), so `plan` and the
    fit dialog estimate weights + KV cache."""
    gpus = max(1, len(spec.gpus))
    base = spec.weights_gib
    shape = spec.kv
    out: list[str] = []
    variants: list[tuple[str, float, str, KvShape | None, int]] = [
        (spec.profile, base, "1.0", shape, spec.context),
        (f"{spec.profile}-long", base, "0.9", shape, spec.context),
    ]
    if spec.name == "qwen3-next-80b":
        variants += [
            # FP8 weights and an FP8 KV cache at half the context and sequences: it fits, 1.2 GiB to spare
            (BROKEN_PROFILE, 74.5, "1.1", shape and replace(shape, kv_dtype="fp8", seqs=8), spec.context // 2),
            ("bf16-tp4", 149.0, "1.0", shape and replace(shape, kv_dtype="bf16"), spec.context),
        ]
    for name, weights, speed, kv, context in variants:
        out += [
            "",
            "[[engines.profiles]]",
            f'name = "{name}"',
            'format = "demo"',
            f"weights_gib = {weights}",
            f"tp_size = {gpus}",
            *_kv_lines(spec, kv, context),
            f'env = {{ POOL_SPEED = "{speed}" }}',
        ]
    if spec.load is not None and spec.load.spec_accept is not None:
        # the same model without its draft: what `smoke --workload ... --ab` measures against
        out += [
            "",
            "[[engines.profiles]]",
            f'name = "{spec.profile}-{NO_SPEC_SUFFIX}"',
            'format = "demo"',
            f"weights_gib = {base}",
            f"tp_size = {gpus}",
            *_kv_lines(spec, shape, spec.context),
            f'env = {{ POOL_SPEED = "1.0", {NO_SPEC_ENV} = "off" }}',
        ]
    return out


def _kv_lines(spec: EngineSpec, kv: KvShape | None, context: int) -> list[str]:
    """A profile's memory keys: utilisation and overhead, and with the model's KV figures its context and
    sequences (on llama.cpp -c is split over -np slots: max_model_len is one slot's, as the sim serves it)."""
    llamacpp = spec.kind == "llamacpp"
    # llama.cpp has no utilisation knob: leave the driver its margin, and it needs less runtime overhead
    out = ["gpu_memory_utilization = 0.98", "overhead_gib = 1.0"] if llamacpp else ["gpu_memory_utilization = 0.92"]
    if kv is None:
        return out
    return [
        *out,
        f"max_model_len = {context // kv.seqs if llamacpp else context}",
        f"max_num_seqs = {kv.seqs}",
        f'kv_dtype = "{kv.kv_dtype}"',
        f"layers = {kv.layers}",
        f"kv_heads = {kv.kv_heads}",
        f"head_dim = {kv.head_dim}",
    ]
