"""The charts' history from range queries of a real Prometheus (Debian's package) scraping the replayed real
vLLM, SGLang and llama.cpp pages of test_prometheus_source.py (counters growing at RATE tok/s): after ~10
scrapes the runtime's fill, and a live console with no history store, hold one point per scrape whose tok/s
is the counter's growth per step and whose KV is the page's; a counter reset is a restart mark, never a
negative rate; a Prometheus that errors or is unreachable leaves the charts empty with a notice naming it."""

from __future__ import annotations

import time
from pathlib import Path

from poolconsole.config import parse_config
from poolconsole.runtime.prometheus_history import with_prometheus_history
from poolconsole.runtime.store import StoredHistory
from poolconsole.ui.app import PoolApp
from tests.conftest import REAL
from tests.helpers.prometheus import eventually
from tests.helpers.rawhttp import RawHTTPServer, Reply, free_port
from tests.integration.test_prometheus_source import RATE, Pool, scraped
from tests.integration.test_prometheus_source import pool as pool  # the fixture

SETTINGS = "[settings]\npoll_interval_s = 1\n"
VLLM_KV = 0.0009766817238432424
"""vllm:kv_cache_usage_perc on the replayed page (metrics.load.txt)."""


def test_the_replayed_page_has_this_kv() -> None:
    page = (REAL / "vllm-0.32.0-cpu" / "metrics.load.txt").read_text()
    assert f'vllm:kv_cache_usage_perc{{engine="0",model_name="tiny"}} {VLLM_KV}' in page


def near_rate(tps: float | None) -> bool:
    return tps is not None and abs(tps - RATE) <= 0.05 * RATE


async def test_the_runtime_fills_each_engine_from_range_queries(pool: Pool) -> None:
    await eventually(lambda: scraped(pool.prom, 10), 60, "ten scrapes of every replayed engine")
    pool.engines["llamacpp"].restart()
    restarted_at = time.time()
    await eventually(lambda: scraped(pool.prom, 13), 60, "three scrapes after the restart")
    config = parse_config(pool.config("prometheus") + SETTINGS)
    stored = StoredHistory()
    problems = await with_prometheus_history(config, stored, time.time())
    assert problems == []
    assert set(stored.engines) == {"vllm", "sglang", "llamacpp"}
    for name, got in stored.engines.items():
        assert len(got) >= 10, (name, len(got))
        times = [p[0] for p in got]
        assert times == sorted(times) and len(set(times)) == len(times), name
        assert all(p[1] is None or p[1] >= 0 for p in got), name  # never a negative rate
    vllm = stored.engines["vllm"]
    assert all(near_rate(p[1]) for p in vllm[1:]), [p[1] for p in vllm]
    assert all((p[2], p[3], p[4], p[6]) == (VLLM_KV, 8.0, 8.0, 0) for p in vllm)
    sglang = stored.engines["sglang"]
    assert all(near_rate(p[1]) for p in sglang[1:]) and all((p[2], p[4]) == (0.0, 3.0) for p in sglang)
    llamacpp = stored.engines["llamacpp"]
    marks = [p for p in llamacpp if p[6]]
    assert len(marks) == 1 and marks[0][0] > restarted_at, [(p[0], p[1], p[6]) for p in llamacpp]
    assert all(near_rate(p[1]) for p in llamacpp[1:] if not p[6])


async def test_a_console_on_a_prometheus_read_pool_opens_with_its_history(pool: Pool, tmp_path: Path) -> None:
    await eventually(lambda: scraped(pool.prom, 10), 60, "ten scrapes of every replayed engine")
    config = parse_config(pool.config("prometheus") + SETTINGS)
    opened_at = time.time()
    app = PoolApp(config, theme_state=tmp_path / "ui.json")  # no history store, as `--prometheus URL`
    async with app.run_test(size=(120, 40)) as pilot:
        track = app.state.engines["vllm"]
        for _ in range(200):
            await pilot.pause(0.05)
            if sum(1 for t in track.history.times.raw_tail(len(track.history.times)) if t < opened_at) >= 9:
                break
        history = track.history  # the fill puts a new History in place
        count = len(history.times)
        times = history.times.raw_tail(count)
        filled = [i for i, t in enumerate(times) if t < opened_at]
        assert len(filled) >= 9, times
        assert times == sorted(times)
        tps, kv = history.tokens_per_s.tail(count), history.kv.tail(count)
        # the first point has no scrape before it; the last may be the first live poll (no rate yet either)
        assert all(near_rate(tps[i]) for i in filled[1:-1]), str(list(zip(times, tps, strict=True)))
        assert all(kv[i] == VLLM_KV for i in filled)
        assert not [n for n in app._notifications if "Prometheus" in str(n.message)]


async def test_an_unreachable_prometheus_leaves_the_charts_empty_with_a_notice(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    config = parse_config(
        f'[prometheus]\nurl = "{url}"\n[[engines]]\nname = "qwen"\nkind = "vllm"\n'
        f'url = "http://127.0.0.1:8000"\nread = "prometheus"\n{SETTINGS}'
    )
    app = PoolApp(config, theme_state=tmp_path / "ui.json")
    async with app.run_test(size=(120, 40)) as pilot:
        for _ in range(200):
            await pilot.pause(0.05)
            said = [str(n.message) for n in app._notifications if "history" in str(n.message)]
            if said:
                break
        assert said and url in said[0], said
        assert "Traceback" not in said[0] and "a poll loop stopped" not in " ".join(
            str(n.message) for n in app._notifications
        )
        history = app.state.engines["qwen"].history
        assert all(v is None for v in history.tokens_per_s.tail(len(history.times)))  # only the failed live polls


async def test_a_prometheus_that_errors_is_named_and_fills_nothing() -> None:
    refusing = RawHTTPServer(
        {
            "/api/v1/query_range": Reply.json(
                '{"status":"error","errorType":"execution","error":"query processing would load too many samples"}',
                status=422,
            )
        }
    )
    await refusing.start()
    try:
        config = parse_config(
            f'[prometheus]\nurl = "{refusing.url}"\n[[engines]]\nname = "qwen"\nkind = "vllm"\n'
            f'url = "http://127.0.0.1:8000"\nread = "prometheus"\n{SETTINGS}'
        )
        stored = StoredHistory()
        [problem] = await with_prometheus_history(config, stored, time.time())
        assert refusing.url in problem and "too many samples" in problem, problem
        assert stored.engines == {}
    finally:
        await refusing.stop()
