"""Scale benchmark (issue 16): 1,000 engines read through a real Prometheus, beside 64 read directly.

`python benchmarks/scale_bench.py [--engines 1000] [--hosts 250] [--direct 64] [--minutes 1] [--scrape 5]`
(`--minutes 10` for the issue's figure; the default is a quick run).

A few simulated exporters (aiohttp on 127.0.0.1, `--per-exporter` engines each) serve the engines' series
with distinct `instance` labels (eNNNN:8000), a third each vLLM 0.32.0, SGLang 0.5.1 and llama.cpp pages
from the real captures (tests/fixtures/real; only the families the console reads, so that Prometheus'
own ingest leaves the two cores to the console), every generation counter growing. The same exporters
carry the engines' hosts (`--hosts`, hNNNN, the engines spread evenly over them): node_exporter's memory
and swap (instance hNNNN:9100) and a DCGM exporter's series for `--gpus-per-host` GPUs each (hNNNN:9400).
Debian's Prometheus scrapes them with `honor_labels: true`. Then, one after the other on the same
Prometheus:

- batched: the console on `[prometheus]`, every engine and host `read = "prometheus"` (one batch per tick
  for the engines, one for the hosts);
- per-engine: the same console with the reads as before batching (two instant queries per engine per
  poll, selection() and scrape_time(), and three per host: the queries batching replaced);
- direct: the console scraping `--direct` engines itself (the same captures, one port each);
- floor: benchmarks/floor_prometheus.py on the batched console's config: the same instant queries on the
  same 2 s cadence, decoded, and a table of the rows in view kept current, nothing else (issue 39's floor
  of the fleet path). Its "refresh" is its table update, its decoding is reported apart. The console's
  queries (logged by the shim) and the floor's are compared: the run says whether they are the same strings.

`--rounds N` measures the chosen consoles N times, interleaved (batched, floor, batched, floor, ...), so that
a change in the machine's load falls on both sides; each window reports the load average at its start and end.

"The console" is the real TUI process (`python -m poolconsole --config FILE`) in a tmux pane of 160x48,
as the peers harness runs it, at the default 2 s poll interval. Measured: its CPU (utime + stime over
the window, in % of one core), the time to the first frame with data (the pane shows an engine row and
no longer "no data yet"), the time of one refresh (the overview's refresh_screen, timed inside that
process by a shim that wraps it and writes each duration to a file), RSS sampled through the window,
and Prometheus' query rate (its own prometheus_http_requests_total for /api/v1/query).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from aiohttp import web  # noqa: E402

from poolconsole.collect.engines.poll import SPEC  # noqa: E402
from poolconsole.collect.prometheus.queries import SCRAPE_OF  # noqa: E402
from poolconsole.config.models import EngineKind  # noqa: E402
from tests.helpers.prometheus import prometheus_binary  # noqa: E402
from tests.helpers.rawhttp import free_port  # noqa: E402
from tests.integration.test_prometheus_source import LLAMACPP, VLLM, sglang_page  # noqa: E402

KINDS = (EngineKind.VLLM, EngineKind.SGLANG, EngineKind.LLAMACPP)
COUNTER = {
    EngineKind.VLLM: "vllm:generation_tokens_total",
    EngineKind.SGLANG: "sglang:generation_tokens_total",
    EngineKind.LLAMACPP: "llamacpp:tokens_predicted_total",
}
RATE = 250.0
TMUX = ["tmux", "-L", "scalebench", "-f", "/dev/null"]


def page(kind: EngineKind) -> str:
    if kind is EngineKind.VLLM:
        return (VLLM / "metrics.load.txt").read_text()
    if kind is EngineKind.SGLANG:
        return sglang_page().decode()
    return (LLAMACPP / "metrics-after-requests.txt").read_text()


class Template:
    """One kind's page cut to the families the console reads, as (head, tail) pieces around the counter's
    value, with `{instance}` to fill in every sample's labels."""

    def __init__(self, kind: EngineKind) -> None:
        wanted = SPEC[kind].wanted
        lines: list[str] = []
        self.base = 0.0
        for line in page(kind).splitlines():
            if not line or line.startswith("#"):
                continue
            name, _, rest = line.partition("{") if "{" in line.split(" ")[0] else (line.split(" ")[0], "", "")
            if name not in wanted:
                continue
            if rest:
                labels, _, value = rest.rpartition("}")
                lines.append(f'{name}{{instance="@",{labels}}}{value}')
            else:
                lines.append(f'{name}{{instance="@"}} {line.split(" ", 1)[1]}')
        text = "\n".join(lines) + "\n"
        counter = next(i for i, line in enumerate(lines) if line.startswith(COUNTER[kind] + "{"))
        self.base = float(lines[counter].rsplit(" ", 1)[1])
        before = "\n".join(lines[:counter]) + "\n" + lines[counter].rsplit(" ", 1)[0] + " "
        after = text[len("\n".join(lines[: counter + 1])) :]
        self.head, self.tail = before.split("@"), after.split("@")

    def render(self, instance: str, value: float) -> str:
        return instance.join(self.head) + repr(value) + instance.join(self.tail)


TEMPLATES: dict[EngineKind, Template] = {}


def kind_of(i: int) -> EngineKind:
    return KINDS[i % 3]


def engine_page(i: int, since: float, instance: str | None = None) -> str:
    kind = kind_of(i)
    template = TEMPLATES.setdefault(kind, Template(kind))
    return template.render(instance or f"e{i:04d}:8000", template.base + RATE * (time.time() - since))


async def serve(apps: list[web.Application]) -> list[tuple[web.AppRunner, int]]:
    """Each app on a port the kernel picks as it binds (port 0), with that port. Ports drawn first and bound
    later collided: the benchmark failed 2 runs in 3 with "address already in use" at 74 servers."""
    served = []
    for app in apps:
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        served.append((runner, int(runner.addresses[0][1])))
    return served


def host_of(i: int, engines: int, hosts: int) -> int | None:
    """The host engine i runs on (the engines spread evenly over the hosts), None without hosts."""
    return i * hosts // engines if hosts else None


def host_page(h: int, gpus: int, since: float) -> str:
    """Host hNNNN's node_exporter memory and swap and its DCGM exporter's GPUs (the families the console
    reads, the labels DCGM exporter 3.x writes), the GPU figures moving a little with time."""
    name, t = f"h{h:04d}", time.time() - since
    node = f'instance="{name}:9100"'
    lines = [
        f"node_memory_MemTotal_bytes{{{node}}} 540000000000",
        f"node_memory_MemAvailable_bytes{{{node}}} {400000000000 + (h * 7919) % 90000000000}",
        f"node_memory_SwapTotal_bytes{{{node}}} 8589930496",
        f"node_memory_SwapFree_bytes{{{node}}} 8589930496",
    ]
    for g in range(gpus):
        labels = (
            f'instance="{name}:9400",gpu="{g}",UUID="GPU-{h:08d}-0000-0000-0000-{g:012d}",device="nvidia{g}",'
            f'modelName="NVIDIA H100 80GB HBM3",Hostname="{name}",DCGM_FI_DRIVER_VERSION="550.54.15"'
        )
        used = 40000 + (h * 31 + g * 17 + int(t)) % 30000
        lines += [
            f"DCGM_FI_DEV_FB_USED{{{labels}}} {used}",
            f"DCGM_FI_DEV_FB_FREE{{{labels}}} {81559 - used}",
            f"DCGM_FI_DEV_GPU_UTIL{{{labels}}} {(h + g + int(t)) % 100}",
            f"DCGM_FI_DEV_POWER_USAGE{{{labels}}} {300 + (h + g) % 300}.5",
            f"DCGM_FI_DEV_GPU_TEMP{{{labels}}} {40 + (h + g) % 40}",
        ]
    return "\n".join(lines) + "\n"


def exporter(first: int, count: int, since: float, args: argparse.Namespace) -> web.Application:
    def first_on_host(i: int) -> int | None:
        h = host_of(i, args.engines, args.hosts)
        return h if h is not None and (i == 0 or host_of(i - 1, args.engines, args.hosts) != h) else None

    async def metrics(_: web.Request) -> web.Response:
        body = "".join(engine_page(i, since) for i in range(first, first + count))
        hosts = (first_on_host(i) for i in range(first, first + count))  # each host on its first engine's
        body += "".join(host_page(h, args.gpus_per_host, since) for h in hosts if h is not None)
        return web.Response(text=body, content_type="text/plain")

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    return app


def direct_engine(i: int, since: float) -> web.Application:
    """One engine on its own port, as the direct poller reads it (its /metrics without instance labels)."""
    kind = kind_of(i)
    models = {
        EngineKind.VLLM: (VLLM / "v1_models.json").read_text(),
        EngineKind.SGLANG: '{"object":"list","data":[{"id":"Qwen-32B","object":"model"}]}',
        EngineKind.LLAMACPP: (LLAMACPP / "v1-models.json").read_text(),
    }[kind]
    slots = (LLAMACPP / "slots-after-requests.json").read_text()

    async def metrics(_: web.Request) -> web.Response:
        body = engine_page(i, since, "_").replace('instance="_",', "").replace('{instance="_"}', "")
        return web.Response(text=body, content_type="text/plain")

    async def listed(_: web.Request) -> web.Response:
        return web.Response(text=models, content_type="application/json")

    async def slotted(_: web.Request) -> web.Response:
        return web.Response(text=slots, content_type="application/json")

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/v1/models", listed)
    app.router.add_get("/slots", slotted)
    return app


def config(engines: int, prometheus: str | None, ports: list[int] | None = None, hosts: int = 0) -> str:
    text = f'[prometheus]\nurl = "{prometheus}"\n\n' if prometheus else ""
    for h in range(hosts):
        text += f'[[hosts]]\nname = "h{h:04d}"\naddress = "h{h:04d}"\nread = "prometheus"\n\n'
    for i in range(engines):
        kind = kind_of(i)
        if ports is None:
            url, read = f"http://e{i:04d}:8000", "prometheus"
        else:
            url, read = f"http://127.0.0.1:{ports[i]}", "direct"
        text += f'[[engines]]\nname = "e{i:04d}"\nkind = "{kind}"\nurl = "{url}"\nread = "{read}"\n'
        host = host_of(i, engines, hosts)
        text += f'host = "h{host:04d}"\n\n' if host is not None else "\n"
    return text


SHIM = """
import gc
gc.disable()  # as the command's entry point does (poolconsole/__main__.py), before the imports
import asyncio, os, sys, time
if os.environ.get("SCALE_TRACEMALLOC"):  # memdiag also writes the heap's top files and lines (slow: a diagnosis)
    import tracemalloc
    tracemalloc.start(1)

def since_start():
    with open("/proc/self/stat") as f:
        start = int(f.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/uptime") as f:
        return float(f.read().split()[0]) - start / os.sysconf("SC_CLK_TCK")

T0 = time.perf_counter() - since_start()
stamps = open(sys.argv[1] + ".stamps", "a", buffering=1)
seen = set()

def stamp(what, once=True):
    if not once or what not in seen:
        seen.add(what)
        stamps.write(f"{time.perf_counter() - T0:.3f} {what}\\n")

stamp("python up")
import gc
gc_time, gc_runs = [0.0, 0, 0], [0.0]

def gc_watch(phase, info):
    if phase == "start":
        gc_runs[0] = time.perf_counter()
    else:
        gc_time[0] += time.perf_counter() - gc_runs[0]
        gc_time[1] += 1
        gc_time[2] += info["generation"] == 2

gc.callbacks.append(gc_watch)
from poolconsole.collect.prometheus import source as ps
from poolconsole.runtime.live import LivePool
from poolconsole.ui.app import PoolApp
stamp("imported")

out = open(sys.argv[1], "a", buffering=1)
collected = open(sys.argv[1] + ".gc", "a", buffering=1)
inner = PoolApp.refresh_screen
applied = [0]

def refresh_screen(self):
    started = time.perf_counter()
    inner(self)
    out.write(f"{time.perf_counter() - started:.6f}\\n")
    collected.write(f"{gc_time[0]:.6f} {gc_time[1]} {gc_time[2]}\\n")
    if len(seen) < 12:
        stamp(f"refresh with {applied[0]} engines applied (GC so far {gc_time[0]:.2f} s, {gc_time[1]} runs, "
              f"{gc_time[2]} full)", once=False)

PoolApp.refresh_screen = refresh_screen
changed, redraw = PoolApp.changed, PoolApp._redraw

def _changed(self, *args, **kwargs):
    if applied[0]:
        stamp("first change told")
    changed(self, *args, **kwargs)

def _redraw(self, *args, **kwargs):
    if applied[0] and len(seen) < 12:
        stamp(f"first redraw with data, {applied[0]} applied")
    redraw(self, *args, **kwargs)

PoolApp.changed, PoolApp._redraw = _changed, _redraw
mount = PoolApp.on_mount

def on_mount(self):
    stamp("mounted")
    mount(self)
    if os.environ.get("SCALE_MEMDIAG"):  # a file: what the heap holds, every 20 s, appended to it
        self.set_interval(20, lambda: memdiag(self))

counts_before = {}

def memdiag(app):
    import collections
    with open("/proc/self/statm") as f:
        rss = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    counts = collections.Counter(type(o).__name__ for o in gc.get_objects())
    recorder = getattr(app.runtime, "recorder", None)
    pending = len(getattr(recorder, "_pending", ()) or getattr(recorder, "polls", ()))
    grew = sorted(((n - counts_before.get(t, 0), t) for t, n in counts.items()), reverse=True)[:12]
    counts_before.clear()
    counts_before.update(counts)
    with open(os.environ["SCALE_MEMDIAG"], "a") as f:
        f.write(f"{time.perf_counter() - T0:.0f}s rss {rss:.0f} MiB objects {sum(counts.values())} "
                f"gc {gc.get_count()} store pending {pending} ({type(recorder).__name__}); grew: "
                + ", ".join(f"{t} +{d}" for d, t in grew) + "\\n")
        if os.environ.get("SCALE_TRACEMALLOC"):
            def deep(o, seen):
                if id(o) in seen:
                    return 0
                seen.add(id(o))
                n = sys.getsizeof(o)
                if isinstance(o, dict):
                    n += sum(deep(k, seen) + deep(v, seen) for k, v in o.items())
                elif isinstance(o, (tuple, list)):
                    n += sum(deep(x, seen) for x in o)
                return n
            pollers = POLLERS
            seen_ids = set()
            layouts = sum(deep(p.seen.layout.key, seen_ids) for p in pollers if p.seen.layout)
            answered = sum(deep(p.seen.answered, seen_ids) for p in pollers if p.seen.answered)
            batch = pollers[0].api.engine_reads.latest if pollers else None
            sliced = 0
            if batch is not None:
                for t in set(batch.tasks.values()):
                    if t.done() and not t.cancelled() and t.exception() is None:
                        for v, st in t.result().values():
                            sliced += deep(v.series, seen_ids) + deep(st.series, seen_ids)
            f.write(f"  pollers {len(pollers)}: layouts {layouts / 2**20:.1f} MiB, answered {answered / 2**20:.1f} "
                    f"MiB, latest batch's slices {sliced / 2**20:.1f} MiB\\n")
            import tracemalloc
            snap = tracemalloc.take_snapshot()
            f.write(f"  traced {sum(s.size for s in snap.statistics('filename')) / 2**20:.1f} MiB\\n")
            for key in ("filename", "lineno"):
                for stat in snap.statistics(key)[:25]:
                    f.write(f"  {stat.size / 2**20:7.2f} MiB {stat.count:8d} {stat.traceback}\\n")

PoolApp.on_mount = on_mount
POLLERS = []  # what memdiag weighs (they are frozen by the collector's policy: gc.get_objects misses them)
made = ps.PrometheusEnginePoller.__post_init__

def __post_init__(self):
    made(self)
    POLLERS.append(self)

if os.environ.get("SCALE_TRACEMALLOC"):
    ps.PrometheusEnginePoller.__post_init__ = __post_init__
query = ps.PrometheusAPI.query
queries_seen = set()
queries_log = open(sys.argv[1] + ".queries", "w", buffering=1)

async def timed_query(self, promql, *a, **k):
    if promql not in queries_seen:  # each distinct query once: scale_bench compares them with the floor's
        queries_seen.add(promql)
        queries_log.write(promql.replace("\\n", " ") + "\\n")
    stamp("first query sent")
    answer = await query(self, promql, *a, **k)
    stamp("first query answered")
    return answer

ps.PrometheusAPI.query = timed_query
apply = LivePool.apply_engine

def apply_engine(self, snap):
    applied[0] += 1
    stamp("first engine applied")
    return apply(self, snap)

LivePool.apply_engine = apply_engine

if sys.argv[2] == "per-engine":  # the reads as before batching: two instant queries per engine per poll
    async def read(self, key):
        engine = self.members[key]
        self.queries += 2
        values, stamps = await asyncio.gather(
            self.api.query(ps.selection(engine)), self.api.query(ps.scrape_time(engine))
        )
        return values, stamps, ps.Batch(self.api, {})

    ps.EngineReads.read = read

    from poolconsole.collect.prometheus import host_queries as hq
    from poolconsole.collect.prometheus import hosts as ph

    async def host_poll(self):  # and three per host
        self.reads.queries += 3
        answers = await asyncio.gather(
            self.api.query(hq.host_selection(self.host)),
            self.api.query(hq.host_scrape_times(self.host)),
            self.api.query(hq.recent_exporters(self.host)),
        )
        return await self._snapshot(*answers)

    ph.PrometheusHostPoller.poll = host_poll

from poolconsole.__main__ import main
crash = sys.argv[1] + ".crash"
sys.argv = ["poolconsole", "--config", sys.argv[3]]
try:
    code = main()
except BaseException:  # the pane is gone with the process: what ended it is kept for the run to print
    import traceback
    with open(crash, "w") as f:
        traceback.print_exc(file=f)
    raise
if code:
    with open(crash, "w") as f:
        f.write(f"exit status {code}\\n")
sys.exit(code)
"""


def cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(f) for f in fields[11:15])


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def pane(session: str) -> str:
    done = subprocess.run([*TMUX, "capture-pane", "-p", "-t", session], capture_output=True, text=True)
    return done.stdout


async def query_count(prom: str) -> float:
    """Instant queries Prometheus has answered: its own counter, from its /metrics (it does not scrape itself)."""
    import httpx

    async with httpx.AsyncClient(trust_env=False, timeout=30) as client:
        text = (await client.get(f"{prom}/metrics")).text
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("prometheus_http_requests_total{") and 'handler="/api/v1/query"' in line
    )


async def measure(
    name: str,
    directory: Path,
    config_text: str,
    mode: str,
    seconds: float,
    prom: str,
    profile: Path | None = None,
    profile_s: float | None = None,
) -> dict[str, Any]:
    path = directory / f"{name}.toml"
    path.write_text(config_text)
    times = directory / f"{name}.refresh"
    times.write_text("")
    shim = directory / "shim.py"
    shim.write_text(SHIM)
    env = {
        **os.environ,
        "XDG_CONFIG_HOME": str(directory / "xdg" / name / "config"),
        "XDG_DATA_HOME": str(directory / "xdg" / name / "data"),
        "XDG_STATE_HOME": str(directory / "xdg" / name / "state"),
        "XDG_CACHE_HOME": str(directory / "xdg" / name / "cache"),
        "PYTHONPATH": str(ROOT),
    }
    session = f"scale-{name}"
    command = " ".join([sys.executable, str(shim), str(times), mode, str(path)])
    if mode == "floor":
        floor = ROOT / "benchmarks" / "floor_prometheus.py"
        command = " ".join([sys.executable, str(floor), "--config", str(path), "--times", str(times)])
    for old in (Path(f"{times}.decode"), Path(f"{times}.stamps"), Path(f"{times}.gc")):
        old.unlink(missing_ok=True)
    launched = time.monotonic()
    subprocess.run(
        [*TMUX, "new-session", "-d", "-s", session, "-x", "160", "-y", "48", f"exec {command}"], check=True, env=env
    )
    pid = int(
        subprocess.run([*TMUX, "display", "-p", "-t", session, "#{pane_pid}"], capture_output=True, text=True).stdout
    )
    first_frame = None
    crash = Path(f"{times}.crash")
    crash.unlink(missing_ok=True)
    try:
        while time.monotonic() - launched < 120:
            frame = pane(session)
            if "e00" in frame and "no data yet" not in frame and "Engine" in frame:
                first_frame = time.monotonic() - launched
                break
            await asyncio.sleep(0.05)
        first_text = pane(session)
        await asyncio.sleep(max(0.0, 10 - (time.monotonic() - launched)))  # settled: every loop has polled
        if not Path(f"/proc/{pid}").exists():
            said = crash.read_text() if crash.exists() else "(no traceback: killed by a signal?)"
            raise SystemExit(f"{name}: the console exited before its window:\n{said}")
        queries0, ticks0, at0 = await query_count(prom) if prom else 0.0, cpu_ticks(pid), time.monotonic()
        load0 = Path("/proc/loadavg").read_text().split()[0]
        refreshes_before = len(times.read_text().split())
        gc_file = Path(f"{times}.gc")
        gc_before = gc_file.read_text().splitlines()[-1:] if gc_file.exists() else []
        decode_file = Path(f"{times}.decode")
        decodes_before = len(decode_file.read_text().split()) if decode_file.exists() else 0
        spy = None
        if profile is not None:  # py-spy samples the console from outside (a few % of one core of its own)
            profile.mkdir(parents=True, exist_ok=True)
            spy = subprocess.Popen(
                [str(Path(sys.executable).with_name("py-spy")), "record", "-p", str(pid),
                 "-d", str(int(profile_s or seconds)), "-r", "50", "-f", "raw", "-o", str(profile / f"{name}.txt")],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
        rss = [rss_mib(pid)]
        step = max(5.0, seconds / 10)
        while time.monotonic() - at0 < seconds:
            await asyncio.sleep(min(step, seconds - (time.monotonic() - at0)))
            rss.append(rss_mib(pid))
        ticks1, at1 = cpu_ticks(pid), time.monotonic()
        load1 = Path("/proc/loadavg").read_text().split()[0]
        queries1 = await query_count(prom) if prom else 0.0
        end_text = pane(session)
        if spy is not None:
            spy.wait(30)
    finally:
        subprocess.run([*TMUX, "kill-session", "-t", session], capture_output=True)
    durations = [float(x) * 1000 for x in times.read_text().split()[refreshes_before:]]
    gc_after = gc_file.read_text().splitlines()[-1:] if gc_file.exists() else []
    collector = None  # the cyclic collector's time in the window (gc.callbacks), its runs and full ones
    if gc_before and gc_after:
        (s0, n0, f0), (s1, n1, f1) = (line.split() for line in (gc_before[0], gc_after[0]))
        collector = (float(s1) - float(s0), int(n1) - int(n0), int(f1) - int(f0))
    decodes = (
        [float(x) * 1000 for x in decode_file.read_text().split()[decodes_before:]] if decode_file.exists() else []
    )
    sent = Path(f"{times}.queries")
    (directory / f"{name}.first.txt").write_text(first_text)
    stamps = Path(f"{times}.stamps").read_text().splitlines() if Path(f"{times}.stamps").exists() else []
    (directory / f"{name}.end.txt").write_text(end_text)
    return {
        "name": name,
        "cpu_pct": 100 * (ticks1 - ticks0) / os.sysconf("SC_CLK_TCK") / (at1 - at0),
        "first_frame_s": first_frame,
        "refresh_ms_mean": statistics.mean(durations) if durations else None,
        "refresh_ms_max": max(durations) if durations else None,
        "refreshes": len(durations),
        "collector": collector,
        "decode_ms_mean": statistics.mean(decodes) if decodes else None,
        "queries": sorted(set(sent.read_text().splitlines())) if sent.exists() else [],
        "load": f"{load0} -> {load1}",
        "rss_mib": rss,
        "queries_per_s": (queries1 - queries0) / (at1 - at0) if prom else None,
        "window_s": at1 - at0,
        "ok_end": end_text.count(" ok "),
        "startup": stamps,
    }


async def main(args: argparse.Namespace) -> None:
    if shutil.which("tmux") is None:
        raise SystemExit("scale_bench needs tmux (the console runs in a pane, as the peers harness runs it)")
    since = time.time()
    seconds = args.minutes * 60
    with tempfile.TemporaryDirectory(prefix="scale-bench-") as tmp:
        directory = Path(tmp)
        apps = [
            exporter(first, min(args.per_exporter, args.engines - first), since, args)
            for first in range(0, args.engines, args.per_exporter)
        ]
        served = await serve(apps + [direct_engine(i, since) for i in range(args.direct)])
        runners = [runner for runner, _ in served]
        exporter_ports = [port for _, port in served[: len(apps)]]
        direct_ports = [port for _, port in served[len(apps) :]]
        targets = ", ".join(f"'127.0.0.1:{port}'" for port in exporter_ports)
        port = free_port()  # Prometheus' own: one port drawn just before it binds
        (directory / "prometheus.yml").write_text(
            f"global: {{scrape_interval: {args.scrape:g}s, scrape_timeout: {args.scrape:g}s}}\nscrape_configs:\n"
            f"  - job_name: engines\n    honor_labels: true\n    static_configs: [{{targets: [{targets}]}}]\n"
        )
        prom_log = (directory / "prometheus.log").open("w")
        prom_proc = subprocess.Popen(
            [
                prometheus_binary(),
                f"--config.file={directory / 'prometheus.yml'}",
                f"--storage.tsdb.path={directory / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=prom_log,
            stderr=subprocess.STDOUT,
        )
        prom = f"http://127.0.0.1:{port}"
        results = []
        try:
            import httpx

            async with httpx.AsyncClient(trust_env=False, timeout=30) as client:
                deadline = time.monotonic() + 120
                while True:
                    try:
                        doc = (
                            await client.get(
                                f"{prom}/api/v1/query", params={"query": "count(vllm:num_requests_running)"}
                            )
                        ).json()
                        if doc["data"]["result"] and float(doc["data"]["result"][0]["value"][1]) >= args.engines // 3:
                            break
                    except (httpx.TransportError, KeyError, ValueError):
                        pass
                    if prom_proc.poll() is not None or time.monotonic() > deadline:
                        log = (directory / "prometheus.log").read_text()[-2000:]
                        raise SystemExit(f"Prometheus did not scrape the exporters:\n{log}")
                    await asyncio.sleep(1)
                series = (await client.get(f"{prom}/api/v1/query", params={"query": "count({job='engines'})"})).json()
            print(
                f"Prometheus {prom}: {series['data']['result'][0]['value'][1]} series of {args.engines} engines "
                f"and {args.hosts} hosts ({args.gpus_per_host} DCGM GPUs each) in {len(apps)} exporters, "
                f"scraped every {args.scrape} s; window {seconds:.0f} s each"
            )
            pooled = config(args.engines, prom, hosts=args.hosts)
            runs = [
                ("batched", pooled, prom),
                ("per-engine", pooled, prom),
                ("direct", config(args.direct, None, direct_ports), ""),
            ]
            runs.append(("floor", pooled, prom))
            for round_ in range(1, args.rounds + 1):
                for name, text, source in runs:
                    if not args.only or name in args.only:
                        # py-spy on the consoles of the first round only (its own CPU would weigh on the others)
                        spied = args.profile if round_ == 1 and name != "floor" else None
                        result = await measure(
                            name, directory, text, name, seconds, source, spied, args.profile_seconds
                        )
                        result["round"] = round_
                        results.append(result)
        finally:
            prom_proc.terminate()
            prom_proc.wait(30)
            prom_log.close()
            for runner in runners:
                await runner.cleanup()
        report(results, args)
        if args.json:
            print(json.dumps(results))


def ratios(results: list[dict[str, Any]]) -> None:
    """The batched console against the floor of the same round, and whether they sent the same queries."""
    floors = {r["round"]: r for r in results if r["name"] == "floor"}
    for r in results:
        floor = floors.get(r["round"])
        if r["name"] != "batched" or floor is None:
            continue
        # Each group's fixed query (the engines' scrape times, the hosts' series) on both sides; the reads
        # of the engines scraped since the last tick vary with the tick, on both sides.
        fixed, reads = set(floor["queries"]), set(r["queries"]) - set(floor["queries"])
        same = fixed <= set(r["queries"]) and all(SCRAPE_OF in q and "instance=~" in q for q in reads)
        print(
            f"round {r['round']}: console / floor: CPU {r['cpu_pct'] / max(floor['cpu_pct'], 1e-9):.1f}x, "
            f"RSS at the end {r['rss_mib'][-1] / floor['rss_mib'][-1]:.1f}x; the same queries: "
            f"{same} ({len(fixed)} fixed by the floor, all sent by the console: {fixed <= set(r['queries'])}; "
            f"{len(reads)} distinct reads of the engines scraped since the last tick by the console)"
        )
        for q in sorted(fixed - set(r["queries"]))[:4]:
            print(f"  only the floor: {q[:160]}")


def report(results: list[dict[str, Any]], args: argparse.Namespace) -> None:
    def fmt(value: float | None, spec: str) -> str:
        return "n/a" if value is None else format(value, spec)

    heads = {
        "batched": f"{args.engines} + {args.hosts} hosts via Prometheus, batched",
        "per-engine": f"{args.engines} + {args.hosts} hosts via Prometheus, per target",
        "direct": f"{args.direct} direct",
        "floor": "the floor (same queries)",
    }

    def head(r: dict[str, Any]) -> str:
        return heads[r["name"]] + (f" #{r['round']}" if args.rounds > 1 else "")

    def collected(r: dict[str, Any]) -> str:
        if r.get("collector") is None:
            return "n/a"
        seconds, runs, full = r["collector"]
        return f"{100 * seconds / r['window_s']:.1f} ({runs}, {full})"

    rows = [
        ("CPU, % of one core", [fmt(r["cpu_pct"], ".1f") for r in results]),
        ("first frame with data, s", [fmt(r["first_frame_s"], ".2f") for r in results]),
        ("one refresh (refresh_screen), ms mean", [fmt(r["refresh_ms_mean"], ".1f") for r in results]),
        ("one refresh, ms max", [fmt(r["refresh_ms_max"], ".1f") for r in results]),
        ("cyclic collector in the window: % of one core (runs, full)", [collected(r) for r in results]),
        ("RSS start -> end, MiB", [f"{r['rss_mib'][0]:.0f} -> {r['rss_mib'][-1]:.0f}" for r in results]),
        ("RSS max, MiB", [f"{max(r['rss_mib']):.0f}" for r in results]),
        ("decoding, ms of CPU a tick (floor)", [fmt(r["decode_ms_mean"], ".1f") for r in results]),
        ("Prometheus queries / s", [fmt(r["queries_per_s"], ".1f") for r in results]),
        ("load average, window start -> end", [r["load"] for r in results]),
        ("rows ' ok ' on the last frame", [str(r["ok_end"]) for r in results]),
    ]
    width = max(len(label) for label, _ in rows)
    cols = [max(len(head(r)), 12) for r in results]
    print(f"{'':{width}}  " + "  ".join(f"{head(r):>{c}}" for r, c in zip(results, cols, strict=True)))
    for label, values in rows:
        print(f"{label:{width}}  " + "  ".join(f"{v:>{c}}" for v, c in zip(values, cols, strict=True)))
    ratios(results)
    for r in results:
        if r["startup"]:
            print(f"{r['name']}: start-up, s since the process started: " + "; ".join(r["startup"]))
        print(
            f"{r['name']}: RSS every {r['window_s'] / max(1, len(r['rss_mib']) - 1):.0f} s: "
            + " ".join(f"{x:.0f}" for x in r["rss_mib"])
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engines", type=int, default=1000)
    parser.add_argument("--per-exporter", type=int, default=100)
    parser.add_argument("--hosts", type=int, default=250, help="hosts the engines run on, read through Prometheus")
    parser.add_argument("--gpus-per-host", type=int, default=4, help="DCGM exporter GPUs of each host")
    parser.add_argument("--direct", type=int, default=64)
    parser.add_argument(
        "--minutes", type=float, default=1.0, help="measuring window of each console (10 for the issue)"
    )
    parser.add_argument("--scrape", type=float, default=5.0, help="Prometheus' scrape interval, s")
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--only",
        choices=("batched", "per-engine", "direct", "floor"),
        action="append",
        help="measure only these consoles (floor: benchmarks/floor_prometheus.py on the batched console's config)",
    )
    parser.add_argument("--profile-seconds", type=float, help="py-spy's duration (default: the whole window)")
    parser.add_argument(
        "--rounds", type=int, default=1, help="measure the chosen consoles this many times, interleaved"
    )
    parser.add_argument("--profile", type=Path, help="also record each console's window with py-spy into this folder")
    asyncio.run(main(parser.parse_args()))
