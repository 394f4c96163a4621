"""Hosts read from a Prometheus-compatible query API instead of over SSH: the same HostSnapshot the SSH
poller builds (GPUs with memory, utilisation, power and temperature; system memory and swap; dedicated or
unified memory), from the series of the exporters Prometheus scrapes on the host:

- node_exporter: `node_memory_MemTotal_bytes`, `MemAvailable_bytes`, `SwapTotal_bytes`, `SwapFree_bytes`;
- NVIDIA's DCGM exporter: `DCGM_FI_DEV_FB_USED` / `FB_FREE` (/ `FB_RESERVED`, MiB), `GPU_UTIL`,
  `POWER_USAGE`, `GPU_TEMP`, with the `gpu` label as the index;
- nvidia_gpu_exporter: `nvidia_smi_memory_used_bytes` / `memory_total_bytes`, `utilization_gpu_ratio`,
  `power_draw_watts`, `temperature_gpu`, the index and name from `nvidia_smi_gpu_info`.

A host's series are those of every target whose `instance` is the host's `address` with any port
(gpu-box:9100, gpu-box:9400), or its `selector`. A host's reading is three instant vectors: the raw
series and each target's `up`; the `timestamp()` of each target's `up` (when Prometheus scraped it, the
sample's time); and which targets there carried exporter series in the last ten minutes, so that a
stopped exporter (its series are gone, its `up` is 0) is told apart from an engine on the same host.

Every host read through one query API is read in one batch per tick (HostReads, prometheus.batch's
Coalescer, as the engines are): each host keeps its poll loop and its own state and reason, and the
first ask of a tick sends one instant query per group holding all three vectors (`raw or
label_replace(timestamp(up), ...) or recent`): the hosts matched by address, up to BATCH_HOST_CHARS of
addresses in one `instance=~"(a|b|...)(:[0-9]+)?"`, sliced by each series' instance host; each distinct
selector on its own (a selector Prometheus refuses breaks only its own hosts). 250 hosts named h0001
are 5 queries a tick instead of 750.

Unified hosts (GB10, Jetson: the GPU exporters report no framebuffer figures, nvidia_gpu_exporter drops
its `[N/A]` fields, DCGM leaves them out) keep the unified reading: the GPU's memory is the system's,
MemTotal - MemAvailable. Unknown is None with its reason: no series, a stale exporter (`up == 0`, with
Prometheus' scrape error), a query error, an unreachable or refusing query API; never 0.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace

from poolconsole.collect.hosts.poll import HostPoller
from poolconsole.collect.prometheus.api import Answer, PrometheusAPI, Series
from poolconsole.collect.prometheus.batch import Batch, Coalescer
from poolconsole.collect.prometheus.exporters import (
    DCGM,
    NODE,
    NVSMI,
    dcgm_gpus,
    exporter_of,
    nvidia_smi_gpus,
    system_memory,
)
from poolconsole.collect.prometheus.host_queries import (
    BATCH_HOST_CHARS,
    address_key,
    addresses_matcher,
    batch_expression,
    host_matchers,
    host_scrape_times,
    host_selection,
    instance_address,
    recent_exporters,
    stamps_of,
)
from poolconsole.collect.prometheus.queries import SCRAPE_OF
from poolconsole.collect.prometheus.source import SAME_SCRAPE
from poolconsole.config.models import Engine, Host
from poolconsole.model import units
from poolconsole.model.hosts import GpuReading, HostSnapshot, HostState
from poolconsole.model.snapshots import EngineState

STATES = {
    EngineState.DOWN: HostState.UNREACHABLE,
    EngineState.AUTH_FAILED: HostState.AUTH_FAILED,
    EngineState.DEGRADED: HostState.DEGRADED,
}

Target = tuple[str, str]
"""(job, instance) of one scrape target."""


def _target(labels: dict[str, str]) -> Target:
    return labels.get("job", ""), labels.get("instance", "")


HostSlice = tuple[Answer, Answer, Answer]
"""One host's three vectors: the raw series and `up`, the targets' scrape times, the recent exporters."""
Scraped = tuple[tuple[str, str, float], ...]
"""A host's targets' (job, instance, scrape time): what its reading was made of."""


def scraped_of(stamps: Iterable[Series]) -> Scraped:
    return tuple(sorted((*_target(s.labels), s.value) for s in stamps if math.isfinite(s.value)))


@dataclass(frozen=True)
class HostGroup:
    """Hosts read by one query: those matched by address (sliced by instance host) or those of one selector."""

    expr: str
    keys: tuple[int, ...]
    by_address: bool
    stamps: str = ""
    """By address: the scrape times' query (stamps_of)."""


def host_groups(members: dict[int, Host]) -> list[HostGroup]:
    """The queries of one batch: the hosts matched by address, BATCH_HOST_CHARS of addresses a query, and
    each distinct selector on its own (a selector's matchers cannot be merged into another's)."""
    by_address: dict[str, list[int]] = {}
    by_selector: dict[str, list[int]] = {}
    for key, host in members.items():
        if host.selector is None:
            by_address.setdefault(address_key(host.address), []).append(key)
        else:
            by_selector.setdefault(host_matchers(host), []).append(key)
    chunks: list[list[str]] = []
    size = 0
    for address in sorted(by_address):
        if not chunks or (size + len(address) > BATCH_HOST_CHARS and chunks[-1]):
            chunks.append([])
            size = 0
        chunks[-1].append(address)
        size += len(address) + 1
    groups = []
    for chunk in chunks:
        sel = addresses_matcher(chunk)
        groups.append(
            HostGroup(batch_expression(sel), tuple(k for a in chunk for k in by_address[a]), True, stamps_of(sel))
        )
    groups += [HostGroup(batch_expression(sel), tuple(keys), False) for sel, keys in by_selector.items()]
    return groups


def host_slice(series: Iterable[Series], elapsed_s: float | None) -> HostSlice:
    """A host's three vectors out of its group's answer, as its own three queries give them."""
    values: list[Series] = []
    stamps: list[Series] = []
    recent: list[Series] = []
    for s in series:
        if "__name__" in s.labels:
            values.append(s)
        elif SCRAPE_OF in s.labels:
            stamps.append(Series.of({k: v for k, v in s.labels.items() if k != SCRAPE_OF}, s.value, s.at))
        elif "exporter" in s.labels:
            recent.append(s)
    values_answer, stamps_answer, recent_answer = (
        Answer(tuple(f), elapsed_s=elapsed_s) for f in (values, stamps, recent)
    )
    return values_answer, stamps_answer, recent_answer


class HostReads(Coalescer[Host, HostGroup, HostSlice]):
    """Every host read from one query API, coalesced into one batch per tick (module docstring)."""

    api: PrometheusAPI

    def groups(self, members: dict[int, Host]) -> list[HostGroup]:
        return host_groups(members)

    async def run(self, batch: Batch[Host, HostSlice], group: HostGroup) -> dict[int, HostSlice]:
        """As the engines' batch: a group whose hosts hold readings asks its targets' scrape times first,
        then reads only the hosts with a target scraped since (the others get SAME_SCRAPE)."""
        keys = group.keys
        if group.by_address and any(k in self.held for k in keys):
            times = await self.api.query(group.stamps)
            if not times.ok:
                return dict.fromkeys(keys, (times, times, times))
            stamped = _by_address(times.series)
            out: dict[int, HostSlice] = {}
            for k in keys:
                _, stamps, _ = host_slice(stamped.get(address_key(batch.members[k].address), ()), times.elapsed_s)
                if stamps.series and self.held.get(k) == scraped_of(stamps.series):
                    out[k] = (SAME_SCRAPE, stamps, SAME_SCRAPE)
            keys = tuple(k for k in keys if k not in out)
            if not keys:
                return out
            answer = await self.api.query(
                batch_expression(addresses_matcher(address_key(batch.members[k].address) for k in keys))
            )
        else:
            out, answer = {}, await self.api.query(group.expr)
        if not answer.ok:
            return out | dict.fromkeys(keys, (answer, answer, answer))
        if not group.by_address:
            return dict.fromkeys(keys, host_slice(answer.series, answer.elapsed_s))
        read = _by_address(answer.series)
        return out | {
            k: host_slice(read.get(address_key(batch.members[k].address), ()), answer.elapsed_s) for k in keys
        }


def _by_address(series: Iterable[Series]) -> dict[str, list[Series]]:
    """An answer's series by the address their instance label names."""
    out: dict[str, list[Series]] = defaultdict(list)
    for s in series:
        address = instance_address(s.labels.get("instance", ""))
        if address is not None:
            out[address].append(s)
    return out


def host_reads(api: PrometheusAPI) -> HostReads:
    """The API's batch of hosts (one per API, as its engine_reads)."""
    reads = api.host_reads
    if not isinstance(reads, HostReads):
        reads = api.host_reads = HostReads(api, api.reuse_s)
    return reads


@dataclass
class PrometheusHostPoller:
    """Reads one host from the query API; the same `poll` as HostPoller, and `aclose` once at the end.
    Its reading comes from the API's batch of hosts (HostReads). The host's SSH settings are left to its
    actions."""

    host: Host
    api: PrometheusAPI
    engines: Sequence[Engine] = ()
    clock: Callable[[], float] = time.time
    where: str = field(init=False)
    reads: HostReads = field(init=False)
    held: tuple[Scraped, HostSnapshot] | None = field(default=None, init=False)
    """The last snapshot built from its targets' series, with the scrapes it was made of."""

    def __post_init__(self) -> None:
        self.api.acquire()
        self.where = f"{{{host_matchers(self.host)}}}"
        self.engines = [e for e in self.engines if e.host == self.host.name]
        self.reads = host_reads(self.api)
        self.reads.join(id(self), self.host)

    @property
    def shared(self) -> HostReads:
        """The API's batch of hosts: the runtime polls its members in one pass a tick."""
        return self.reads

    async def aclose(self) -> None:
        self.reads.leave(id(self))
        await self.api.release()

    async def close(self) -> None:
        """HostPoller's name for it (the runtime's host loop calls either)."""
        await self.aclose()

    async def poll(self) -> HostSnapshot:
        try:
            (values, stamps, recent), batch = await self.reads.fetch(id(self))
            return await self._snapshot(values, stamps, recent, batch)
        except Exception as exc:  # a collector never takes the console down
            return self._unknown(
                HostState.DEGRADED, f"internal error while reading this host from Prometheus: {exc!r}", time.time()
            )

    def _unknown(self, state: HostState, error: str, at: float, rtt_ms: float | None = None) -> HostSnapshot:
        return HostSnapshot(
            self.host.name,
            self.host.address,
            state,
            error,
            source=f"prometheus {self.api.where}",
            memory_kind=self.host.memory_kind if self.host.memory_kind != "auto" else None,
            rtt_ms=rtt_ms,
            fetched_at=self.clock() - (time.time() - at),
            notes=(f"read from Prometheus {self.api.source.url} by {self.where}",),
        )

    async def _stale(self, target: Target, exporter: str, batch: Batch[Host, HostSlice] | None) -> str:
        job, instance = target
        labels = {"job": job, "instance": instance}
        said = await (batch.scrape_error(labels) if batch is not None else self.api.scrape_error(labels))
        return f"{exporter} ({job} {instance}) stale in Prometheus: its last scrape failed (up == 0)" + (
            f": {said}" if said else ""
        )

    async def _snapshot(
        self, values: Answer, stamps: Answer, recent: Answer, batch: Batch[Host, HostSlice] | None = None
    ) -> HostSnapshot:
        """The snapshot of the host's three vectors (from its batch, or its own three queries); of the same
        scrapes again (SAME_SCRAPE), the last one with the new round trip and sample age."""
        if values.same_scrape:
            if self.held is not None and self.held[0] == scraped_of(stamps.series):
                return self._again(self.held[1], stamps.elapsed_s)
            values, stamps, recent = await self._alone()  # the batch thought it held one: read it on its own
        snapshot = await self._read(values, stamps, recent, batch)
        scraped = scraped_of(stamps.series) if values.ok and stamps.ok and recent.ok else ()
        if scraped:
            self.held = (scraped, snapshot)
            self.reads.held[id(self)] = scraped
        else:  # no scrape time to tell the next scrape by (no `up` of its targets): read whole each tick
            self.held = None
            self.reads.held.pop(id(self), None)
        return snapshot

    def _again(self, snapshot: HostSnapshot, elapsed_s: float | None) -> HostSnapshot:
        """The same reading, its time kept (the scrapes'): LivePool.apply_host tells a repeat by it."""
        at = snapshot.fetched_at - (self.clock() - time.time())
        age = f"sample age {max(0.0, time.time() - at):.1f} s"
        notes = tuple(age if note.startswith("sample age ") else note for note in snapshot.notes)
        rtt = round(elapsed_s * 1000, 1) if elapsed_s is not None else None
        return replace(snapshot, rtt_ms=rtt, notes=notes)

    async def _alone(self) -> HostSlice:
        """The host's three vectors by its own queries."""
        api = self.api
        h = self.host
        return (
            await api.query(host_selection(h)),
            await api.query(host_scrape_times(h)),
            await api.query(recent_exporters(h)),
        )

    async def _read(
        self, values: Answer, stamps: Answer, recent: Answer, batch: Batch[Host, HostSlice] | None
    ) -> HostSnapshot:
        answers = (values, stamps, recent)
        elapsed = [a.elapsed_s for a in answers if a.elapsed_s is not None]
        rtt = round(max(elapsed) * 1000, 1) if elapsed else None
        now = time.time()
        for answer in answers:
            if not answer.ok:
                assert answer.state is not None and answer.error is not None
                return self._unknown(STATES.get(answer.state, HostState.DEGRADED), answer.error, now, rtt)
        ups = {_target(s.labels): s.value for s in values.series if s.labels.get("__name__") == "up"}
        scraped = {_target(s.labels): s.value for s in stamps.series if math.isfinite(s.value)}
        kinds: dict[Target, set[str]] = defaultdict(set)
        fresh: dict[str, list[Series]] = defaultdict(list)
        for s in values.series:
            exporter = exporter_of(s.labels.get("__name__", ""))
            if exporter is not None:
                kinds[_target(s.labels)].add(exporter)
                fresh[exporter].append(s)
        for s in recent.series:
            kinds[_target(s.labels)].add(s.labels.get("exporter", ""))
        if not kinds:
            there = ", ".join(f"{j} {i}" for j, i in sorted(ups)) or "none"
            error = (
                f"no node_exporter, DCGM exporter or nvidia_gpu_exporter series in Prometheus for {self.where} "
                f"(targets there: {there}): Prometheus does not scrape them, or under other labels (give the host "
                "a selector; `poolconsole prometheus-config` writes scrape configs)"
            )
            return self._unknown(HostState.UNREACHABLE, error, now, rtt)
        with_series = {_target(s.labels) for found in fresh.values() for s in found}
        down = sorted(t for t in kinds if ups.get(t) == 0 or (t not in ups and t not in with_series))
        reasons = [
            await self._stale(t, " and ".join(sorted(kinds[t])), batch)
            if t in ups
            else f"{' and '.join(sorted(kinds[t]))} ({t[0]} {t[1]}) is no longer scraped by Prometheus"
            for t in down
        ]
        live = [t for t in kinds if t not in down]
        times = [scraped[t] for t in live if t in scraped]
        if not live:
            at = max((scraped[t] for t in down if t in scraped), default=now)
            return self._unknown(HostState.UNREACHABLE, "; ".join(reasons), at, rtt)
        at = min(times) if times else now
        live_kinds = set().union(*(kinds[t] for t in live))
        notes = [f"read from Prometheus {self.api.source.url} by {self.where}"]
        notes += [f"{' and '.join(sorted(kinds[t]))}: {t[0]} {t[1]}" for t in sorted(live)]
        problems = list(reasons)

        memory = system_memory(fresh[NODE]) if NODE in live_kinds else None
        if memory is None and not any(NODE in kinds[t] for t in down):
            problems.append(f"no node_exporter series for {self.where}: system memory not read")
        gpus: list[GpuReading] = []
        driver: str | None = None
        if DCGM in live_kinds and fresh[DCGM]:
            gpus, mig_notes, driver = dcgm_gpus(fresh[DCGM])
            notes += mig_notes
            if NVSMI in live_kinds:
                notes.append("GPUs from the DCGM exporter (nvidia_gpu_exporter's series there are not read)")
        elif NVSMI in live_kinds and fresh[NVSMI]:
            gpus, driver = nvidia_smi_gpus(fresh[NVSMI])
        elif not any(kinds[t] & {DCGM, NVSMI} for t in down):
            notes.append(f"no GPU exporter (DCGM exporter or nvidia_gpu_exporter) series for {self.where}")

        no_memory = bool(gpus) and all(g.memory_total_bytes is None and g.memory_used_bytes is None for g in gpus)
        kind = self.host.memory_kind if self.host.memory_kind != "auto" else ("unified" if no_memory else "dedicated")
        if kind == "unified" and gpus:
            gpus = [HostPoller._unified(g, memory) for g in gpus]
            if no_memory:
                notes.append("the GPU exporter reports no GPU memory (unified memory): memory from node_exporter")
            if memory and memory.swap_used_bytes:
                notes.append(f"swap in use on a unified-memory host: {units.gib(memory.swap_used_bytes, 1, ' GiB')}")
        age = max(0.0, now - at)
        notes.append(f"sample age {age:.1f} s")
        state = HostState.DEGRADED if problems else HostState.OK
        return HostSnapshot(
            self.host.name,
            self.host.address,
            state,
            "; ".join(problems) or None,
            source=f"prometheus {self.api.where}",
            memory_kind=kind,
            gpus=tuple(gpus),
            system_memory=memory,
            rtt_ms=rtt,
            fetched_at=self.clock() - (now - at),
            driver=driver,
            notes=tuple(notes),
            engine_gpus={e.name: list(e.gpus) for e in self.engines if e.gpus},
        )
