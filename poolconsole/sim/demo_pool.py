"""The simulated pool: the seed hosts and engines of hosts.toml, with modelled hardware and load."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from poolconsole.sim.load import LoadProfile


@dataclass(frozen=True)
class GpuSpec:
    name: str
    memory_mib: int | None
    """None on unified-memory boxes, where nvidia-smi answers [N/A]."""
    power_limit_w: float | None
    idle_w: float
    max_w: float


@dataclass(frozen=True)
class HostSpec:
    name: str
    description: str
    platform: str
    """nvidia | nvidia-unified | apple | cpu"""
    gpus: tuple[GpuSpec, ...] = ()
    ram_gib: int = 64


@dataclass(frozen=True)
class KvShape:
    """What the fit check's KV estimate needs from the model (ops/fit.py: per token, layers x kv_heads x head_dim
    x 2 (K and V) x the bytes of kv_dtype), and how many sequences at full context its profile budgets for: the
    estimate is max_model_len x max_num_seqs tokens (vLLM and SGLang batch more, shorter, sequences: they size
    their KV cache to the memory left, which the sim's kv_tokens stand for)."""

    layers: int
    kv_heads: int
    head_dim: int
    kv_dtype: str
    seqs: int


@dataclass(frozen=True)
class EngineSpec:
    name: str
    kind: str
    host: str
    models: tuple[str, ...]
    description: str
    profile: str
    load: LoadProfile | None
    weights_gib: float = 0.0
    kv_gib: float = 0.0
    gpus: tuple[int, ...] = ()
    version: str = ""
    context: int = 32768
    embedding_dims: dict[str, int] = field(default_factory=dict)
    tools: bool = True
    """It answers `tools` with a tool call and `response_format` with JSON (the smoke test's tool_call and json)."""
    kv: KvShape | None = None
    degrade_to: str | None = None
    """The smaller engine non-critical traffic goes to when this one queues (hosts.toml's degrade_to)."""


def _nv(name: str, mib: int, limit: float, idle: float) -> GpuSpec:
    return GpuSpec(name, mib, limit, idle, limit)


HOSTS: tuple[HostSpec, ...] = (
    HostSpec(
        "tp4",
        "4x RTX 3090 24 GB",
        "nvidia",
        tuple(_nv("NVIDIA GeForce RTX 3090", 24576, 350, 28) for _ in range(4)),
        128,
    ),
    HostSpec("ws48", "RTX 6000 Ada 48 GB", "nvidia", (_nv("NVIDIA RTX 6000 Ada Generation", 49140, 300, 22),), 128),
    HostSpec(
        "duo5090",
        "2x RTX 5090 32 GB",
        "nvidia",
        tuple(_nv("NVIDIA GeForce RTX 5090", 32607, 575, 35) for _ in range(2)),
        96,
    ),
    HostSpec(
        "spark", "NVIDIA GB10 128 GB unified", "nvidia-unified", (GpuSpec("NVIDIA GB10", None, None, 12, 100),), 128
    ),
    HostSpec("studio", "Mac Studio M3 Ultra 512 GB", "apple", (), 512),
    HostSpec("rig3090", "RTX 3090 24 GB", "nvidia", (_nv("NVIDIA GeForce RTX 3090", 24576, 350, 25),), 64),
    HostSpec("gateway", "LiteLLM VM", "cpu", (), 8),
)

ENGINES: tuple[EngineSpec, ...] = (
    EngineSpec(
        "qwen3-next-80b",
        "vllm",
        "tp4",
        ("qwen3-next-80b",),
        "Qwen3-Next-80B-A3B-Instruct AWQ 4-bit, TP=4",
        "awq-4bit-tp4",
        LoadProfile(
            125,
            0.143,
            48,
            96_000,
            5,
            6.0,
            (2000, 20000),
            (150, 900),
            prefill_tps=6000,
            prefix_hit=0.35,
            burst_every_s=40,
            burst_users=6,
        ),
        weights_gib=44.0,
        kv_gib=40.0,
        gpus=(0, 1, 2, 3),
        version="0.11.2",
        context=65536,
        # Qwen3-Next-80B-A3B: 48 layers, of which only the 12 gated-attention layers hold a KV cache (the other
        # 36 are Gated DeltaNet, a fixed-size state per sequence): 12 x 2 KV heads x 256, as the example hosts.toml
        kv=KvShape(12, 2, 256, "fp16", 16),
        degrade_to="qwen3-30b-a3b",
    ),
    EngineSpec(
        "qwen3-30b-a3b",
        "vllm",
        "ws48",
        ("qwen3-30b-a3b",),
        "Qwen3-30B-A3B FP8",
        "fp8",
        LoadProfile(140, 0.10, 32, 220_000, 4, 7.0, (500, 4000), (100, 700), prefix_hit=0.3),
        weights_gib=30.0,
        kv_gib=13.0,
        gpus=(0,),
        version="0.11.2",
        context=32768,
        kv=KvShape(48, 4, 128, "fp8", 4),  # Qwen3-30B-A3B: 48 layers, 4 KV heads x 128
    ),
    EngineSpec(
        "gemma3-27b-nvfp4",
        "sglang",
        "duo5090",
        ("gemma-3-27b-it",),
        "Gemma-3-27B NVFP4, FP8 KV, EAGLE",
        "nvfp4-fp8kv-eagle",
        LoadProfile(85, 0.12, 24, 120_000, 4, 6.0, (400, 3000), (100, 600), prefix_hit=0.25, spec_accept=0.72),
        weights_gib=17.0,
        kv_gib=36.0,
        gpus=(0, 1),
        version="0.5.23",
        context=32768,
        # Gemma-3-27B: 62 layers, 16 KV heads x 128. Five in six are sliding-window layers (1024 tokens), which
        # the estimate counts at full context: an upper bound
        kv=KvShape(62, 16, 128, "fp8", 4),
    ),
    EngineSpec(
        "gpt-oss-120b-spark",
        "vllm",
        "spark",
        ("gpt-oss-120b",),
        "gpt-oss-120b MoE FP8, 131k ctx, EAGLE3 draft",
        "fp8-131k",
        # speculative (EAGLE3, 3 draft tokens): acceptance by workload, openai_api.draft_acceptance
        LoadProfile(
            38,
            0.15,
            8,
            400_000,
            2,
            10.0,
            (4000, 40000),
            (200, 1200),
            prefill_tps=2500,
            prefix_hit=0.6,
            spec_accept=0.55,
        ),
        weights_gib=63.0,
        kv_gib=30.0,
        gpus=(0,),
        version="0.11.2",
        context=131072,
        kv=KvShape(36, 8, 64, "fp8", 4),  # gpt-oss-120b: 36 layers, 8 KV heads x 64, as the example hosts.toml
        degrade_to="qwen3-30b-a3b",
    ),
    EngineSpec(
        "deepseek-studio",
        "llamacpp",
        "studio",
        ("deepseek-v3-q2",),
        "DeepSeek-V3 GGUF Q2_K_XL, Metal",
        "gguf-q2kxl",
        LoadProfile(28, 0.35, 2, 65_536, 2, 15.0, (300, 2500), (100, 500), prefill_tps=300, prefix_hit=0.5),
        weights_gib=150.0,
        kv_gib=16.0,
        version="b1-0c1e570",
        context=32768,
        # DeepSeek-V3: 61 layers of MLA, which caches one compressed latent per layer and token, no K and V per
        # head: kv_lora_rank 512 + the RoPE key 64 = 576 values. The estimate counts K and V (x 2) per KV head,
        # so 1 KV head x 288 gives those 576 (llama.cpp's MLA cache; the 128 heads x (192 + 128) of a cache
        # without MLA would be 70x larger). Its -c 32768 over -np 2 slots: 16384 tokens each
        kv=KvShape(61, 1, 288, "fp16", 2),
        degrade_to="qwen3-30b-a3b",
    ),
    EngineSpec(
        "qwen2.5-coder-3090",
        "llamacpp",
        "rig3090",
        ("qwen2.5-coder-32b",),
        "Qwen2.5-Coder-32B Q4_K_M",
        "gguf-q4km",
        LoadProfile(36, 0.3, 4, 32_768, 3, 9.0, (300, 3000), (50, 400), prefill_tps=1500, prefix_hit=0.4),
        weights_gib=18.5,
        kv_gib=2.5,
        gpus=(0,),
        version="b1-0c1e570",
        context=32768,
        # Qwen2.5-Coder-32B: 64 layers, 8 KV heads x 128; a q4_0 KV cache (-ctk q4_0 -ctv q4_0) so -c 32768
        # over 4 slots fits the 24 GB card beside the embedding models
        kv=KvShape(64, 8, 128, "q4_0", 4),
    ),
    EngineSpec(
        "embeddings",
        "ollama",
        "rig3090",
        (
            "nomic-embed-text:latest",
            "mxbai-embed-large:latest",
            "jina/jina-embeddings-v2-base-en:latest",
            "snowflake-arctic-embed:latest",
        ),
        "embedding models",
        "default",
        None,
        weights_gib=1.2,
        gpus=(0,),
        version="0.33.0",
        embedding_dims={
            "nomic-embed-text:latest": 768,
            "mxbai-embed-large:latest": 1024,
            "jina/jina-embeddings-v2-base-en:latest": 768,
            "snowflake-arctic-embed:latest": 1024,
        },
        tools=False,
    ),
    EngineSpec("gateway", "litellm", "gateway", (), "LiteLLM gateway", "default", None, version="1.108.7"),
)


def pool(extra_nodes: int = 0) -> tuple[tuple[HostSpec, ...], tuple[EngineSpec, ...]]:
    """The seed pool plus `extra_nodes` replicated vLLM nodes (for benchmarks, up to 256)."""
    if not 0 <= extra_nodes <= 256:
        raise ValueError("--nodes must be between 0 and 256")
    hosts, engines = list(HOSTS), list(ENGINES)
    template_host, template_engine = HOSTS[1], ENGINES[1]
    for i in range(extra_nodes):
        name = f"node{i:03d}"
        hosts.append(replace(template_host, name=name))
        engines.append(replace(template_engine, name=f"{name}-vllm", host=name, models=(f"{name}-model",)))
    return tuple(hosts), tuple(engines)
