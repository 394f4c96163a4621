"""`poolconsole demo`'s simulated pool on 127.0.0.1: its engines and hosts, the load clock and the scenario
driver. Its hosts.toml is written by sim.demo_config; running it alone or beside the console, sim.demo_run."""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
import time
from pathlib import Path

import asyncssh
import httpx

from poolconsole.collect.tasks import reap
from poolconsole.sim.demo_config import DEMO_KEY_ENV as DEMO_KEY_ENV  # re-exported: the demo's callers read it
from poolconsole.sim.demo_config import KEYLESS_ENGINE as KEYLESS_ENGINE
from poolconsole.sim.demo_config import config_toml
from poolconsole.sim.demo_files import SCENARIOS as SCENARIOS  # the scenarios it plays, re-exported
from poolconsole.sim.demo_pool import EngineSpec, HostSpec, pool
from poolconsole.sim.hosts import (
    HW_SLOWDOWN,
    HW_THERMAL_SLOWDOWN,
    SimHost,
)
from poolconsole.sim.logs import OOM_LINE, vllm_line
from poolconsole.sim.server import SimEngine

TICK_S = 0.1
STATS_EVERY_S = 10.0
"""How often a simulated vLLM logs its throughput line, as vLLM does."""
OOM_ENGINE = "qwen3-next-80b"
"""`--scenario oom`: the engine that runs out of GPU memory under load (TP=4 on 24 GB cards)."""
WEDGE_ENGINE = "qwen3-30b-a3b"
"""`--scenario wedge`: the engine that answers /health and /metrics with requests running and serves nothing
until it is restarted (its host's `docker restart`, or SimPool.restart)."""
FAULT_HOST, FAULT_GPU = "tp4", 2
"""`--scenario gpu-fault`: the GPU whose kernel log shows an Xid and whose clocks are held down (hardware
slowdown and thermal), serving on."""


class SimPool:
    """Every simulated engine, the load clock and the scenario driver."""

    def __init__(self, scenario: str = "normal", nodes: int = 0, seed: int = 1) -> None:
        self.scenario = scenario
        self.hosts: tuple[HostSpec, ...]
        self.engine_specs: tuple[EngineSpec, ...]
        self.hosts, self.engine_specs = pool(nodes)
        self.seed = seed
        self.engines: dict[str, SimEngine] = {}
        self.sim_hosts: dict[str, SimHost] = {}
        self.keys_dir: Path | None = None
        self.down_hosts: set[str] = set()
        self.restart_every_s = 40.0
        """`--scenario restart`: how often its two engines restart (tests shorten it)."""
        self.keys = scenario == "oom"
        """Every engine but KEYLESS_ENGINE, and the gateway, refuse callers without the demo's key (read from
        DEMO_KEY_ENV, set in this process when unset); on in `--scenario oom`, settable before start()."""
        self.key: str | None = None
        self.oom_after_s = 20.0
        """`--scenario oom`: healthy for this long, then the crash under load ..."""
        self.oom_every_s = 300.0
        """... and again this often after it (twice in 10 minutes is not yet a restart loop)."""
        self.oom_loading_s = 6.0
        """How long the restarted vLLM refuses connections while it loads."""
        self.gpu_fault_after_s = 15.0
        """`--scenario gpu-fault`: FAULT_HOST's GPU FAULT_GPU logs its Xid this long after the start (once;
        it leaves the kernel log's 5-minute window after that, the throttle stays)."""
        self.wedge_after_s = 15.0
        """`--scenario wedge`: WEDGE_ENGINE serves normally this long, then wedges (once: a restart clears it
        for good; tests shorten it)."""
        self._stats: dict[str, tuple[float, float, float]] = {}
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self, keys_dir: Path | None = None) -> None:
        """Start every engine and, with a `keys_dir` for the throwaway SSH keys, every host's SSH server."""
        for i, spec in enumerate(self.engine_specs):
            if spec.kind == "litellm":
                continue
            engine = SimEngine(spec, self.seed * 1000 + i)
            if self.keys and spec.name == KEYLESS_ENGINE:
                # Ollama has no keys; serving other machines, it is started with OLLAMA_HOST=0.0.0.0
                engine.listens_on = "0.0.0.0"
            await engine.start()
            self.engines[spec.name] = engine
        routes: dict[str, str] = {}
        for engine in self.engines.values():
            names = engine.spec.embedding_dims or engine.spec.models
            for model in names:
                routes[model] = engine.url
        for spec in self.engine_specs:
            if spec.kind == "litellm":
                gateway = SimEngine(spec, self.seed, backends=routes)
                await gateway.start()
                self.engines[spec.name] = gateway
                self._through_gateway(gateway)
        if self.keys:
            self.key = os.environ.setdefault(DEMO_KEY_ENV, "sk-demo-" + secrets.token_urlsafe(12))
            for engine in self.engines.values():
                engine.backend_key = self.key if engine.spec.kind == "litellm" else None
                engine.api_key = None if engine.spec.name == KEYLESS_ENGINE else self.key
        if keys_dir is not None:
            await self._start_hosts(keys_dir)
        self._tasks.append(asyncio.create_task(self._tick()))
        if self.scenario in ("node-down", "restart"):
            self._tasks.append(asyncio.create_task(self._scenario()))
        if self.scenario == "oom":
            self._tasks.append(asyncio.create_task(self._oom()))
        if self.scenario == "wedge":
            self._tasks.append(asyncio.create_task(self._wedge()))
        if self.scenario == "gpu-fault":
            self._tasks.append(asyncio.create_task(self._gpu_fault()))

    def _through_gateway(self, gateway: SimEngine) -> None:
        """The team reaches each engine through the gateway: the gateway counts their requests (its
        /metrics/), routed by the engine's served model."""
        assert gateway.usage is not None
        for engine in self.engines.values():
            if engine.load is not None and engine.spec.kind != "litellm" and engine.spec.models:
                model = engine.spec.models[0]
                engine.load.on_team_finished = gateway.usage.team_finished(model, model)

    async def _start_hosts(self, keys_dir: Path) -> None:
        """Hosts over real SSH: throwaway host and client keys, an authorized_keys and a known_hosts."""
        keys_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.keys_dir = keys_dir
        host_key = asyncssh.generate_private_key("ssh-ed25519")
        client_key = asyncssh.generate_private_key("ssh-ed25519", comment="poolconsole-demo")
        client_key.write_private_key(str(keys_dir / "id_ed25519"))
        os.chmod(keys_dir / "id_ed25519", 0o600)
        client_key.write_public_key(str(keys_dir / "authorized_keys"))
        known: list[str] = []
        for index, spec in enumerate(self.hosts):
            engines = [e for e in self.engines.values() if e.spec.host == spec.name]
            host = SimHost(spec, engines, index)
            await host.start(host_key, keys_dir / "authorized_keys")
            self.sim_hosts[spec.name] = host
            known.append(f"[127.0.0.1]:{host.port} {host_key.export_public_key().decode().strip()}")
        (keys_dir / "known_hosts").write_text("\n".join(known) + "\n")

    async def _tick(self) -> None:
        arrivals = 4.0 if self.scenario == "overload" else 1.0
        while True:
            now = time.monotonic()
            for engine in self.engines.values():
                if engine.load is not None and (engine.loading or engine.wedged):
                    engine.load.hold(now)  # a wedged engine's requests stay running and nothing is generated
                elif engine.load is not None and engine.spec.host not in self.down_hosts:
                    engine.load.tick(now, arrivals)
                    if engine.spec.kind == "vllm" and engine.site is not None:
                        self._log_stats(engine, now)
            await asyncio.sleep(TICK_S)

    def _log_stats(self, engine: SimEngine, now: float) -> None:
        """vLLM's periodic throughput line in its container log."""
        assert engine.load is not None
        c = engine.load.c
        then, prompt, gen = self._stats.setdefault(engine.spec.name, (now, c.prompt_tokens, c.generation_tokens))
        if now - then < STATS_EVERY_S:
            return
        self._stats[engine.spec.name] = (now, c.prompt_tokens, c.generation_tokens)
        span = now - then
        engine.log.write(
            vllm_line(
                "INFO",
                "loggers.py:123",
                f"Engine 000: Avg prompt throughput: {max(0.0, c.prompt_tokens - prompt) / span:.1f} tokens/s, "
                f"Avg generation throughput: {max(0.0, c.generation_tokens - gen) / span:.1f} tokens/s, "
                f"Running: {len(engine.load.running)} reqs, Waiting: {len(engine.load.waiting)} reqs, "
                f"GPU KV cache usage: {engine.load.kv_usage * 100:.1f}%, Prefix cache hit rate: "
                f"{engine.load.profile.prefix_hit * 100:.1f}%",
            )
        )

    async def _oom(self) -> None:
        await asyncio.sleep(self.oom_after_s)
        while True:
            await self.crash_oom(OOM_ENGINE)
            await asyncio.sleep(self.oom_every_s)

    async def crash_oom(self, name: str) -> None:
        """A burst of long prompts, then the worker runs out of GPU memory: vLLM's engine core dies with the
        real CUDA out-of-memory message (OOM_LINE; the lines around it are the shape of vLLM's V1 crash), the
        container exits and its restart policy starts it again (RestartCount + 1), refusing connections while
        it loads."""
        engine = self.engines[name]
        if engine.load is not None:  # under load first: a burst lands, requests run
            engine.load.next_burst = time.monotonic()
            for _ in range(30):
                if len(engine.load.running) >= 4:
                    break
                await asyncio.sleep(0.1)
        worker, core = "Worker_TP0 pid=271", "EngineCore_DP0 pid=270"
        engine.log.write(
            vllm_line("ERROR", "multiproc_executor.py:671", "WorkerProc hit an exception.", worker),
            vllm_line("ERROR", "multiproc_executor.py:671", "Traceback (most recent call last):", worker),
            vllm_line(
                "ERROR",
                "multiproc_executor.py:671",
                '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/gpu_model_runner.py", line 2350, '
                "in execute_model",
                worker,
            ),
            vllm_line("ERROR", "multiproc_executor.py:671", OOM_LINE, worker),
            vllm_line("ERROR", "core.py:710", "EngineCore encountered a fatal error.", core),
            vllm_line("ERROR", "async_llm.py:480", "AsyncLLM output_handler failed."),
            vllm_line(
                "ERROR",
                "async_llm.py:480",
                "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace "
                "(above) for the root cause.",
            ),
            "(APIServer pid=1) INFO:     Shutting down",
        )
        await engine.stop_listening()
        await asyncio.sleep(2.0)  # the container's restart policy
        engine.restart(0.0)
        await asyncio.sleep(self.oom_loading_s)
        await engine.resume_listening()

    async def _gpu_fault(self) -> None:
        await asyncio.sleep(self.gpu_fault_after_s)
        self.gpu_fault(FAULT_HOST, FAULT_GPU)

    def gpu_fault(self, host: str, gpu: int) -> None:
        """`host`'s GPU `gpu`: an Xid 31 (a memory page fault, the MMU's words as the driver logs them) and
        its clocks held down by a hardware slowdown and thermal slowdown."""
        self.sim_hosts[host].gpu_fault(
            gpu,
            31,
            HW_SLOWDOWN | HW_THERMAL_SLOWDOWN,
            "pid=4021, name=python3, Ch 00000008, intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 "
            "faulted @ 0x7f2a_c0000000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ",
        )

    def ecc_fault(self, host: str, gpu: int, count: int = 2) -> None:
        """`host`'s GPU `gpu` reports `count` uncorrected ECC errors since the driver loaded (the rule gpu_ecc)."""
        self.sim_hosts[host].ecc_uncorrected[gpu] = count

    def pcie_fault(self, host: str, gpu: int, width: int = 8) -> None:
        """`host`'s GPU `gpu`: its PCIe link trained down to x`width` of x16 (the rule gpu_pcie)."""
        self.sim_hosts[host].pcie_width[gpu] = width

    def hang(self, name: str) -> None:
        """`name` idles with completions that hang: nothing running, /health 200, a canary never answered
        (SimEngine.hang); a restart clears it."""
        self.engines[name].hang()

    async def _wedge(self) -> None:
        await asyncio.sleep(self.wedge_after_s)
        self.wedge(WEDGE_ENGINE)

    def wedge(self, name: str) -> None:
        """`name` wedges: /health 200, /metrics with its requests running and its generation counter still,
        completions that hang; a restart (its host's `docker restart NAME`) clears it (SimEngine.wedge)."""
        engine = self.engines[name]
        engine.wedge()
        engine.log.write(
            vllm_line(
                "INFO",
                "shm_broadcast.py:466",
                "No available shared memory broadcast block found in 60 second. This typically happens when some "
                "processes are hanging or doing some time-consuming work (e.g. compilation)",
            )
        )

    async def _scenario(self) -> None:
        if self.scenario == "node-down":
            await asyncio.sleep(15)
            await self.host_down("ws48")
            return
        while True:  # restart: one engine of each restart style, every restart_every_s (40 s)
            await asyncio.sleep(self.restart_every_s)
            await self.restart("qwen2.5-coder-3090")
            await self.restart("qwen3-30b-a3b", refuse_s=4.0)

    async def host_down(self, host: str) -> None:
        """The host stops answering: its engines refuse connections."""
        self.down_hosts.add(host)
        if host in self.sim_hosts:
            await self.sim_hosts[host].stop()
        for engine in self.engines.values():
            if engine.spec.host == host:
                await engine.stop_listening()

    async def host_up(self, host: str) -> None:
        self.down_hosts.discard(host)
        for engine in self.engines.values():
            if engine.spec.host == host:
                await engine.resume_listening()

    async def restart(self, name: str, refuse_s: float = 0.0) -> None:
        """Restart an engine for `refuse_s` (its container gone, then the model loading): connections refused
        throughout; with no `refuse_s`, 3 s loading, answered as the engine's kind does (SimEngine.restart)."""
        engine = self.engines[name]
        if refuse_s:
            await engine.stop_listening()
            await asyncio.sleep(refuse_s)
            engine.restart(0.0)
            await engine.resume_listening()
        else:
            engine.restart(3.0)

    async def wait_ready(self, timeout_s: float = 30.0) -> None:
        paths = {
            "vllm": "/health",
            "sglang": "/health",
            "llamacpp": "/health",
            "ollama": "/api/version",
            "litellm": "/health/liveliness",
        }
        deadline = time.monotonic() + timeout_s
        async with httpx.AsyncClient(trust_env=False, timeout=2.0) as client:
            for engine in self.engines.values():
                while True:
                    try:
                        if (await client.get(engine.url + paths[engine.spec.kind])).status_code == 200:
                            break
                    except httpx.HTTPError:
                        pass
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"simulated engine {engine.spec.name} did not answer")
                    await asyncio.sleep(0.05)

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            await reap(task, Exception)
        for engine in self.engines.values():
            await engine.close()
        for host in self.sim_hosts.values():
            await host.stop()
        if self.keys_dir is not None:
            shutil.rmtree(self.keys_dir, ignore_errors=True)

    def config_toml(self) -> str:
        """The hosts.toml that points the console at this pool (sim.demo_config)."""
        return config_toml(self)
