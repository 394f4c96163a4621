"""One poll of one host: the probe ladder (detected once, cached, re-probed after a failure), then the
fixed commands of the source that answered, parsed into a HostSnapshot."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, replace

from poolconsole.collect.hosts import nvidia_smi as nv
from poolconsole.collect.hosts import owners, systems, xid
from poolconsole.collect.hosts.stream import SampleStream, loop_command
from poolconsole.collect.prom import ParseError
from poolconsole.collect.ssh import CommandResult, HostConnection, SSHFailure
from poolconsole.config.models import Engine, Host
from poolconsole.model import units
from poolconsole.model.hosts import GpuProcess, GpuReading, HostSnapshot, HostState, SystemMemory

PROBE = 'for t in nvidia-smi amd-smi rocm-smi macmon; do command -v "$t" >/dev/null 2>&1 && echo "$t"; done; uname -s'
MEMINFO = "cat /proc/meminfo"
AMD_SMI = "amd-smi metric --json"
ROCM_SMI = "rocm-smi --showmeminfo vram --showuse --showtemp --showpower --showproductname --json"
SYSCTL = "sysctl -n hw.memsize"
VM_STAT = "vm_stat"
MACMON = "macmon pipe -s 1 -i 200"
LISTENING = "ss -ltnH"
"""The host's listening TCP sockets (ops.exposure: where an engine listens)."""
NOT_FOUND = 127
MARK = "@@poolconsole-exit:"


@dataclass
class Probe:
    tools: frozenset[str]
    system: str

    @property
    def source(self) -> str:
        if "nvidia-smi" in self.tools:
            return "nvidia-smi"
        if "amd-smi" in self.tools:
            return "amd-smi"
        if "rocm-smi" in self.tools:
            return "rocm-smi"
        if self.system == "Darwin":
            return "macos"
        return "meminfo"


def parse_probe(text: str) -> Probe:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    system = lines[-1] if lines else ""
    return Probe(frozenset(lines[:-1]), system)


class HostPoller:
    """Polls one host over its persistent SSH connection."""

    def __init__(
        self,
        host: Host,
        conn: HostConnection,
        engines: list[Engine] | None = None,
        interval_s: float | None = None,
        wakers: set[asyncio.Future[None]] | None = None,
    ) -> None:
        """With `interval_s`, the batch of commands runs as a remote loop streaming a sample every
        interval (collect.hosts.stream); without it, one exec per poll. `wakers` is the console's set of
        waits that `r` releases: a streamed poller keeps one future there, and once it is released takes
        its next sample, or the one it is waiting for, the ordinary way at once (the loop goes on)."""
        self.host = host
        self.conn = conn
        self.interval_s = interval_s
        self.stream: SampleStream | None = None
        self.seen = 0
        self.wakers = wakers
        self.woken: asyncio.Future[None] | None = None
        self.engines = [e for e in (engines or []) if e.host == host.name]
        self.probe: Probe | None = None
        self.fields: tuple[str, ...] = nv.FULL_FIELDS
        self.apps_fields: tuple[str, ...] = nv.APPS_FIELDS
        self.identities: dict[int, frozenset[str]] = {}
        """PID -> the unit / container names its cgroup leads to, for processes on shared GPUs (read
        once per new PID: owners.IDENTIFY)."""

    def _snapshot(self, state: HostState, error: str | None, **kw: object) -> HostSnapshot:
        return HostSnapshot(self.host.name, self.host.address, state, error, fetched_at=time.time(), **kw)  # type: ignore[arg-type]

    async def poll(self) -> HostSnapshot:
        try:
            if self.probe is None:
                self.probe = parse_probe((await self.conn.run(PROBE)).stdout)
            return await self._read(self.probe)
        except SSHFailure as failure:
            self.probe = None  # re-probe after any failure
            await self.close()
            return self._snapshot(failure.state, failure.message)
        except Exception as exc:  # a collector never takes the console down
            self.probe = None
            await self.close()
            return self._snapshot(HostState.DEGRADED, f"internal error reading this host: {type(exc).__name__}: {exc}")

    async def _read(self, probe: Probe) -> HostSnapshot:
        source = probe.source
        if source == "nvidia-smi":
            return await self._nvidia(probe)
        if source in ("amd-smi", "rocm-smi"):
            return await self._amd(source)
        if source == "macos":
            return await self._macos(probe)
        meminfo = await self.conn.run(MEMINFO)
        memory, notes = self._meminfo(meminfo)
        state = HostState.OK if memory is not None else HostState.DEGRADED
        return self._snapshot(
            state,
            None if memory else "; ".join(notes),
            source="meminfo",
            memory_kind=self._kind(False),
            system_memory=memory,
            rtt_ms=round(meminfo.elapsed_s * 1000, 1),
            notes=tuple(notes),
        )

    def _kind(self, detected_unified: bool) -> str:
        if self.host.memory_kind != "auto":
            return self.host.memory_kind
        return "unified" if detected_unified else "dedicated"

    def _meminfo(self, result: CommandResult) -> tuple[SystemMemory | None, list[str]]:
        if result.exit_status not in (0, None):
            return None, [f"/proc/meminfo unreadable: {result.stderr.strip()[:160]}"]
        try:
            return systems.parse_meminfo(result.stdout), []
        except ParseError as exc:
            return None, [str(exc)]

    async def close(self) -> None:
        if self.stream is not None:
            await self.stream.close()
            self.stream = None

    async def _sample(self, batch: str) -> tuple[str, float] | None:
        """The next sample of this batch's remote loop (started, or restarted for a new batch, here) and the
        time its first sample took; None when the stream ended or went quiet (it is dropped)."""
        assert self.interval_s is not None
        if self.stream is None or self.stream.batch != batch or self.stream.closed:
            await self.close()
            self.stream = SampleStream(batch, await self.conn.start(loop_command(batch, self.interval_s)))
            self.seen = 0
        text = await self.stream.next(self.seen, self.interval_s + self.conn.timeout_s)
        if text is None:
            if self.woken is not None and self.woken.done() and not self.stream.closed:
                return None  # `r` cut the wait short: the caller samples now, the loop goes on
            await self.close()
            return None
        self.seen = self.stream.count
        return text, self.stream.first_after_s or 0.0

    def _asked_now(self) -> bool:
        """True once `r` released this poller's future among `wakers` (a new one takes its place)."""
        woken = self.woken
        if self.wakers is None or self.interval_s is None or (woken is not None and not woken.done()):
            return False
        if woken is not None:
            self.wakers.discard(woken)
        self.woken = asyncio.get_running_loop().create_future()
        self.woken.add_done_callback(self._wake_stream)
        self.wakers.add(self.woken)
        return woken is not None

    def _wake_stream(self, _: asyncio.Future[None]) -> None:
        if self.stream is not None:
            self.stream.wake()

    async def _batch(self, commands: list[str]) -> list[CommandResult]:
        """Several fixed commands in one exec (one SSH channel per poll, not one per command), or one
        sample of their remote loop; each one's output (stderr folded in) and exit status come back
        separately."""
        joined = " ".join(f"{c} 2>&1; echo {MARK}$?;" for c in commands)
        sampled = await self._sample(joined) if self.interval_s is not None and not self._asked_now() else None
        if sampled is not None:
            stdout, stderr, elapsed = sampled[0], "", sampled[1]
        else:
            self._asked_now()  # this exec answers an `r` that cut the stream's wait short
            started = time.monotonic()
            result = await self.conn.run(joined)
            stdout, stderr, elapsed = result.stdout, result.stderr, time.monotonic() - started
        out: list[CommandResult] = []
        lines: list[str] = []
        for line in stdout.splitlines():
            if line.startswith(MARK):
                status = line[len(MARK) :].strip()
                out.append(
                    CommandResult(
                        commands[len(out)],
                        int(status) if status.isdigit() else None,
                        "\n".join(lines) + ("\n" if lines else ""),
                        "",
                        elapsed,
                    )
                )
                lines = []
                if len(out) == len(commands):
                    break
            else:
                lines.append(line)
        while len(out) < len(commands):  # the batch was cut short: say so for each missing command
            out.append(CommandResult(commands[len(out)], None, "\n".join(lines), stderr, elapsed))
            lines = []
        return out

    def _fix_fields(self, result: CommandResult, apps: CommandResult, notes: list[str]) -> bool:
        """nvidia-smi fails a whole query for one field the driver does not know: drop it; True = run again."""
        changed = False
        output = result.stdout + result.stderr
        if result.exit_status not in (0, None) and "is not a valid field" in output:
            bad = nv.rejected_field(output)
            if bad in self.fields:
                self.fields = tuple(f for f in self.fields if f != bad)
                notes.append(f"driver rejects nvidia-smi field {bad!r}: queried without it")
                changed = True
            elif self.fields != nv.MINIMAL_FIELDS:
                self.fields = nv.MINIMAL_FIELDS
                notes.append("driver rejected the query: fell back to the minimal field set")
                changed = True
        if (
            apps.exit_status not in (0, None)
            and "is not a valid field" in apps.stdout + apps.stderr
            and self.apps_fields != nv.APPS_FALLBACK
        ):
            self.apps_fields = nv.APPS_FALLBACK
            changed = True
        return changed

    async def _nvidia(self, probe: Probe) -> HostSnapshot:
        notes: list[str] = []
        for _ in range(len(nv.FULL_FIELDS)):
            gpu_result, apps_result, meminfo, xids = await self._batch(
                [nv.query_gpu_command(self.fields), nv.query_apps_command(self.apps_fields), MEMINFO, xid.COMMAND]
            )
            if not self._fix_fields(gpu_result, apps_result, notes):
                break
        memory, mem_notes = self._meminfo(meminfo)
        notes += mem_notes
        if gpu_result.exit_status == NOT_FOUND:
            self.probe = None
            return self._snapshot(
                HostState.DEGRADED,
                "nvidia-smi is gone from the host (re-probing)",
                system_memory=memory,
                source="meminfo",
                notes=tuple(notes),
            )
        if gpu_result.exit_status not in (0, None):
            message = (gpu_result.stdout + gpu_result.stderr).strip().splitlines()
            return self._snapshot(
                HostState.DEGRADED,
                f"nvidia-smi failed (exit {gpu_result.exit_status}): {message[0][:200] if message else ''}",
                system_memory=memory,
                source="meminfo" if memory else None,
                notes=tuple(notes),
            )
        parsed = nv.parse_query_gpu(gpu_result.stdout, self.fields)
        processes = (
            nv.parse_compute_apps(apps_result.stdout, self.apps_fields) if apps_result.exit_status in (0, None) else ()
        )
        kind = self._kind(parsed.unified)
        logged = xid.parse(xids.stdout)  # the kernel's Xid lines of the last minutes, by PCI address
        gpus = [replace(g, xids=xid.for_gpu(logged, g.pci_bus_id)) for g in parsed.gpus]
        if kind == "unified":
            gpus = [self._unified(g, memory) for g in gpus]
            if parsed.unified:
                notes.append("GPU memory reads [N/A] (unified memory): memory from /proc/meminfo")
            if memory and memory.swap_used_bytes:
                notes.append(f"swap in use on a unified-memory host: {units.gib(memory.swap_used_bytes, 1, ' GiB')}")
        if not gpus:
            notes.append("nvidia-smi listed no GPU")
        processes, engine_gpus, map_notes = await self._map_engines(gpus, processes)
        notes += map_notes
        state = HostState.OK if gpus and memory is not None else HostState.DEGRADED
        return self._snapshot(
            state,
            None if state is HostState.OK else "; ".join(notes) or None,
            source="nvidia-smi",
            memory_kind=kind,
            gpus=tuple(gpus),
            processes=processes,
            system_memory=memory,
            rtt_ms=round(meminfo.elapsed_s * 1000, 1),
            notes=tuple(notes),
            engine_gpus=engine_gpus,
        )

    @staticmethod
    def _unified(gpu: GpuReading, memory: SystemMemory | None) -> GpuReading:
        if memory is None or memory.total_bytes is None:
            return replace(gpu, memory_source="system")
        used = memory.total_bytes - memory.available_bytes if memory.available_bytes is not None else None
        return replace(
            gpu,
            memory_total_bytes=memory.total_bytes,
            memory_used_bytes=used,
            memory_free_bytes=(memory.available_bytes),
            memory_source="system",
        )

    async def _map_engines(
        self, gpus: list[GpuReading], processes: tuple[GpuProcess, ...]
    ) -> tuple[tuple[GpuProcess, ...], dict[str, list[int]], list[str]]:
        """Each process's engine: by the config where one engine may use its GPU, by the process's cgroup
        where several may (read once for each new PID on such a GPU), otherwise unknown, with a note."""
        notes: list[str] = []
        shared = owners.shared(self.engines, gpus)
        on_shared = {g.uuid for g in gpus if g.index in shared and g.uuid}
        pids = {p.pid for p in processes if p.pid is not None and p.gpu_uuid in on_shared}
        self.identities = {pid: names for pid, names in self.identities.items() if pid in pids}
        new = pids - self.identities.keys()
        if new:
            found: dict[int, frozenset[str]] = {}
            try:
                found = owners.parse_identities((await self.conn.run(owners.IDENTIFY)).stdout)
            except SSHFailure as failure:  # not retried for these PIDs: a poll is never slowed twice by it
                notes.append(f"could not read the cgroups of the processes on shared GPUs: {failure}")
            self.identities |= {pid: found.get(pid, frozenset()) for pid in new}
        mapped, engine_gpus, map_notes = owners.map_processes(self.engines, gpus, processes, self.identities)
        return mapped, engine_gpus, notes + map_notes

    async def _amd(self, source: str) -> HostSnapshot:
        command = AMD_SMI if source == "amd-smi" else ROCM_SMI
        result, meminfo = await self._batch([command, MEMINFO])
        memory, notes = self._meminfo(meminfo)
        try:
            gpus = (
                systems.parse_amd_smi(result.stdout) if source == "amd-smi" else systems.parse_rocm_smi(result.stdout)
            )
        except ParseError as exc:
            if result.exit_status == NOT_FOUND:
                self.probe = None
            return self._snapshot(
                HostState.DEGRADED, f"{source}: {exc}", system_memory=memory, source="meminfo" if memory else None
            )
        return self._snapshot(
            HostState.OK if gpus else HostState.DEGRADED,
            None if gpus else f"{source} listed no GPU",
            source=source,
            memory_kind=self._kind(False),
            gpus=gpus,
            system_memory=memory,
            rtt_ms=round(meminfo.elapsed_s * 1000, 1),
            notes=tuple(notes),
        )

    async def _macos(self, probe: Probe) -> HostSnapshot:
        sysctl, vm_stat = await self._batch([SYSCTL, VM_STAT])
        notes: list[str] = []
        try:
            memory = systems.parse_macos(sysctl.stdout, vm_stat.stdout)
        except ParseError as exc:
            return self._snapshot(HostState.DEGRADED, str(exc), source="macos", memory_kind="unified")
        gpus: tuple[GpuReading, ...] = ()
        if "macmon" in probe.tools:
            macmon = await self.conn.run(MACMON)
            try:
                mm_memory, gpu = systems.parse_macmon(macmon.stdout)
                gpus = (gpu,)
                memory = replace(
                    memory, swap_used_bytes=mm_memory.swap_used_bytes, swap_total_bytes=mm_memory.swap_total_bytes
                )
            except ParseError as exc:
                notes.append(str(exc))
        else:
            notes.append("install macmon for GPU power and utilisation (no sudo needed)")
        total, available = memory.total_bytes, memory.available_bytes
        used = total - available if total is not None and available is not None else None
        if not gpus:
            gpus = (
                GpuReading(
                    0, "Apple GPU", None, memory.total_bytes, used, None, None, None, None, memory_source="system"
                ),
            )
        if memory.swap_used_bytes:
            notes.append(f"swap in use on a unified-memory host: {units.gib(memory.swap_used_bytes, 1, ' GiB')}")
        return self._snapshot(
            HostState.OK,
            None,
            source="macos",
            memory_kind="unified",
            gpus=gpus,
            system_memory=memory,
            rtt_ms=round(sysctl.elapsed_s * 1000, 1),
            notes=tuple(notes),
        )
