"""Will a profile fit? Weights + KV cache + runtime overhead, per tensor-parallel shard, against each GPU's
memory x gpu_memory_utilization; unified-memory hosts against the memory available now."""

from __future__ import annotations

from dataclasses import dataclass, field

from poolconsole.config.models import Engine, Host, Profile

GIB = 1024**3
KV_BYTES = {"fp32": 4.0, "fp16": 2.0, "bf16": 2.0, "fp8": 1.0, "q8_0": 1.0625, "q4_0": 0.5625}


@dataclass(frozen=True)
class FitReport:
    engine: str
    profile: str
    fits: bool
    weights_gib: float | None
    kv_gib: float | None
    overhead_gib: float
    per_shard_gib: float | None
    budget_gib: float | None
    """Per GPU: memory x gpu_memory_utilization (unified: memory available now)."""
    headroom_gib: float | None
    unified: bool
    notes: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        def g(x: float | None) -> str:
            return "n/a" if x is None else f"{x:.1f} GiB"

        out = [
            f"{self.engine} / {self.profile}: {'fits' if self.fits else 'DOES NOT FIT'}",
            f"  weights {g(self.weights_gib)} + KV {g(self.kv_gib)} (max_model_len x max_num_seqs) "
            f"+ overhead {g(self.overhead_gib)} per GPU",
            f"  per shard {g(self.per_shard_gib)} against {g(self.budget_gib)} "
            f"({'unified memory available now' if self.unified else 'GPU memory x utilisation'}), "
            f"headroom {g(self.headroom_gib)}",
        ]
        return out + [f"  note: {n}" for n in self.notes]


def weights_gib(profile: Profile) -> float | None:
    if profile.weights_gib is not None:
        return profile.weights_gib
    if profile.params_b is not None and profile.bits is not None:
        return profile.params_b * 1e9 * profile.bits / 8 / GIB
    return None


def kv_gib(profile: Profile) -> float | None:
    if profile.layers is None or profile.kv_heads is None or profile.head_dim is None:
        return None
    per_token = profile.layers * profile.kv_heads * profile.head_dim * 2 * KV_BYTES[profile.kv_dtype]
    return per_token * profile.max_model_len * profile.max_num_seqs / GIB


def fit(
    engine: Engine,
    profile: Profile,
    host: Host | None,
    gpu_totals_gib: list[float] | None = None,
    unified_available_gib: float | None = None,
) -> FitReport:
    """`gpu_totals_gib` from a live poll (else from the host's config); `unified_available_gib` for unified hosts."""
    w = weights_gib(profile)
    kv = kv_gib(profile)
    notes: list[str] = []
    if w is None:
        notes.append("weights unknown: give weights_gib, or params_b and bits")
    if kv is None:
        notes.append("KV cache unknown: give layers, kv_heads and head_dim (vLLM also sizes KV to fill the budget)")
    shard = ((w or 0) + (kv or 0)) / profile.tp_size + profile.overhead_gib if w is not None else None
    unified = host is not None and host.memory_kind == "unified"
    budget: float | None = None
    if unified:
        total = unified_available_gib if unified_available_gib is not None else (host.memory_gib if host else None)
        budget = total * profile.gpu_memory_utilization if total is not None else None
        if unified_available_gib is not None and host is not None and host.memory_gib:
            leftover = host.memory_gib - unified_available_gib
            if leftover > 0.05 * host.memory_gib:
                notes.append(
                    f"{leftover:.0f} GiB of unified memory is already in use: vLLM's start-up check "
                    "(gpu_memory_utilization x total <= free) may refuse to start"
                )
    else:
        totals = gpu_totals_gib or (host.gpu_memory_gib if host else None)
        gpus = engine.gpus or list(range(profile.tp_size))
        if totals:
            chosen = [totals[i] for i in gpus if i < len(totals)] or totals[: profile.tp_size]
            budget = min(chosen) * profile.gpu_memory_utilization
            if len(chosen) < profile.tp_size:
                notes.append(f"tp_size {profile.tp_size} but only {len(chosen)} GPU(s) on the host")
                budget = None
    if budget is None:
        notes.append("GPU memory of the host unknown (poll it, or set gpu_memory_gib / memory_gib)")
    headroom = budget - shard if budget is not None and shard is not None else None
    fits = headroom is not None and headroom >= 0
    return FitReport(
        engine.name, profile.name, fits, w, kv, profile.overhead_gib, shard, budget, headroom, unified, notes
    )
