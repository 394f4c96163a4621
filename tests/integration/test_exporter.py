"""`poolconsole exporter` on the demo pool (simulated engines in their real formats, hosts over real SSH):
what /metrics serves is the pool state at the scrape, unknown is absent, GPU memory says dedicated or
unified, the token counters stay monotonic across an engine restart, and a real Prometheus stores what
the exporter served, with rate() and resets() right across restarts. The command's own exits (bad
--listen, busy port, SIGINT, SIGTERM and SIGHUP) run it as a subprocess."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterable
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from poolconsole.config import parse_config
from poolconsole.model.view import EngineView
from poolconsole.runtime.exporter import Exporter, ListenError, parse_listen
from poolconsole.runtime.live import LivePool
from poolconsole.sim.demo import SimPool
from tests.helpers.prometheus import Prometheus, eventually, running_prometheus
from tests.helpers.rawhttp import free_port

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "dashboards" / "poolconsole.json"
UNKNOWN_RUNNING = ("embeddings", "gateway")  # Ollama and LiteLLM say nothing about requests in flight
RESTARTED = ("qwen2.5-coder-3090", "qwen3-30b-a3b")  # the restart scenario's two styles: 503 while loading, refused

Key = tuple[str, frozenset[tuple[str, str]]]


class Scrape:
    """One /metrics page, parsed by prometheus_client's own parser."""

    def __init__(self, text: str) -> None:
        self.types: dict[str, str] = {}
        self.values: dict[Key, float] = {}
        for family in text_string_to_metric_families(text):
            self.types[family.name] = family.type
            for s in family.samples:
                self.values[(s.name, frozenset(s.labels.items()))] = s.value

    def get(self, name: str, **labels: str) -> float | None:
        return self.values.get((name, frozenset(labels.items())))

    def labelled(self, name: str) -> list[tuple[dict[str, str], float]]:
        return [(dict(labels), v) for (n, labels), v in self.values.items() if n == name]


async def until(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        await asyncio.sleep(0.2)


@pytest.fixture
async def demo(tmp_path: Path) -> AsyncIterator[tuple[SimPool, Exporter]]:
    sim = SimPool(seed=3)
    await sim.start(tmp_path / "keys")
    exporter: Exporter | None = None
    try:
        await sim.wait_ready()
        config = parse_config(sim.config_toml(), "demo.toml")
        exporter = Exporter(config, "127.0.0.1", 0, settle_gc=False)
        await exporter.start()
        yield sim, exporter
    finally:
        if exporter is not None:
            await exporter.stop()
        await sim.stop()


def live(exporter: Exporter) -> LivePool:
    assert exporter.live is not None
    return exporter.live


async def scrape(exporter: Exporter, client: httpx.AsyncClient) -> Scrape:
    response = await client.get(f"http://{exporter.address}/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    return Scrape(response.text)


def all_polled(pool: LivePool) -> bool:
    engines = all(t.view is not None and t.view.state == "ok" for t in pool.state.engines.values())
    hosts = all(t.snapshot is not None and t.snapshot.state.value == "ok" for t in pool.state.hosts.values())
    return engines and hosts


def engine_labels(pool: LivePool, name: str) -> dict[str, str]:
    config = pool.state.engines[name].config
    return {"engine": name, "kind": str(config.kind), "host": config.host or ""}


GAUGES = {
    "poolconsole_engine_requests_running": "requests_running",
    "poolconsole_engine_requests_waiting": "requests_waiting",
    "poolconsole_engine_kv_cache_usage_ratio": "kv_cache_usage",
}


async def test_metrics_are_the_pool_state_at_the_scrape(demo: tuple[SimPool, Exporter]) -> None:
    _, exporter = demo
    pool = live(exporter)
    await until(lambda: all_polled(pool), 90, "every engine and host to answer a poll")
    engines, hosts = pool.state.engines, pool.state.hosts
    checked: set[str] = set()
    checked_hosts: set[str] = set()
    last: Scrape | None = None
    deadline = time.monotonic() + 90
    async with httpx.AsyncClient(trust_env=False, timeout=20) as client:
        # Polls land while a scrape is in flight; a target is compared on a scrape during which its view
        # (an immutable object, replaced by each poll) stayed the same one: the state at that moment.
        while checked != set(engines) or checked_hosts != set(hosts):
            assert time.monotonic() < deadline, f"no quiet scrape for {set(engines) - checked}"
            views = {n: t.view for n, t in engines.items()}
            snaps = {n: t.snapshot for n, t in hosts.items()}
            totals = {n: dict(t.totals) for n, t in engines.items()}
            got = await scrape(exporter, client)
            last = got
            for name, track in engines.items():
                view = views[name]
                if track.view is not view or view is None:
                    continue
                labels = engine_labels(pool, name)
                for metric, field in GAUGES.items():
                    assert got.get(metric, **labels) == getattr(view, field), (name, metric)
                assert got.get("poolconsole_engine_up", **labels) == (1.0 if view.state == "ok" else 0.0)
                assert got.get("poolconsole_engine_state", **labels, state=view.state) == 1.0
                for counter in ("generation_tokens_total", "prompt_tokens_total"):
                    assert got.get(f"poolconsole_engine_{counter}", **labels) == totals[name].get(counter), name
                checked.add(name)
            for name, host in hosts.items():
                snap = snaps[name]
                if host.snapshot is not snap or snap is None:
                    continue
                for gpu in snap.gpus:
                    labels = {"host": name, "gpu": str(gpu.index), "memory_kind": snap.memory_kind or ""}
                    assert got.get("poolconsole_host_gpu_memory_used_bytes", **labels) == gpu.memory_used_bytes
                    assert got.get("poolconsole_host_gpu_memory_total_bytes", **labels) == gpu.memory_total_bytes
                checked_hosts.add(name)
    assert last is not None
    # unknown is absent, not 0 (and the check above is not vacuous: some engines do report requests)
    for name in UNKNOWN_RUNNING:
        view = engines[name].view
        assert view is not None and view.requests_running is None
        running = [labels for labels, _ in last.labelled("poolconsole_engine_requests_running")]
        assert name not in {labels["engine"] for labels in running}
    reporting = [e for e in engines.values() if e.view is not None and e.view.requests_running is not None]
    assert len(reporting) >= 4
    assert last.get("poolconsole_engine_up", **engine_labels(pool, "embeddings")) == 1.0
    # counters are counters (rate() needs them), the rest gauges
    assert last.types["poolconsole_engine_generation_tokens"] == "counter"
    assert last.types["poolconsole_engine_prompt_tokens"] == "counter"
    assert last.types["poolconsole_engine_requests_running"] == "gauge"
    # GPU memory: GB10's unified memory says so; the 4x3090 node has four 24 GiB cards
    spark = last.labelled("poolconsole_host_gpu_memory_total_bytes")
    spark_kinds = {labels["memory_kind"] for labels, _ in spark if labels["host"] == "spark"}
    assert spark_kinds == {"unified"}
    tp4 = sorted((labels["gpu"], v) for labels, v in spark if labels["host"] == "tp4")
    assert tp4 == [(str(i), 24576 * 2**20) for i in range(4)]
    assert {labels["memory_kind"] for labels, _ in spark if labels["host"] == "tp4"} == {"dedicated"}
    used = {labels["host"] for labels, _ in last.labelled("poolconsole_host_gpu_memory_used_bytes")}
    assert "spark" in used  # unified memory in use is known (read from the OS), so it is served


async def test_the_dashboard_reads_only_what_the_exporter_serves(demo: tuple[SimPool, Exporter]) -> None:
    _, exporter = demo
    pool = live(exporter)
    await until(lambda: all_polled(pool), 90, "every engine and host to answer a poll")
    async with httpx.AsyncClient(trust_env=False, timeout=20) as client:
        got = await scrape(exporter, client)
    served = {name for name, _ in got.values}
    doc = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in doc["panels"] for t in p.get("targets", [])]
    exprs += [v["query"]["query"] if isinstance(v["query"], dict) else v["query"] for v in doc["templating"]["list"]]
    used = {n for e in exprs for n in re.findall(r"\bpoolconsole_[a-z_]+", e)}
    assert len(used) >= 8
    assert used <= served, used - served


def raw_counter(view: EngineView | None) -> float | None:
    return view.generation_tokens_total if view is not None else None


async def test_tokens_total_stays_monotonic_across_an_engine_restart(demo: tuple[SimPool, Exporter]) -> None:
    sim, exporter = demo
    pool = live(exporter)
    tracks = pool.state.engines

    def counting() -> bool:
        return all(
            (t := tracks[n]).view is not None and t.view.state == "ok" and t.totals.get("generation_tokens_total")
            for n in RESTARTED
        )

    await until(counting, 90, "the engines to be restarted to generate tokens")
    served: dict[str, list[float]] = {n: [] for n in tracks}
    last_raw = {n: raw_counter(tracks[n].view) for n in RESTARTED}
    dropped: set[str] = set()  # the engine's own counter went down: a real reset happened

    async def sample(client: httpx.AsyncClient) -> None:
        got = await scrape(exporter, client)
        for name in tracks:
            value = got.get("poolconsole_engine_generation_tokens_total", **engine_labels(pool, name))
            if value is not None:
                served[name].append(value)
        for name in RESTARTED:
            raw = raw_counter(tracks[name].view)
            if raw is not None:
                if raw < (last_raw[name] or 0):
                    dropped.add(name)
                last_raw[name] = raw

    def back() -> bool:
        """The runtime saw each reset and the engine serves again."""
        return dropped == set(RESTARTED) and all(
            tracks[n].history.restarts and (v := tracks[n].view) is not None and v.state == "ok" for n in RESTARTED
        )

    async with httpx.AsyncClient(trust_env=False, timeout=20) as client:
        for _ in range(3):
            await sample(client)
            await asyncio.sleep(0.5)
        await sim.restart(RESTARTED[0])  # llama.cpp style: 503 "Loading model" for 3 s, counters from 0
        refused = asyncio.create_task(sim.restart(RESTARTED[1], refuse_s=4.0))  # vLLM style: refused, then 0
        deadline = time.monotonic() + 120
        while not back():
            assert time.monotonic() < deadline, f"no reset seen of {set(RESTARTED) - dropped}"
            await sample(client)
            await asyncio.sleep(0.3)
        await refused
        grown = {n: served[n][-1] for n in RESTARTED}
        await until(
            lambda: all(tracks[n].totals["generation_tokens_total"] > grown[n] for n in RESTARTED), 90, "growth"
        )
        await sample(client)
    for name, values in served.items():
        assert values == sorted(values), f"{name}: generation_tokens_total went down: {values}"
    for name in RESTARTED:
        assert served[name][-1] > served[name][0], name
        assert served[name][-1] > max(served[name][:3])  # the total kept what was counted before the restart


# -- the command ------------------------------------------------------------------------------------------


def test_parse_listen() -> None:
    assert parse_listen("127.0.0.1:9877") == ("127.0.0.1", 9877)
    assert parse_listen("[::1]:0") == ("::1", 0)
    for bad in ("9877", ":9877", "127.0.0.1:", "127.0.0.1:http", "127.0.0.1:70000", "[::1]"):
        with pytest.raises(ListenError, match=re.escape(repr(bad))):
            parse_listen(bad)


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "poolconsole", "exporter", *args]


def write_config(path: Path, port: int) -> Path:
    """One engine that answers nothing (a closed port on loopback): the exporter serves its state all the same."""
    path.write_text(
        f'[settings]\npoll_interval_s = 1.0\n\n[[engines]]\nname = "lonely"\nkind = "vllm"\n'
        f'url = "http://127.0.0.1:{port}"\n'
    )
    return path


def test_bad_listen_and_busy_port_exit_2_naming_the_address(tmp_path: Path) -> None:
    config = write_config(tmp_path / "hosts.toml", free_port())
    bad = subprocess.run(command("--config", str(config), "--listen", "localhost"), capture_output=True, text=True)
    assert bad.returncode == 2 and "'localhost'" in bad.stderr and "HOST:PORT" in bad.stderr
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        taken = subprocess.run(
            command("--config", str(config), "--listen", f"127.0.0.1:{port}"),
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert taken.returncode == 2, taken.stderr
    assert f"127.0.0.1:{port}" in taken.stderr and "in use" in taken.stderr
    broken = tmp_path / "broken.toml"
    broken.write_text('[[engines]]\nname = "x"\nkind = "nope"\n')
    invalid = subprocess.run(
        command("--config", str(broken), "--listen", "127.0.0.1:0"), capture_output=True, text=True
    )
    assert invalid.returncode == 2 and "broken.toml" in invalid.stderr


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP], ids=["SIGTERM", "SIGINT", "SIGHUP"])
async def test_a_signal_stops_the_command_cleanly(tmp_path: Path, stop: signal.Signals) -> None:
    engine_port = free_port()
    config = write_config(tmp_path / "hosts.toml", engine_port)
    port = free_port()
    proc = subprocess.Popen(
        command("--config", str(config), "--listen", f"127.0.0.1:{port}"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        got: Scrape | None = None
        async with httpx.AsyncClient(trust_env=False, timeout=20) as client:
            deadline = time.monotonic() + 90
            while got is None or got.get("poolconsole_engine_up", engine="lonely", kind="vllm", host="") is None:
                assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.stderr else ""
                with contextlib.suppress(httpx.TransportError):
                    got = Scrape((await client.get(f"http://127.0.0.1:{port}/metrics")).text)
                await asyncio.sleep(0.3)
        labels = {"engine": "lonely", "kind": "vllm", "host": ""}
        assert got.get("poolconsole_engine_up", **labels) == 0.0  # down is known: 0
        assert got.get("poolconsole_engine_state", **labels, state="down") == 1.0
        assert got.get("poolconsole_engine_requests_running", **labels) is None  # unknown: absent
        assert got.get("poolconsole_engine_generation_tokens_total", **labels) is None
        proc.send_signal(stop)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert f"http://127.0.0.1:{port}/metrics" in out


# -- a real Prometheus --------------------------------------------------------------------------------------


def by_engine(result: Iterable[dict[str, Any]]) -> dict[str, Any]:
    return {r["metric"]["engine"]: r.get("value") or r.get("values") for r in result}


@pytest.mark.engine
async def test_a_real_prometheus_stores_what_the_exporter_served(
    demo: tuple[SimPool, Exporter], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sim, exporter = demo
    pool = live(exporter)
    tracks = pool.state.engines
    # the exporter's own values, scrape by scrape: (when, engine -> requests_running in the pool state it
    # served from at that moment; the collector runs on the event loop, so no poll lands in between)
    served: list[tuple[float, dict[str, float]]] = []
    collector = exporter.collector
    assert collector is not None
    original = collector.collect

    def recording() -> Any:
        running = {
            n: t.view.requests_running for n, t in tracks.items() if t.view and t.view.requests_running is not None
        }
        served.append((time.time(), running))
        return original()

    monkeypatch.setattr(collector, "collect", recording)
    jobs = f"  - job_name: poolconsole\n    static_configs: [{{targets: ['{exporter.address}']}}]\n"
    async with running_prometheus(tmp_path, jobs) as prom:
        started = time.time()
        counting = f'count_over_time(poolconsole_engine_generation_tokens_total{{engine=~"{"|".join(RESTARTED)}"}}[5m])'

        async def stored(n: int) -> bool:
            got = by_engine(await prom.query(counting, time.time()))
            return all(n <= float(got.get(e, [0, "0"])[1]) for e in RESTARTED)

        await eventually(lambda: stored(8), 120, "Prometheus to store eight scrapes of both engines")
        # the restart scenario's two restarts, driven here so the window is known
        raw_before = {n: raw_counter(tracks[n].view) for n in RESTARTED}
        await sim.restart(RESTARTED[0])
        await sim.restart(RESTARTED[1], refuse_s=4.0)

        async def back() -> bool:
            return all(
                tracks[n].history.restarts
                and (v := tracks[n].view) is not None
                and v.state == "ok"
                and (raw := raw_counter(v)) is not None
                and raw < (raw_before[n] or 0)
                for n in RESTARTED
            )

        await eventually(back, 120, "the restarted engines to come back with reset counters")
        came_back = time.time()
        await eventually(lambda: stored_after(prom, came_back + 8), 120, "eight more seconds of scrapes")
        end = time.time()
        assert (await prom.query('up{job="poolconsole"}', end))[0]["value"][1] == "1"

        # requests_running: the latest stored value is one the exporter served a scrape or so before
        latest = by_engine(await prom.query("poolconsole_engine_requests_running", end))
        assert set(latest) == {n for n, t in tracks.items() if t.view and t.view.requests_running is not None}
        assert not set(latest) & set(UNKNOWN_RUNNING)
        for name, (at, value) in latest.items():
            near = {r[name] for t, r in served if at - 3 <= t <= end and name in r}
            assert float(value) in near, (name, value, near)
        # and every stored sample of the window is a value served within a scrape of its timestamp
        window = int(end - started) + 5
        history = by_engine(await prom.query(f"poolconsole_engine_requests_running[{window}s]", end))
        assert sum(len(v) for v in history.values()) >= 8 * len(latest)
        assert any(float(v) > 0 for samples in history.values() for _, v in samples)  # not all idle zeros
        for name, samples in history.items():
            for at, value in samples:
                near = {r[name] for t, r in served if abs(t - at) <= 3 and name in r}
                assert float(value) in near, (name, at, value, near)

        # the token counters across the restarts: a rate never below 0 and no reset for Prometheus to mend
        rates = await prom.api(
            "query_range",
            query="rate(poolconsole_engine_generation_tokens_total[30s])",
            start=f"{started:.3f}",
            end=f"{end:.3f}",
            step="1",
        )
        curves = by_engine(rates["result"])
        assert set(RESTARTED) <= set(curves)
        for name, points in curves.items():
            assert all(float(v) >= 0 for _, v in points), (name, points)
        for name in RESTARTED:
            assert any(float(v) > 0 for t, v in curves[name] if t > came_back), name
        resets = by_engine(await prom.query(f"resets(poolconsole_engine_generation_tokens_total[{window}s])", end))
        assert set(RESTARTED) <= set(resets)
        assert {n: v[1] for n, v in resets.items() if v[1] != "0"} == {}
        metadata = await prom.api("targets/metadata", match_target='{job="poolconsole"}')
        types = {m["metric"]: m["type"] for m in metadata}
        counter = types.get("poolconsole_engine_generation_tokens") or types.get(
            "poolconsole_engine_generation_tokens_total"
        )
        assert counter == "counter", types


async def stored_after(prom: Prometheus, at: float) -> bool:
    """Prometheus holds a sample of the exporter stamped after `at`."""
    got = await prom.query("timestamp(poolconsole_engine_up)", time.time())
    return bool(got) and min(float(r["value"][1]) for r in got) > at
