"""The failure modes an operator meets in engine logs, as a pattern library: each pattern holds the engine's
real message (an example line, verbatim, with where it was seen), what it means and what to change. Pure:
no I/O, no Textual; `diagnose` turns log lines into findings that `logs`, the alerts and the detail screen
show. Numbers a message carries (the KV cache's token count, the memory asked for) go into the adjustment.

Which engine kinds write which message is each kind's adapter's (collect/engines/kinds/, `log_patterns`).
Patterns are tried in order, the first match wins, so a specific message (llama.cpp's cudaMalloc failure)
comes before a generic one (CUDA out of memory)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class FailureMode:
    id: str
    title: str
    pattern: re.Pattern[str]
    diagnosis: str
    adjustment: str
    """What to change. In both texts `{name}` is filled from the pattern's named group of that name."""
    example: str
    """The engine's real message, verbatim."""
    source: str
    """Where the example was seen (a public issue, or a capture from a real engine here)."""


@dataclass(frozen=True)
class Finding:
    """A failure mode seen in a log: the most recent line that matched, and how many did."""

    pattern: str
    title: str
    diagnosis: str
    adjustment: str
    line: str
    line_no: int
    count: int = 1

    def to_json(self) -> dict[str, Any]:
        return {
            "pattern": self.pattern,
            "title": self.title,
            "diagnosis": self.diagnosis,
            "adjustment": self.adjustment,
            "line": self.line,
            "line_no": self.line_no,
            "count": self.count,
        }

    def summary(self) -> str:
        return f"{self.title}: {self.diagnosis} Change: {self.adjustment}"


@dataclass(frozen=True)
class Diagnosis:
    """What an engine's log said when it was read after it went down or restarted."""

    at: float
    reason: str
    """Why it was read, in words: "went down", "restarted: ..."."""
    source: str
    findings: tuple[Finding, ...]
    error: str | None = None
    """Why the log could not be read, when it could not."""


MAX_LINE = 4096
"""Longer lines are matched on their first MAX_LINE characters (a log line can be megabytes)."""

_I = re.IGNORECASE

MODES: tuple[FailureMode, ...] = (
    FailureMode(
        "vllm_kv_cache_too_small",
        "max_model_len larger than the KV cache",
        re.compile(
            r"max seq len \((?P<max_len>\d+)\) is larger than the maximum number of tokens that can be stored in "
            r"KV cache \((?P<kv_tokens>\d+)\)"
        ),
        "vLLM refused to start: one request of the full context length ({max_len} tokens) would not fit in the KV "
        "cache the memory budget leaves. The context-length cliff.",
        "Set --max-model-len to at most {kv_tokens}, or raise --gpu-memory-utilization, use an fp8 KV cache "
        "(--kv-cache-dtype fp8), a smaller quantization, or more tensor-parallel GPUs.",
        "ValueError: The model's max seq len (32768) is larger than the maximum number of tokens that can be "
        "stored in KV cache (7344). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when "
        "initializing the engine.",
        "https://github.com/QwenLM/Qwen3/issues/295",
    ),
    FailureMode(
        "vllm_no_cache_blocks",
        "no memory left for the KV cache",
        re.compile(r"No available memory for the cache blocks"),
        "vLLM loaded the weights but nothing of its memory budget was left for KV cache blocks: the weights "
        "(plus activations and CUDA graphs) take all of gpu_memory_utilization x the GPU, or another process "
        "holds part of the GPU.",
        "Raise --gpu-memory-utilization, free the GPU of other processes (see the GPU's processes), use a smaller "
        "quantization or more tensor-parallel GPUs, or --enforce-eager to drop the CUDA graphs' memory.",
        "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
        "initializing the engine.",
        "https://github.com/vllm-project/vllm/issues/10439",
    ),
    FailureMode(
        "quantization_unsupported",
        "quantization not supported on this GPU",
        re.compile(
            r"(?:quantization method (?P<method>\S+)|Quantization scheme) is not supported for (?:', ')?the current "
            r"GPU\. Min(?:imum)? capability: (?P<min_cc>\d+)\.(?: ', ')? ?Current capability: (?P<cc>\d+)",
            _I,
        ),
        "The checkpoint's quantization needs a newer GPU: its kernels need compute capability {min_cc}, the card "
        "has {cc}.",
        "Serve a format this card runs (e.g. GPTQ/AWQ through Marlin on 8.0+, GGUF on llama.cpp, or FP16/BF16), "
        "or move the engine to a GPU of compute capability {min_cc} or newer.",
        "ValueError: The quantization method fp8 is not supported for the current GPU. Minimum capability: 90. "
        "Current capability: 86.",
        "https://github.com/vllm-project/vllm/issues/4327",
    ),
    FailureMode(
        "cuda_graph_capture",
        "CUDA graph capture failed",
        re.compile(
            r"operation not permitted when stream is capturing|operation failed due to a previous error during "
            r"capture|Capture cuda graph failed",
            _I,
        ),
        "Capturing CUDA graphs at startup failed: an operation in the model, a kernel or the tensor-parallel "
        "all-reduce is not capturable with this runtime, driver or shape, or capture ran out of memory.",
        "Start once with --enforce-eager (vLLM) or --disable-cuda-graph (SGLang) to confirm; then lower "
        "--cuda-graph-max-bs / --max-num-seqs or --mem-fraction-static, or pin the engine version that worked.",
        "RuntimeError: CUDA error: operation not permitted when stream is capturing",
        "https://github.com/sgl-project/sglang/issues/7918",
    ),
    FailureMode(
        "nccl_error",
        "NCCL error",
        re.compile(r"NCCL error|ncclUnhandledCudaError|ncclSystemError|ncclInternalError|DistBackendError"),
        "The GPUs of this tensor-parallel node could not talk to each other (NCCL): a GPU that fell off the bus, "
        "peer-to-peer not supported between these cards, too little shared memory in the container, or a "
        "mismatched NCCL/driver.",
        "Run once with NCCL_DEBUG=INFO to see which link fails; on consumer cards without P2P set "
        "NCCL_P2P_DISABLE=1; give the container --ipc=host or a large --shm-size; check nvidia-smi topo -m and "
        "dmesg for Xid errors. Only this node is affected: keep it drained until it starts clean.",
        "RuntimeError: NCCL error: unhandled cuda error (run with NCCL_DEBUG=INFO for details)",
        "https://github.com/vllm-project/vllm/issues/7896",
    ),
    FailureMode(
        "sglang_mem_fraction",
        "SGLang memory pool has no room",
        re.compile(
            r"Not enough memory\. Please try to increase --mem-fraction-static|is larger than the profiled value "
            r"-\d+|No space left for only one request"
        ),
        "SGLang's KV memory pool got no room (or less than one request needs): after the weights, "
        "mem_fraction_static x the GPU leaves nothing for the token pool. Large models hit this at startup.",
        "Raise --mem-fraction-static (e.g. 0.85 -> 0.9) for a large model; if it then runs out of memory under "
        "load, lower --context-length, --max-running-requests or --chunked-prefill-size instead, or add "
        "tensor-parallel GPUs.",
        "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.",
        "https://github.com/sgl-project/sglang/issues/4330",
    ),
    FailureMode(
        "metal_out_of_memory",
        "Metal buffer allocation failed",
        re.compile(
            r"kIOGPUCommandBufferCallbackErrorOutOfMemory|ggml_backend_metal_buffer_type_alloc_buffer: error: "
            r"failed to allocate buffer|failed to allocate Metal buffer|size \d+ is larger than buffer maximum"
        ),
        "The Mac's GPU could not get the memory it asked for: weights plus KV cache exceed what macOS lets the "
        "GPU wire (recommendedMaxWorkingSetSize, about 2/3 to 3/4 of RAM).",
        "Lower the context (-c / num_ctx) or use a smaller quantization; or raise the GPU's wired limit (sudo "
        "sysctl iogpu.wired_limit_mb=...) leaving RAM for the system.",
        "error: Insufficient Memory (00000008:kIOGPUCommandBufferCallbackErrorOutOfMemory)",
        "https://github.com/mozilla-ai/llamafile/pull/881",
    ),
    FailureMode(
        "llamacpp_buffer_alloc",
        "llama.cpp buffer allocation failed",
        re.compile(
            r"cudaMalloc failed: out of memory|failed to allocate (?P<device>\w+) buffer of size (?P<size>\d+)|"
            r"unable to allocate (?:\w+ )?buffer|failed to allocate buffer of size (?P<cpu_size>\d+)|"
            r"failed to allocate compute (?:pp )?buffers|ggml_aligned_malloc: insufficient memory"
        ),
        "llama.cpp could not allocate a buffer for the weights, the KV cache or the compute graph: the context "
        "(-c) times the parallel slots, or the layers offloaded (-ngl), need more memory than the device has.",
        "Lower -c (the KV cache grows with it) or --parallel, quantize the KV cache (-ctk q8_0 -ctv q8_0), "
        "offload fewer layers (-ngl), or use a smaller quantization.",
        "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 35533.34 MiB on device 0: cudaMalloc failed: out "
        "of memory",
        "https://github.com/ollama/ollama/issues/8447",
    ),
    FailureMode(
        "ollama_system_memory",
        "Ollama: model needs more memory than is free",
        re.compile(
            r"model requires more system memory \((?P<need>[\d.]+ ?\w+)\) than is available \((?P<have>[\d.]+ ?\w+)\)"
        ),
        "Ollama refused to load the model: it needs {need} and only {have} is free (other resident models, "
        "other processes, or a context num_ctx larger than the machine holds).",
        "Unload other resident models (keep_alive 0) or shorten OLLAMA_KEEP_ALIVE, lower num_ctx or "
        "OLLAMA_NUM_PARALLEL, or pull a smaller quantization of the model.",
        "Error: model requires more system memory (164.8 GiB) than is available (13.4 GiB)",
        "https://github.com/ollama/ollama/issues/10920",
    ),
    FailureMode(
        "gb10_nv_err_no_memory",
        "GB10 driver out of memory (NV_ERR_NO_MEMORY)",
        re.compile(r"NV_ERR_NO_MEMORY"),
        "The NVIDIA driver could not allocate memory on a unified-memory host (GB10 / DGX Spark): CPU and GPU "
        "share the same RAM, and the engine's budget (gpu_memory_utilization of the whole RAM) plus the page "
        "cache and other processes left nothing. The host can wedge without an OOM kill.",
        "Lower gpu_memory_utilization (or --mem-fraction-static) so the engine leaves 10-15 GB for the system, "
        "drop the page cache before loading (sync; echo 3 > /proc/sys/vm/drop_caches), and run one large engine "
        "per GB10 at a time.",
        "NVRM: nvCheckOkFailedNoLog: Check failed: Out of memory [NV_ERR_NO_MEMORY] (0x00000051) returned from "
        "_memdescAllocInternal(pMemDesc) @ mem_desc.c:1359",
        "https://github.com/NVIDIA/open-gpu-kernel-modules/issues/1358",
    ),
    FailureMode(
        "cuda_out_of_memory",
        "CUDA out of memory",
        re.compile(
            r"CUDA out of memory(?:\. Tried to allocate (?P<asked>[\d.]+ [KMG]iB))?|CUDA error: out of memory", _I
        ),
        "The GPU ran out of memory: weights, KV cache and the activations of the running batch did not fit, "
        "typically under load (a long prompt or a burst of requests) or with another process on the GPU.",
        "Lower --gpu-memory-utilization / --mem-fraction-static a little to leave room for activations, lower "
        "--max-num-seqs or --max-num-batched-tokens (--chunked-prefill-size on SGLang), free the GPU of other "
        "processes, or use a smaller quantization; PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True helps "
        "fragmentation.",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 224.00 MiB. GPU 0 has a total capacity of "
        "11.53 GiB of which 187.75 MiB is free.",
        "https://github.com/vllm-project/vllm/issues/12030",
    ),
)

BY_ID = {mode.id: mode for mode in MODES}


def match_line(line: str) -> tuple[FailureMode, re.Match[str]] | None:
    """The first failure mode whose pattern the line matches."""
    text = line[:MAX_LINE]
    for mode in MODES:
        found = mode.pattern.search(text)
        if found is not None:
            return mode, found
    return None


def diagnose(lines: Iterable[str]) -> list[Finding]:
    """One finding per failure mode seen, with its most recent line, in the order each was first seen."""
    found: dict[str, Finding] = {}
    for number, line in enumerate(lines, 1):
        hit = match_line(line)
        if hit is None:
            continue
        mode, match = hit
        count = found[mode.id].count + 1 if mode.id in found else 1
        found[mode.id] = Finding(
            mode.id,
            mode.title,
            fill(mode.diagnosis, match),
            fill(mode.adjustment, match),
            line.strip()[:MAX_LINE],
            number,
            count,
        )
    return list(found.values())


def fill(template: str, match: re.Match[str]) -> str:
    """The template with `{name}` replaced by what the named group matched ("?" where it did not)."""
    groups = match.groupdict()
    return re.sub(r"\{([a-z_]+)\}", lambda m: groups.get(m.group(1)) or "?", template)
