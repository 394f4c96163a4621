"""Engine collectors over real HTTP on loopback: real captures served byte for byte, and every failure
state (refused, timeout, 401/403, 404 metrics, 5xx, HTML, truncated, garbage, oversized, slow)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from poolconsole.collect.engines.litellm_usage import WANTED
from poolconsole.collect.engines.poll import EnginePoller
from poolconsole.collect.http import PollClient
from poolconsole.config.models import Engine, EngineKind, Settings
from poolconsole.model.snapshots import EngineState
from poolconsole.model.view import ONE_POLL, engine_view
from tests.conftest import REAL
from tests.helpers.rawhttp import RawHTTPServer, Reply, free_port

VLLM = REAL / "vllm-0.32.0-cpu"
LLAMA = REAL / "llamacpp-b1-0c1e570"
LIT = REAL / "litellm-1.108.7"
SAMPLES = REAL / "issue-samples"
SETTINGS = Settings(http_timeout_s=1.0, max_body_bytes=64 * 1024)


def vllm_routes(metrics: str = "metrics.load.txt") -> dict[str, Reply]:
    return {
        "/health": Reply(200, b""),
        "/metrics": Reply.file(VLLM / metrics, "text/plain; version=1.0.0; charset=utf-8"),
        "/v1/models": Reply.file(VLLM / "v1_models.json", "application/json"),
        "/version": Reply.file(VLLM / "version.json", "application/json"),
    }


def llama_routes() -> dict[str, Reply]:
    start = {"Process-Start-Time-Unix": "713367657"}
    return {
        "/health": Reply.file(LLAMA / "health.json", "application/json"),
        "/metrics": Reply.file(LLAMA / "metrics-after-requests.txt", headers=start),
        "/v1/models": Reply.file(LLAMA / "v1-models.json", "application/json"),
        "/slots": Reply.file(LLAMA / "slots-after-requests.json", "application/json"),
        "/props": Reply.file(LLAMA / "props.json", "application/json"),
    }


@pytest.fixture
async def server() -> AsyncIterator[RawHTTPServer]:
    srv = await RawHTTPServer().start()
    yield srv
    await srv.stop()


@pytest.fixture
async def client() -> AsyncIterator[PollClient]:
    c = PollClient()
    yield c
    await c.aclose()


async def poll(client: PollClient, url: str, kind: EngineKind, **kw: str) -> tuple[EnginePoller, object]:
    poller = EnginePoller(Engine(name="e", kind=kind, url=url, **kw), client, SETTINGS)  # type: ignore[arg-type]
    return poller, await poller.poll()


async def test_vllm_capture_reads_ok(server: RawHTTPServer, client: PollClient) -> None:
    server.routes = vllm_routes()
    _, snap = await poll(client, server.url, EngineKind.VLLM)
    view = engine_view([snap])  # type: ignore[list-item]
    assert view.state == "ok", view.error
    assert view.requests_running == 8 and view.requests_waiting == 8
    assert view.models == ["tiny"] and view.version == "0.32.0"
    assert view.ttft_mean_s == pytest.approx(1.494215965270996 / 15)
    assert view.generation_tokens_per_s is None and view.unknown["generation_tokens_per_s"] == ONE_POLL


async def test_vllm_rate_between_two_polls(server: RawHTTPServer, client: PollClient) -> None:
    server.routes = vllm_routes("metrics.load.txt")
    poller, first = await poll(client, server.url, EngineKind.VLLM)
    server.routes = vllm_routes("metrics.after.txt")
    second = await poller.poll()
    view = engine_view([first, second])  # type: ignore[list-item]
    window = second.monotonic - first.monotonic  # type: ignore[attr-defined]
    assert view.generation_tokens_per_s == pytest.approx((1245 - 334) / window)
    assert view.ttft_window == "window"
    assert view.ttft_mean_s == pytest.approx((3.455411434173584 - 1.494215965270996) / (23 - 15))
    assert view.counter_resets == 0


async def test_counter_reset_is_not_a_negative_rate(server: RawHTTPServer, client: PollClient) -> None:
    server.routes = vllm_routes("metrics.after.txt")
    poller, first = await poll(client, server.url, EngineKind.VLLM)
    server.routes = vllm_routes("metrics.load.txt")  # counters go down: the engine restarted
    second = await poller.poll()
    view = engine_view([first, second])  # type: ignore[list-item]
    assert view.counter_resets == 1
    assert view.generation_tokens_per_s is not None and view.generation_tokens_per_s > 0


async def test_llamacpp_capture(server: RawHTTPServer, client: PollClient) -> None:
    server.routes = llama_routes()
    _, snap = await poll(client, server.url, EngineKind.LLAMACPP)
    view = engine_view([snap])  # type: ignore[list-item]
    assert view.state == "ok", view.error
    assert view.requests_running == 0 and view.requests_waiting == 0
    assert view.kv_cache_usage == 0.0 and "slots" in view.details["kv_cache_usage_source"]
    assert view.prefix_cache_hit_rate == pytest.approx(169 / (169 + 50))
    assert view.version == "b1-0c1e570"
    assert view.ttft_mean_s is None and "latency" in view.unknown["ttft_mean_s"]


async def test_litellm_without_key(server: RawHTTPServer, client: PollClient) -> None:
    server.routes = {
        "/health/liveliness": Reply.file(LIT / "health-liveliness.json", "application/json"),
        "/health/readiness": Reply.file(LIT / "health-readiness.json", "application/json"),
    }
    _, snap = await poll(client, server.url, EngineKind.LITELLM)
    view = engine_view([snap])  # type: ignore[list-item]
    assert view.state == "ok", view.error
    assert view.details["readiness"]["status"] == "healthy"
    assert view.requests_running is None


async def test_litellm_with_key_lists_models(
    server: RawHTTPServer, client: PollClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEST_LITELLM_KEY", "sk-test-master")
    server.routes = {
        "/health/liveliness": Reply.file(LIT / "health-liveliness.json", "application/json"),
        "/health/readiness": Reply.file(LIT / "health-readiness.json", "application/json"),
        "/v1/models": Reply.file(LIT / "v1-models.json", "application/json"),
    }
    _, snap = await poll(client, server.url, EngineKind.LITELLM, api_key_env="TEST_LITELLM_KEY")
    assert snap.models == ("tiny",)  # type: ignore[attr-defined]
    assert "sk-test-master" not in json.dumps(engine_view([snap]).to_json())  # type: ignore[list-item]
    assert "callbacks" in engine_view([snap]).details["gateway_usage_unknown"]  # type: ignore[list-item]


async def test_litellm_gateway_usage_from_its_prometheus_page(
    server: RawHTTPServer, client: PollClient, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The real 1.108.7 page of two caller keys on two routes lands in details.gateway_usage for the ledger;
    the gateway stays ok either way."""
    monkeypatch.setenv("TEST_LITELLM_KEY", "sk-test-master")
    whole = Path(__file__).resolve().parents[1] / "fixtures" / "litellm-prometheus" / "metrics-prometheus-two-keys.txt"
    page = tmp_path / "restricted.txt"  # what its `name[]` query returns: those samples only
    page.write_text("".join(line for line in whole.read_text().splitlines(True) if line.startswith(WANTED)))
    server.routes = {
        "/health/liveliness": Reply.file(LIT / "health-liveliness.json", "application/json"),
        "/health/readiness": Reply.file(LIT / "health-readiness.json", "application/json"),
        "/v1/models": Reply.file(LIT / "v1-models.json", "application/json"),
        "/metrics/": Reply.file(page, "text/plain; version=0.0.4"),
    }
    _, snap = await poll(client, server.url, EngineKind.LITELLM, api_key_env="TEST_LITELLM_KEY")
    view = engine_view([snap])  # type: ignore[list-item]
    assert view.state == "ok", view.error
    usage = view.details["gateway_usage"]
    assert {(c["route"], c["caller"], c["requests"]) for c in usage["callers"]} == {
        ("tiny", "alpha", 3),
        ("tiny", "beta", 2),
        ("tiny-b", "alpha", 2),
        ("tiny-b", "beta", 2),
    }
    assert "gateway_usage_unknown" not in view.details


async def test_ollama(server: RawHTTPServer, client: PollClient) -> None:
    server.routes = {
        "/api/ps": Reply.json(
            '{"models":[{"name":"nomic-embed-text:latest","size":300,"size_vram":200,'
            '"context_length":8192,"expires_at":"2026-11-29T12:00:00Z"}]}'
        ),
        "/api/tags": Reply.json('{"models":[{"name":"nomic-embed-text:latest"},{"name":"mxbai-embed-large:latest"}]}'),
        "/api/version": Reply.json('{"version":"0.33.0"}'),
    }
    _, snap = await poll(client, server.url, EngineKind.OLLAMA)
    view = engine_view([snap])  # type: ignore[list-item]
    assert view.state == "ok" and view.version == "0.33.0"
    assert view.models == ["nomic-embed-text:latest", "mxbai-embed-large:latest"]
    assert view.details["partial_offload"] == ["nomic-embed-text:latest"]
    assert view.kv_cache_usage is None and "Ollama" in view.unknown["kv_cache_usage"]


# -- failure states ----------------------------------------------------------------------------------


async def test_refused(client: PollClient) -> None:
    port = free_port()
    _, snap = await poll(client, f"http://127.0.0.1:{port}", EngineKind.VLLM)
    assert snap.state is EngineState.DOWN and "refused" in (snap.error or "")  # type: ignore[attr-defined]
    # the words name where it knocked, as the SSH side does ("connection refused by 127.0.0.1:42057 ...")
    assert f"connection refused by 127.0.0.1:{port} (" in snap.error, snap.error  # type: ignore[attr-defined]
    # each metric left unknown says why in those words, not the failure's kind (a name that does not
    # resolve was said "engine down: refused")
    said = set(snap.missing.values())  # type: ignore[attr-defined]
    assert said == {f"engine down: connection refused by 127.0.0.1:{port}"}, said


async def test_timeout(server: RawHTTPServer, client: PollClient) -> None:
    server.routes = vllm_routes()
    server.routes["/metrics"] = Reply(mode="hang")
    _, snap = await poll(client, server.url, EngineKind.VLLM)
    assert snap.state is EngineState.DOWN and "no answer within 1 s" in (snap.error or "")  # type: ignore[attr-defined]
    assert set(snap.missing.values()) == {"engine down: no answer within 1 s"}  # type: ignore[attr-defined]


@pytest.mark.parametrize("status", [401, 403])
async def test_auth_required(server: RawHTTPServer, client: PollClient, status: int) -> None:
    server.routes = llama_routes()
    body = (LLAMA / "apikey-metrics-no-key.txt").read_bytes()
    server.routes["/metrics"] = Reply(status, body, {"Content-Type": "application/json"})
    server.routes["/v1/models"] = Reply(status, body, {"Content-Type": "application/json"})
    _, snap = await poll(client, server.url, EngineKind.LLAMACPP)
    view = engine_view([snap])  # type: ignore[list-item]
    assert view.state == "auth_failed" and f"HTTP {status}" in (view.error or "")
    assert view.requests_running is None and "auth" in view.unknown["requests_running"]


async def test_metrics_404_is_degraded_with_the_fix(server: RawHTTPServer, client: PollClient) -> None:
    server.routes = llama_routes()
    del server.routes["/metrics"]
    _, snap = await poll(client, server.url, EngineKind.LLAMACPP)
    assert snap.state is EngineState.DEGRADED  # type: ignore[attr-defined]
    assert "--metrics" in (snap.error or "")  # type: ignore[attr-defined]


async def test_5xx_is_down(server: RawHTTPServer, client: PollClient) -> None:
    server.routes = vllm_routes()
    server.routes["/metrics"] = Reply(503, b"")
    server.routes["/health"] = Reply(503, b"")
    _, snap = await poll(client, server.url, EngineKind.VLLM)
    assert snap.state is EngineState.DOWN and "503" in (snap.error or "")  # type: ignore[attr-defined]


async def test_engine_dead_500_on_metrics(server: RawHTTPServer, client: PollClient) -> None:
    server.routes = vllm_routes()
    server.routes["/metrics"] = Reply.file(VLLM / "enginedead.completions.500.json", "application/json", status=500)
    _, snap = await poll(client, server.url, EngineKind.VLLM)
    assert snap.state is EngineState.DOWN and "HTTP 500" in (snap.error or "")  # type: ignore[attr-defined]


async def test_html_page(server: RawHTTPServer, client: PollClient) -> None:
    server.routes = vllm_routes()
    server.routes["/metrics"] = Reply(
        200, b"<html><body><h1>Welcome to nginx</h1></body></html>", {"Content-Type": "text/html"}
    )
    _, snap = await poll(client, server.url, EngineKind.VLLM)
    assert snap.state is EngineState.DEGRADED and "HTML" in (snap.error or "")  # type: ignore[attr-defined]


async def test_truncated_body(server: RawHTTPServer, client: PollClient) -> None:
    server.routes = vllm_routes()
    server.routes["/metrics"] = Reply.file(VLLM / "metrics.load.txt", mode="truncate")
    _, snap = await poll(client, server.url, EngineKind.VLLM)
    assert snap.state is not EngineState.OK  # type: ignore[attr-defined]
    assert "closed mid-response" in (snap.error or "")  # type: ignore[attr-defined]


async def test_garbage_body(server: RawHTTPServer, client: PollClient) -> None:
    server.routes = vllm_routes()
    server.routes["/metrics"] = Reply(200, bytes(range(256)) * 10)
    _, snap = await poll(client, server.url, EngineKind.VLLM)
    assert snap.state is EngineState.DEGRADED and "Prometheus" in (snap.error or "")  # type: ignore[attr-defined]


async def test_oversized_body_is_capped(server: RawHTTPServer, client: PollClient) -> None:
    server.routes = vllm_routes()
    server.routes["/metrics"] = Reply(200, b"# padding\n" * 20_000)
    _, snap = await poll(client, server.url, EngineKind.VLLM)
    assert snap.state is EngineState.DEGRADED and "cap" in (snap.error or "")  # type: ignore[attr-defined]


async def test_slow_endpoint_within_timeout_is_ok(server: RawHTTPServer, client: PollClient) -> None:
    server.routes = vllm_routes()
    server.routes["/metrics"] = Reply.file(VLLM / "metrics.idle.txt", delay_s=0.4)
    _, snap = await poll(client, server.url, EngineKind.VLLM)
    assert snap.state is EngineState.OK and snap.latency_s >= 0.4  # type: ignore[attr-defined]


async def test_disable_log_stats_is_degraded_with_reason(server: RawHTTPServer, client: PollClient) -> None:
    server.routes = vllm_routes("metrics.disable-log-stats.txt")
    _, snap = await poll(client, server.url, EngineKind.VLLM)
    assert snap.state is EngineState.DEGRADED and "--disable-log-stats" in (snap.error or "")  # type: ignore[attr-defined]


# -- the CLI contract ------------------------------------------------------------------------------


def _run_status(config: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "poolconsole", "status", "--config", str(config), *extra],
        capture_output=True,
        text=True,
        timeout=60,
    )


CONTRACT = [
    "name",
    "kind",
    "host",
    "url",
    "state",
    "error",
    "models",
    "requests_running",
    "requests_waiting",
    "kv_cache_usage",
    "prompt_tokens_total",
    "generation_tokens_total",
    "generation_tokens_per_s",
    "prompt_tokens_per_s",
    "ttft_mean_s",
    "prefix_cache_hit_rate",
    "spec_decode_acceptance_rate",
    "preemptions_total",
    "ranks",
]


async def test_status_json_contract(tmp_path: Path) -> None:
    vllm = await RawHTTPServer(vllm_routes()).start()
    llama = await RawHTTPServer(llama_routes()).start()
    dead = free_port()
    config = tmp_path / "hosts.toml"
    config.write_text(
        f'[[engines]]\nname = "v"\nkind = "vllm"\nurl = "{vllm.url}"\nhost = "gpu1"\n\n'
        f'[[engines]]\nname = "l"\nkind = "llamacpp"\nurl = "{llama.url}"\n\n'
        f'[[engines]]\nname = "d"\nkind = "sglang"\nurl = "http://127.0.0.1:{dead}"\n'
    )
    import asyncio

    try:
        proc = await asyncio.to_thread(_run_status, config, "--json", "--samples", "2", "--interval", "0.2")
    finally:
        await vllm.stop()
        await llama.stop()
    assert proc.returncode == 1, proc.stderr
    doc = json.loads(proc.stdout)
    assert set(doc) >= {"taken_at", "engines", "hosts"}
    by = {e["name"]: e for e in doc["engines"]}
    for e in doc["engines"]:
        assert all(k in e for k in CONTRACT)
        for k in CONTRACT[7:]:
            assert e[k] is None or isinstance(e[k], int | float)
    assert by["v"]["state"] == "ok" and by["v"]["requests_running"] == 8 and by["v"]["ranks"] == 1
    assert by["v"]["generation_tokens_per_s"] == 0  # same capture twice: the counter did not move
    assert by["l"]["state"] == "ok" and by["l"]["requests_running"] == 0
    assert by["d"]["state"] == "down" and by["d"]["requests_running"] is None


def test_status_exit_2_on_bad_config(tmp_path: Path) -> None:
    config = tmp_path / "hosts.toml"
    config.write_text('[[engines]]\nname = "x"\nkind = "tgi"\nurl = "http://127.0.0.1:1"\n')
    proc = _run_status(config, "--json")
    assert proc.returncode == 2 and "engines[0:x].kind" in proc.stderr and proc.stdout == ""


async def test_steady_state_is_one_request_per_poll(server: RawHTTPServer, client: PollClient) -> None:
    server.routes = vllm_routes()
    poller, _first = await poll(client, server.url, EngineKind.VLLM)
    for _ in range(3):
        again = await poller.poll()
        assert again.models == ("tiny",) and again.version == "0.32.0"  # cached, not re-read
    assert server.hits["/metrics"] == 4 and server.hits["/v1/models"] == 1 and server.hits["/version"] == 1
    assert "/health" not in server.hits  # only asked when /metrics fails


async def test_llamacpp_loading_is_degraded(server: RawHTTPServer, client: PollClient) -> None:
    loading = (LLAMA / "health-while-loading-503.json").read_bytes()
    server.routes = {
        p: Reply(503, loading, {"Content-Type": "application/json"})
        for p in ("/health", "/metrics", "/v1/models", "/slots", "/props")
    }
    _, snap = await poll(client, server.url, EngineKind.LLAMACPP)
    assert snap.state is EngineState.DEGRADED and "loading model" in (snap.error or "")  # type: ignore[attr-defined]


async def test_metrics_are_asked_uncompressed_and_read_when_gzipped_anyway(
    server: RawHTTPServer, client: PollClient
) -> None:
    """prometheus_client's exposition (SGLang, older vLLM) gzips /metrics when the client accepts it:
    the console asks for identity; a body gzipped regardless (a proxy) is still read."""
    import gzip

    from prometheus_client import CollectorRegistry, Gauge, start_http_server

    from poolconsole.collect.http import fetch

    registry = CollectorRegistry()
    Gauge("sglang:num_running_reqs", "running", registry=registry).set(3)
    port = free_port()
    httpd, thread = start_http_server(port, addr="127.0.0.1", registry=registry)
    try:
        got = await fetch(client, f"http://127.0.0.1:{port}/metrics", timeout_s=5, max_bytes=1 << 20)
        assert got.ok and got.headers.get("content-encoding") is None
        assert b"sglang:num_running_reqs 3.0" in got.body
        # and a default httpx client really would have got gzip from it
        async with httpx.AsyncClient() as plain:
            raw = await plain.get(f"http://127.0.0.1:{port}/metrics")
        assert raw.headers.get("content-encoding") == "gzip"
    finally:
        httpd.shutdown()
        thread.join(5)
    page = (VLLM / "metrics.load.txt").read_bytes()
    server.routes = {
        **vllm_routes(),
        "/metrics": Reply(200, gzip.compress(page), {"Content-Type": "text/plain", "Content-Encoding": "gzip"}),
    }
    _, snap = await poll(client, server.url, EngineKind.VLLM)
    view = engine_view([snap])  # type: ignore[list-item]
    assert view.state == "ok", view.error
    assert view.requests_running == 8 and view.requests_waiting == 8
