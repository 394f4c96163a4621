"""Simulated hosts over real SSH: an in-process asyncssh server per host on 127.0.0.1, answering the
exact commands the host collectors send (nvidia-smi queries, /proc/meminfo, macOS tools) with values
consistent with the engines' load: VRAM = weights + KV reservation, utilisation and power follow
the batch, the GB10 answers [N/A] for memory like the real one.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import hashlib
import re
import shlex
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import asyncssh

from poolconsole.collect import containers
from poolconsole.collect.hosts import nvidia_smi as nv
from poolconsole.collect.hosts import owners, stream, xid
from poolconsole.collect.hosts import poll as host_cmds
from poolconsole.sim import logs as sim_logs
from poolconsole.sim.demo_pool import EngineSpec, HostSpec
from poolconsole.sim.server import SimEngine

BROKEN_PROFILE = "fp8-tp4"
NO_SPEC_ENV = "POOL_SPEC"
"""A profile file with POOL_SPEC=off starts a speculative engine without its draft (no spec_decode counters,
plain decode speed)."""
NO_SPEC_SUFFIX = "nospec"
LOOP = re.compile(rf"while :; do (?P<batch>.+;) echo {stream.SAMPLE}; sleep (?P<interval>[0-9.]+); done")
HW_SLOWDOWN = 0x8
HW_THERMAL_SLOWDOWN = 0x40
"""clocks_event_reasons bits (nvml.h's nvmlClocksEventReason*), as the gpu-fault scenario reports them."""
MAX_COMMANDS = 1000
"""Commands a simulated host remembers (tests read the latest; the demo runs for days)."""
GIB = 1024**3
MIB = 1024**2


@dataclass(frozen=True)
class GpuFault:
    """`--scenario gpu-fault`: one GPU's Xid in the kernel log and a throttle reason held active."""

    gpu: int
    xid: int
    reasons: int
    at: float
    """The host's uptime (s) when the kernel logged the Xid."""
    line: str


@dataclass
class GpuState:
    index: int
    uuid: str
    used_mib: float
    util: float
    processes: list[tuple[int, str, float]] = field(default_factory=list)
    """(pid, engine, MiB) of each engine's process on this GPU."""


def container_id(name: str) -> str:
    """A simulated engine's docker container id (64 hex digits, stable per name)."""
    return hashlib.sha256(name.encode()).hexdigest()


class SimHost:
    """One simulated machine: its GPUs derived from the engines placed on it."""

    def __init__(self, spec: HostSpec, engines: list[SimEngine], index: int) -> None:
        self.spec = spec
        self.engines = engines
        self.index = index
        self.server: asyncssh.SSHAcceptor | None = None
        self.port = 0
        self._conns: set[asyncssh.SSHServerConnection] = set()
        """The SSH sessions open now (cut when the host goes down); each leaves as it closes. Kept forever, every
        reconnect of a poller held a whole connection (ciphers, buffers, channels): the demo console's RSS grew
        all day (issue 35 item 9)."""
        self.files: dict[str, str] = {}
        self.profiles: dict[str, dict[str, str]] = {}
        self.commands: deque[str] = deque(maxlen=MAX_COMMANDS)
        """The action commands this host ran (restarts, profile writes and reads), as received: the latest
        MAX_COMMANDS (the containers' records are read every minute, for as long as the demo runs)."""
        self.booted = time.monotonic() - 86400.0
        """Up a day when the demo starts (the kernel log's stamps are seconds since boot)."""
        self.fault: GpuFault | None = None
        self.ecc_uncorrected: dict[int, int] = {}
        """GPU -> the uncorrected ECC errors it reports (SimPool.ecc_fault); the others report none ([N/A])."""
        self.pcie_width: dict[int, int] = {}
        """GPU -> its PCIe link's width when below x16 (SimPool.pcie_fault: a link trained down)."""
        self.tailscale: str | None = None
        """What `tailscale status --json` prints on this host; None: tailscale is not installed (the demo runs
        no tailnet; tests give a captured document)."""

    # -- what the machine reports ------------------------------------------------------------------
    def gpu_states(self) -> list[GpuState]:
        states = [
            GpuState(i, f"GPU-{self.index:04x}{i:04x}-5eed-4000-8000-{self.index:012x}", 300.0, 0.0)
            for i in range(len(self.spec.gpus))
        ]
        for n, engine in enumerate(self.engines):
            spec: EngineSpec = engine.spec
            gpus = spec.gpus or ((0,) if states else ())
            if not gpus or engine.site is None or engine.loading:
                continue
            busy = 0.0
            if engine.load is not None:
                busy = min(1.0, len(engine.load.running) / max(1, min(8, engine.load.profile.max_seqs)) * 1.2)
            share = (spec.weights_gib + spec.kv_gib) * 1024 / len(gpus)
            for g in gpus:
                if g < len(states):
                    states[g].used_mib += share
                    states[g].util = max(states[g].util, busy * 100)
                    states[g].processes.append((4000 + self.index * 10 + n, spec.name, share))
        return states

    def bus_id(self, gpu: int) -> str:
        return f"00000000:{0x41 + gpu * 0x20:02X}:00.0"

    def uptime(self) -> float:
        return time.monotonic() - self.booted

    def gpu_fault(self, gpu: int, code: int, reasons: int, detail: str) -> None:
        """The kernel logs `NVRM: Xid` for `gpu` (`detail` after its code, as the driver writes it) and the
        GPU holds its clocks down for `reasons` from now on."""
        bus = self.bus_id(gpu)[4:-2]  # 00000000:41:00.0 -> 0000:41:00, as the Xid line names it
        at = self.uptime()
        line = f"[{at:12.6f}] {self.spec.name} kernel: NVRM: Xid (PCI:{bus}): {code}, {detail}"
        self.fault = GpuFault(gpu, code, reasons, at, line)

    def kernel_xids(self) -> str:
        """What xid.COMMAND prints: the journal's Xid lines of the last 5 minutes, then /proc/uptime."""
        uptime = self.uptime()
        fault = self.fault
        lines = [fault.line] if fault is not None and uptime - fault.at <= xid.WINDOW_S else []
        return "".join(f"{ln}\n" for ln in lines) + f"{uptime:.2f} {uptime * 15:.2f}\n"

    def engines_memory_bytes(self) -> int:
        return int(sum((e.spec.weights_gib + e.spec.kv_gib) * GIB for e in self.engines if e.site is not None))

    def nvidia_rows(self, fields: tuple[str, ...]) -> tuple[str, int]:
        known = set(nv.FULL_FIELDS)
        for name in fields:
            if name not in known:
                return f'Field "{name}" is not a valid field to query.\n\n', 2
        lines = []
        unified = self.spec.platform == "nvidia-unified"
        for gpu, state in zip(self.spec.gpus, self.gpu_states(), strict=True):
            total = gpu.memory_mib
            power = gpu.idle_w + (gpu.max_w - gpu.idle_w) * state.util / 100
            values = {
                "index": str(state.index), "uuid": state.uuid, "name": gpu.name,
                "memory.total": "[N/A]" if unified or total is None else str(total),
                "memory.used": "[N/A]" if unified or total is None else str(int(min(state.used_mib, total))),
                "memory.free": "[N/A]" if unified or total is None else str(int(max(0, total - state.used_mib))),
                "memory.reserved": "[N/A]" if unified or total is None else "434",
                "utilization.gpu": str(int(state.util)), "temperature.gpu": str(int(32 + state.util * 0.45)),
                "power.draw": f"{power:.2f}", "power.limit": "[N/A]" if gpu.power_limit_w is None else
                f"{gpu.power_limit_w:.2f}",
                "clocks.current.sm": str(int(210 + state.util * 18)), "clocks.current.memory": "[N/A]" if unified
                else "9751", "pcie.link.gen.current": "[N/A]" if unified else "4",
                "pcie.link.width.current": "[N/A]" if unified else str(self.pcie_width.get(state.index, 16)),
                "pci.bus_id": self.bus_id(state.index), "pcie.link.gen.max": "[N/A]" if unified else "4",
                "pcie.link.width.max": "[N/A]" if unified else "16",
                "clocks_event_reasons.active": f"0x{self.reasons(state):016X}",
                "ecc.errors.uncorrected.volatile.total": str(self.ecc_uncorrected[state.index])
                if state.index in self.ecc_uncorrected else "[N/A]",  # GeForce and the GB10: no ECC
                "remapped_rows.pending": "[N/A]", "retired_pages.pending": "[N/A]",
            }  # fmt: skip
            lines.append(", ".join(values[f] for f in fields))
        return "\n".join(lines) + "\n", 0

    def reasons(self, state: GpuState) -> int:
        """Idle (0x1) at rest, else none but the fault's."""
        fault = self.fault.reasons if self.fault is not None and self.fault.gpu == state.index else 0
        return fault | (0x1 if state.util == 0 else 0)

    def apps_rows(self, fields: tuple[str, ...]) -> tuple[str, int]:
        lines = []
        for state in self.gpu_states():
            for pid, _, mib in state.processes:
                values = {
                    "gpu_uuid": state.uuid,
                    "pid": str(pid),
                    "process_name": "python3",
                    "used_memory": str(int(mib)),
                    "used_gpu_memory": str(int(mib)),
                }
                lines.append(", ".join(values.get(f, "[N/A]") for f in fields))
        return ("\n".join(lines) + "\n") if lines else "", 0

    def identities(self) -> str:
        """What `owners.IDENTIFY` prints on a host running each engine in a docker container: each compute
        process's cgroup names its container's id, and `docker ps` maps ids to names."""
        lines = []
        for state in self.gpu_states():
            for pid, engine, _ in state.processes:
                lines.append(f"pid {pid} 0::/system.slice/docker-{container_id(engine)}.scope ")
        lines += [f"ctr {container_id(e.spec.name)} {e.spec.name}" for e in self.engines]
        return "\n".join(lines) + "\n"

    def meminfo(self) -> str:
        total = self.spec.ram_gib * GIB
        used = 6 * GIB + (self.engines_memory_bytes() if self.spec.platform == "nvidia-unified" else 2 * GIB)
        swap_used = max(0, used - int(total * 0.97))
        available = max(total - used, int(total * 0.03))
        kib = {
            "MemTotal": total,
            "MemFree": available // 2,
            "MemAvailable": available,
            "Buffers": 200 * MIB,
            "Cached": available // 3,
            "SwapCached": 0,
            "SwapTotal": 8 * GIB,
            "SwapFree": 8 * GIB - swap_used,
        }
        return "".join(f"{k + ':':<16}{v // 1024:>8} kB\n" for k, v in kib.items())

    def vm_stat(self) -> str:
        page = 16384
        total = self.spec.ram_gib * GIB
        used = self.engines_memory_bytes() + 24 * GIB
        free = max(0, total - used) // page
        return (
            f"Mach Virtual Memory Statistics: (page size of {page} bytes)\n"
            f"Pages free:                             {free // 2}.\nPages active:                           "
            f"{used // page}.\nPages inactive:                         {free // 2}.\n"
            f"Pages speculative:                           0.\nPages wired down:                       "
            f"{(8 * GIB) // page}.\nPages purgeable:                              0.\n"
        )

    def macmon(self) -> str:
        import json

        busy = 0.0
        for e in self.engines:
            if e.load is not None and e.site is not None:
                busy = max(busy, min(1.0, len(e.load.running) / 2))
        total = self.spec.ram_gib * GIB
        used = self.engines_memory_bytes() + 24 * GIB
        return (
            json.dumps(
                {
                    "all_power": 40 + 120 * busy,
                    "ane_power": 0.0,
                    "cpu_power": 8.0,
                    "gpu_power": 6 + 110 * busy,
                    "gpu_usage": [1398, busy],
                    "memory": {"ram_total": total, "ram_usage": used, "swap_total": 0, "swap_usage": 0},
                    "temp": {"cpu_temp_avg": 48.0, "gpu_temp_avg": 44 + 20 * busy},
                    "timestamp": "2026-11-29T00:00:00+00:00",
                }
            )
            + "\n"
        )

    def listening(self) -> str:
        """`ss -ltnH` as iproute2 prints it: the engines this host serves, on the ports the demo listens on."""
        return "".join(f"LISTEN 0      4096       {e.listens_on}:{e.port} 0.0.0.0:*\n" for e in self.engines if e.port)

    def probe(self) -> str:
        if self.spec.platform.startswith("nvidia"):
            return "nvidia-smi\nLinux\n"
        if self.spec.platform == "apple":
            return "macmon\nDarwin\n"
        return "Linux\n"

    # -- the SSH server -------------------------------------------------------------------------------
    def answer(self, command: str) -> tuple[str, str, int]:
        if host_cmds.MARK in command:  # a batch: `cmd 2>&1; echo MARK$?;` repeated
            pieces: list[str] = []
            for part in command.split(f"; echo {host_cmds.MARK}$?;"):
                part = part.strip().removesuffix("2>&1").strip()
                if part:
                    answer, error, status = self.answer(part)
                    pieces.append(f"{answer}{error}{host_cmds.MARK}{status}\n")
            return "".join(pieces), "", 0
        fixed: dict[str, Callable[[], str]] = {
            host_cmds.PROBE: self.probe,
            host_cmds.MEMINFO: self.meminfo,
            host_cmds.VM_STAT: self.vm_stat,
            host_cmds.SYSCTL: lambda: f"{self.spec.ram_gib * GIB}\n",
            host_cmds.MACMON: self.macmon,
        }
        if command in fixed and (command != host_cmds.MEMINFO or self.spec.platform != "apple"):
            return fixed[command](), "", 0
        if command == "true":
            return "", "", 0
        if command == host_cmds.LISTENING and self.spec.platform != "apple":  # macOS has no `ss`
            return self.listening(), "", 0
        if command == xid.COMMAND and self.spec.platform != "apple":
            return self.kernel_xids(), "", 0
        if command == owners.IDENTIFY:
            return self.identities(), "", 0
        if command == "tailscale status --json":
            if self.tailscale is None:
                return "", "sh: 1: tailscale: not found\n", 127
            return self.tailscale, "", 0
        logged = sim_logs.answer(command, self.container_log)
        if logged is not None:  # an engine's log (collect.engine_logs), as `docker logs` prints it
            self.commands.append(command)
            return logged
        handled = self.control(command)
        if handled is not None:
            return handled
        nvidia = self.spec.platform.startswith("nvidia")
        if nvidia and command.startswith("nvidia-smi --query-gpu="):
            fields = tuple(command.split("=", 1)[1].split(" ")[0].split(","))
            out, code = self.nvidia_rows(fields)
            return out, "", code
        if nvidia and command.startswith("nvidia-smi --query-compute-apps="):
            fields = tuple(command.split("=", 1)[1].split(" ")[0].split(","))
            out, code = self.apps_rows(fields)
            return out, "", code
        return "", f"sh: 1: {command.split()[0]}: not found\n", 127

    def container_log(self, name: str) -> sim_logs.ContainerLog | None:
        found = next((e for e in self.engines if e.spec.name == name), None)
        return found.log if found is not None else None

    async def _follow(self, process: asyncssh.SSHServerProcess[str], name: str, tail: int | None) -> None:
        """`docker logs --follow`: the newest lines, then each new one until the channel closes."""
        log = self.container_log(name)
        if log is None:
            process.stderr.write(f"Error response from daemon: No such container: {name}\n")
            process.exit(1)
            return
        process.stdout.write(sim_logs.join(log.select(tail, None)))
        seen = log.written
        with contextlib.suppress(BrokenPipeError, ConnectionError, asyncssh.Error):
            while not process.is_closing():
                await asyncio.sleep(0.2)
                new, seen = log.after(seen)
                if new:
                    process.stdout.write(sim_logs.join(new))
        process.exit(0)

    def control(self, command: str, stdin: str = "") -> tuple[str, str, int] | None:
        """The actions' commands, parsed the way a shell would and acted on: `docker restart NAME` restarts
        the simulated engine (counters reset); writing a profile file switches its profile on the next
        restart (speed and memory follow the profile); a profile the engine cannot load keeps it down."""
        try:
            words = shlex.split(command)
        except ValueError:
            return None
        if words[:1] in (["docker"], ["umask"], ["cat"]):
            self.commands.append(command)
        if words[:4] == ["docker", "inspect", "--format", containers.FORMAT] and len(words) == 5:
            found = next((e for e in self.engines if e.spec.name == words[4]), None)
            if found is None:
                return "", f"Error: No such object: {words[4]}\n", 1
            started = dt.datetime.fromtimestamp(found.wall_start, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
            return f"{found.restarts} {started}\n", "", 0
        if words[:2] == ["docker", "restart"] and len(words) == 3:
            engine = next((e for e in self.engines if e.spec.name == words[2]), None)
            if engine is None:
                return "", f"Error response from daemon: No such container: {words[2]}\n", 1
            profile = self.profiles.get(engine.spec.name)
            if profile is not None and profile.get("POOL_PROFILE") == BROKEN_PROFILE:
                engine.restart(loading_s=3600.0)  # the weights never load: it never serves
            else:
                engine.restart(loading_s=2.0)
                if engine.load is not None and profile is not None:
                    engine.load.scale = float(profile.get("POOL_SPEED", "1.0"))
                    drafts = engine.load.profile.spec_accept is not None
                    engine.load.spec_on = drafts and profile.get(NO_SPEC_ENV) != "off"
            return f"{words[2]}\n", "", 0
        if words[:5] == ["umask", "077", "&&", "head", "-c"] and "mv" in words:
            text = stdin[: int(words[5])]
            if len(text.encode()) != int(words[5]):
                return "", f"poolconsole: {words[-1]} arrived incomplete over stdin\n", 3
            target = words[words.index("mv") + 3]
            values = dict(
                shlex.split(line)[0].split("=", 1)
                for line in text.splitlines()
                if line and not line.startswith("#") and "=" in line
            )
            self.files[target] = text
            engine_name = Path(target).stem
            self.profiles[engine_name] = values
            return "", "", 0
        if words[:1] == ["cat"] and len(words) == 2 and words[1] in self.files:
            return self.files[words[1]], "", 0
        return None

    async def _process(self, process: asyncssh.SSHServerProcess[str]) -> None:
        command = process.command or ""
        looped = LOOP.fullmatch(command)
        if looped is not None:  # the telemetry loop (collect.hosts.stream): a sample per interval until closed
            with contextlib.suppress(BrokenPipeError, ConnectionError, asyncssh.Error):
                while not process.is_closing():
                    process.stdout.write(self.answer(looped["batch"])[0] + stream.SAMPLE + "\n")
                    await asyncio.sleep(float(looped["interval"]))
            return
        followed = sim_logs.follow_request(command)
        if followed is not None:
            await self._follow(process, *followed)
            return
        if command.startswith("umask 077 && head -c "):  # a profile file written over stdin
            stdin = await process.stdin.read()
            stdout, stderr, code = self.control(command, stdin) or ("", "unexpected write\n", 2)
        else:
            stdout, stderr, code = self.answer(command)
        process.stdout.write(stdout)
        if stderr:
            process.stderr.write(stderr)
        process.exit(code)

    async def start(self, host_key: asyncssh.SSHKey, authorized: Path, port: int = 0) -> None:
        host = self

        class Server(asyncssh.SSHServer):
            conn: asyncssh.SSHServerConnection | None = None

            def connection_made(self, conn: asyncssh.SSHServerConnection) -> None:
                self.conn = conn
                host._conns.add(conn)

            def connection_lost(self, exc: Exception | None) -> None:
                if self.conn is not None:
                    host._conns.discard(self.conn)
                    self.conn = None

        self.server = await asyncssh.listen(
            "127.0.0.1",
            port,
            server_host_keys=[host_key],
            authorized_client_keys=str(authorized),
            process_factory=self._process,
            server_factory=Server,
            encoding="utf-8",
        )
        self.port = self.server.get_port()

    async def stop(self) -> None:
        """The host goes away: the listener closes and every session is cut."""
        if self.server is not None:
            self.server.close()
            with contextlib.suppress(Exception):
                await self.server.wait_closed()
            self.server = None
        for conn in list(self._conns):
            conn.abort()
        self._conns.clear()
