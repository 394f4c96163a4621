"""Will a profile fit? Weights + KV cache + runtime overhead per tensor-parallel shard, against what the
pool says now: each GPU's polled total x gpu_memory_utilization, less the memory other processes hold on
that GPU (another engine on the card, not the engine being switched); unified-memory hosts against the
memory available now. Config figures (gpu_memory_gib, memory_gib) are the fallback. Memory that is not
known is "cannot check", never "does not fit".

The context-length cliff comes with it: how many KV tokens the budget leaves once the weights are in
(the engine's own figure where it reports one for the active profile), the longest context that fits at
the profile's max sequences, and the concurrency that fits at its max context."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from poolconsole.config.models import Engine, Host, Profile
from poolconsole.model import units
from poolconsole.model.hosts import HostSnapshot

GIB = 1024**3
KV_BYTES = {"fp32": 4.0, "fp16": 2.0, "bf16": 2.0, "fp8": 1.0, "q8_0": 1.0625, "q4_0": 0.5625}


class Verdict(StrEnum):
    FITS = "fits"
    DOES_NOT_FIT = "does not fit"
    CANNOT_CHECK = "cannot check"


@dataclass(frozen=True)
class LiveMemory:
    """What a poll of the engine's host says, for the fit check (None: not known)."""

    gpu_totals_gib: dict[int, float] = field(default_factory=dict)
    """GPU index -> total memory, as polled."""
    others_gib: dict[int, float] = field(default_factory=dict)
    """GPU index -> memory held by processes that are not this engine's."""
    unified_available_gib: float | None = None
    processes_known: bool = False
    source: str = ""
    """Where the figures come from, in words ("polled 2 s ago over nvidia-smi")."""


@dataclass(frozen=True)
class KvCapacity:
    """The engine's own KV figures for its active profile."""

    tokens: int
    source: str
    """e.g. "vllm:cache_config_info num_gpu_blocks 8192 x block_size 16"."""


@dataclass(frozen=True)
class FitReport:
    engine: str
    profile: str
    verdict: Verdict
    weights_gib: float | None
    kv_gib: float | None
    overhead_gib: float
    per_shard_gib: float | None
    budget_gib: float | None
    """Per GPU: memory x gpu_memory_utilization less other processes (unified: memory available now)."""
    headroom_gib: float | None
    unified: bool
    kv_tokens: int | None = None
    """KV-cache tokens the budget holds once the weights are in (the engine's own figure when given)."""
    max_context_at_max_seqs: int | None = None
    concurrency_at_max_context: float | None = None
    notes: list[str] = field(default_factory=list)
    kv_unknown: str | None = None
    """Why the KV cache was not estimated (None: it was): the verdict then checks the weights only."""
    kv_from_engine: bool = False
    """`kv_tokens` is the engine's own figure for its active profile (else this check's estimate)."""

    @property
    def fits(self) -> bool:
        return self.verdict is Verdict.FITS

    def rows(self) -> list[tuple[str, ...]]:
        """The report as rows of whole fields (a number stays with its unit): the console's dialog wraps
        between fields; `lines` joins them for the CLI, the progress log and the audit."""

        def g(x: float | None) -> str:
            return units.num(x, 1, " GiB")

        fits = f"fits the weights (KV cache not estimated: {self.kv_unknown})" if self.kv_unknown else "fits"
        head = {
            Verdict.FITS: fits,
            Verdict.DOES_NOT_FIT: "DOES NOT FIT",
            Verdict.CANNOT_CHECK: "cannot check: GPU memory unknown",
        }[self.verdict]
        kv = "+ KV not estimated" if self.kv_gib is None else f"+ KV {g(self.kv_gib)} (max_model_len x max_num_seqs)"
        against = "unified memory available now" if self.unified else "GPU memory x utilisation, less other processes"
        out = [
            (f"{self.engine} / {self.profile}: {head}",),
            (f"weights {g(self.weights_gib)}", kv, f"+ overhead {g(self.overhead_gib)} per GPU"),
            (
                f"per shard {g(self.per_shard_gib)}",
                f"against {g(self.budget_gib)}",
                f"({against}),",
                f"headroom {g(self.headroom_gib)}",
            ),
        ]
        if self.kv_tokens is not None:
            whose = (
                "the engine's own KV cache holds"
                if self.kv_from_engine
                else "the KV cache left once the weights are in holds about"
            )
            cliff = [f"{whose} {self.kv_tokens:,} tokens"]
            if self.max_context_at_max_seqs is not None:
                cliff.append(f"longest context at its max sequences {self.max_context_at_max_seqs:,}")
            if self.concurrency_at_max_context is not None:
                cliff.append(f"concurrency at its max context {self.concurrency_at_max_context:.1f}")
            out.append((*(f"{part}," for part in cliff[:-1]), cliff[-1]))
        return out + [(f"note: {n}",) for n in self.notes]

    def lines(self) -> list[str]:
        """Each row as one line, indented under the first (the CLI's `plan`, the progress log, the audit)."""
        return [("  " if i else "") + " ".join(row) for i, row in enumerate(self.rows())]


def weights_gib(profile: Profile) -> float | None:
    if profile.weights_gib is not None:
        return profile.weights_gib
    if profile.params_b is not None and profile.bits is not None:
        return profile.params_b * 1e9 * profile.bits / 8 / GIB
    return None


def kv_bytes_per_token(profile: Profile) -> float | None:
    if profile.layers is None or profile.kv_heads is None or profile.head_dim is None:
        return None
    return profile.layers * profile.kv_heads * profile.head_dim * 2 * KV_BYTES[profile.kv_dtype]


def kv_unknown(profile: Profile) -> str | None:
    """Why the profile's KV cache cannot be estimated, in words (None: it can)."""
    missing = [name for name in ("layers", "kv_heads", "head_dim") if getattr(profile, name) is None]
    if not missing:
        return None
    return f"no {', '.join(missing)} in the profile"


def kv_gib(profile: Profile) -> float | None:
    per_token = kv_bytes_per_token(profile)
    return None if per_token is None else per_token * profile.max_model_len * profile.max_num_seqs / GIB


def live_memory(snapshot: HostSnapshot | None, engine: Engine, age_s: float | None = None) -> LiveMemory | None:
    """The fit check's figures from a host poll: totals per GPU, other processes' memory per GPU (every
    process not mapped to `engine`), and on unified hosts the memory available now."""
    if snapshot is None or not snapshot.state.answering:
        return None
    totals = {
        g.index: g.memory_total_bytes / GIB
        for g in snapshot.gpus
        if g.index is not None and g.memory_total_bytes and g.memory_source == "device"
    }
    by_uuid = {g.uuid: g.index for g in snapshot.gpus if g.uuid is not None and g.index is not None}
    others: dict[int, float] = {}
    own = 0.0
    for p in snapshot.processes:
        if p.used_memory_bytes is None:
            continue
        if p.engine == engine.name:
            own += p.used_memory_bytes / GIB
            continue
        index = by_uuid.get(p.gpu_uuid) if p.gpu_uuid is not None else None
        if index is not None:
            others[index] = others.get(index, 0.0) + p.used_memory_bytes / GIB
    memory = snapshot.system_memory
    available = (
        # the engine being switched gives its memory back when it stops: it counts as available
        memory.available_bytes / GIB + own
        if snapshot.memory_kind == "unified" and memory is not None and memory.available_bytes is not None
        else None
    )
    when = f" {age_s:.0f} s ago" if age_s is not None else ""
    return LiveMemory(
        totals, others, available, bool(snapshot.processes), f"polled{when} ({snapshot.source or 'host'})"
    )


def fit(
    engine: Engine,
    profile: Profile,
    host: Host | None,
    live: LiveMemory | None = None,
    kv: KvCapacity | None = None,
    *,
    active: bool = False,
) -> FitReport:
    """`live` from a host poll (else the host's config figures); `kv` is the engine's own KV figure, used
    for the cliff only when `profile` is the `active` one (it describes the running profile)."""
    w = weights_gib(profile)
    kv_need = kv_gib(profile)
    per_token = kv_bytes_per_token(profile)
    notes: list[str] = []
    if w is None:
        notes.append("weights unknown: give weights_gib, or params_b and bits")
    if kv_need is None:
        notes.append(
            "this profile's KV cache size unknown from hosts.toml: give layers, kv_heads and head_dim "
            "(vLLM also sizes KV to fill the budget)"
        )
    shard = ((w or 0) + (kv_need or 0)) / profile.tp_size + profile.overhead_gib if w is not None else None
    unified = host is not None and (
        host.memory_kind == "unified" or (live is not None and live.unified_available_gib is not None)
    )
    budget = _unified_budget(profile, host, live, notes) if unified else _gpu_budget(engine, profile, host, live, notes)
    headroom = budget - shard if budget is not None and shard is not None else None
    if budget is None:
        verdict = Verdict.CANNOT_CHECK
        notes.append("GPU memory of the host unknown: poll it, or set gpu_memory_gib / memory_gib (--force proceeds)")
    elif headroom is None:
        verdict = Verdict.CANNOT_CHECK
    else:
        verdict = Verdict.FITS if headroom >= 0 else Verdict.DOES_NOT_FIT
    tokens: int | None = None
    if kv is not None and active:
        tokens = kv.tokens
        notes.append(f"KV capacity from the engine: {kv.source}")
    elif budget is not None and w is not None and per_token:
        free = (budget - profile.overhead_gib) * profile.tp_size - w
        tokens = max(0, int(free * GIB / per_token))
    cliff_ctx = min(profile.max_model_len, tokens // profile.max_num_seqs) if tokens is not None else None
    cliff_conc = tokens / profile.max_model_len if tokens is not None else None
    if cliff_ctx is not None and cliff_ctx < profile.max_model_len:
        notes.append(
            f"context cliff: at {profile.max_num_seqs} sequences only {cliff_ctx:,} of max_model_len "
            f"{profile.max_model_len:,} tokens fit each"
        )
    return FitReport(
        engine.name,
        profile.name,
        verdict,
        w,
        kv_need,
        profile.overhead_gib,
        shard,
        budget,
        headroom,
        unified,
        tokens,
        cliff_ctx,
        cliff_conc,
        notes,
        kv_unknown(profile) if kv_need is None else None,
        kv is not None and active,
    )


def _unified_budget(profile: Profile, host: Host | None, live: LiveMemory | None, notes: list[str]) -> float | None:
    available = live.unified_available_gib if live is not None else None
    if available is not None:
        if live is not None and live.source:
            notes.append(f"unified memory available now (with the engine's own): {available:.0f} GiB, {live.source}")
        if host is not None and host.memory_gib:
            leftover = host.memory_gib - available
            if leftover > 0.05 * host.memory_gib:
                notes.append(
                    f"{leftover:.0f} GiB of unified memory is already in use: vLLM's start-up check "
                    "(gpu_memory_utilization x total <= free) may refuse to start"
                )
        return available * profile.gpu_memory_utilization
    if host is not None and host.memory_gib:
        notes.append("unified memory from the config (memory_gib): the host was not polled")
        return host.memory_gib * profile.gpu_memory_utilization
    return None


def _gpu_budget(
    engine: Engine, profile: Profile, host: Host | None, live: LiveMemory | None, notes: list[str]
) -> float | None:
    gpus = engine.gpus or list(range(profile.tp_size))
    if live is not None and live.gpu_totals_gib:
        chosen = [i for i in gpus if i in live.gpu_totals_gib]
        if len(chosen) < profile.tp_size:
            notes.append(f"tp_size {profile.tp_size} but {len(chosen)} of the engine's GPUs reported memory")
            return None
        budgets = []
        for i in chosen[: profile.tp_size]:
            total = live.gpu_totals_gib[i]
            other = live.others_gib.get(i, 0.0)
            if other > 0:
                notes.append(f"GPU {i}: {other:.1f} GiB held by other processes (not {engine.name})")
            budgets.append(min(total * profile.gpu_memory_utilization, total - other))
        if not live.processes_known:
            notes.append("no process list from the host: memory of other engines on these GPUs is not counted")
        notes.append(f"GPU memory {live.source}")
        return min(budgets)
    configured = host.gpu_memory_gib if host else None
    if configured:
        chosen_cfg = [configured[i] for i in gpus if i < len(configured)]
        if len(chosen_cfg) < profile.tp_size:
            notes.append(f"tp_size {profile.tp_size} but only {len(chosen_cfg)} GPU(s) on the host")
            return None
        notes.append("GPU memory from the config (gpu_memory_gib): the host was not polled")
        return min(chosen_cfg[: profile.tp_size]) * profile.gpu_memory_utilization
    return None
