"""The history store (issue 14): what the live pool saw is what `export` gives back, a `kill -9` of
`poolconsole record` loses at most the last second, SIGTERM flushes and exits 0, retention rolls polls
up to 1-minute rows and then deletes them, and export's filters, CSV and errors.

The demo pool runs as a subprocess (`poolconsole demo --serve-only`) on 127.0.0.1, shared by the tests
of this module; the retention and export tests write synthetic polls (real views, chosen times) and
touch no network."""

from __future__ import annotations

import asyncio
import csv
import io
import json
import math
import os
import signal
import sqlite3
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import pytest

from poolconsole import cli
from poolconsole.config import PoolConfig, load_config, parse_config
from poolconsole.model.hosts import HostSnapshot, HostState
from poolconsole.model.pool_state import PoolState
from poolconsole.model.snapshots import EngineState
from poolconsole.model.view import EngineView
from poolconsole.runtime.live import LivePool, Update
from poolconsole.runtime.store import (
    EXPORT_FIELDS,
    ROLLUP_S,
    HeldPolls,
    Reader,
    Store,
    StoreBusy,
    fill_history,
    iso,
    read_history,
    record,
)
from poolconsole.runtime.store import codec as store_codec
from poolconsole.runtime.store import writer as store_writer
from poolconsole.runtime.store.codec import decode, deflate, dumps
from tests.helpers import uipool
from tests.helpers.demo_serve import served_demo, start_record

ROOT = Path(__file__).resolve().parents[2]
SLACK_S = 0.5
"""Scheduling on a loaded 2-core machine, on top of what the claims allow (1 s of buffer, one poll interval)."""


# -- the demo pool ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """`poolconsole demo --serve-only`: its hosts.toml once every target answers."""
    with served_demo(tmp_path_factory.mktemp("demo")) as config:
        yield config


def wait_for_rows(store: Path, proc: subprocess.Popen[str], rows: int, timeout_s: float = 90) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else "record died"
        if store.is_file():
            with Reader(store) as reader:
                if sum(1 for _ in reader.rows()) >= rows:
                    return
        assert time.monotonic() < deadline, f"fewer than {rows} rows in {store}"
        time.sleep(0.5)


def exported(store: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> list[dict[str, Any]]:
    capsys.readouterr()
    assert cli.main(["export", "--store", str(store), "--format", "jsonl", *extra]) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def targets(config: PoolConfig) -> set[tuple[str, str]]:
    return {("engine", e.name) for e in config.engines} | {("host", h.name) for h in config.hosts}


# -- record, then export ---------------------------------------------------------------------------------
async def test_record_then_export_gives_back_what_the_pool_saw(
    demo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """~10 s of the live pool into the store; every applied poll comes back from `export` once, and a
    sample of them field for field (engine views with their running totals, host snapshots)."""
    config = load_config(demo)
    path = tmp_path / "history.sqlite3"
    store = Store.for_config(config, path)
    pool = LivePool(config, recorder=store)
    seen: dict[tuple[str, str, float], dict[str, Any]] = {}

    def heard(update: Update) -> None:  # told right after the recorder, on the same poll
        if update.kind == "engine":
            track = pool.state.engines[update.target]
            assert track.view is not None
            doc = {**track.view.to_json(), "totals": dict(track.totals)}
            seen[("engine", update.target, doc["polled_at"])] = doc
        elif update.kind == "host":
            snapshot = pool.state.hosts[update.target].snapshot
            assert snapshot is not None
            seen[("host", update.target, snapshot.fetched_at)] = snapshot.to_json()

    pool.subscribe(heard)
    stop = asyncio.Event()
    asyncio.get_running_loop().call_later(10, stop.set)
    await record(pool, store, stop)

    rows = exported(path, capsys)
    by_key = {(r["target_type"], r["name"], r["polled_at"]): r for r in rows}
    assert len(by_key) == len(rows) == len(seen)  # every poll once, the last second's included
    assert set(by_key) == set(seen)
    assert {(kind, name) for kind, name, _ in seen} == targets(config)
    assert any(r["totals"] for r in rows if r["target_type"] == "engine")  # counters seen running
    sample = sorted(seen)[::5]
    for key in sample:
        row = dict(by_key[key])
        assert row.pop("taken_at") == iso(key[2])
        assert row.pop("target_type") == key[0]
        assert row.pop("polls") == 1
        assert row == json.loads(json.dumps(seen[key]))  # the same values, to the last bit of each float


# -- crash safety ----------------------------------------------------------------------------------------
def test_kill_9_of_record_loses_at_most_the_last_second(demo: Path, tmp_path: Path) -> None:
    """While `record` runs, the last commit is never more than a second old; after a `kill -9` the file
    opens intact and holds every target's polls up to a second (plus one poll interval) before the kill."""
    config = load_config(demo)
    interval = config.settings.poll_interval_s
    path = tmp_path / "history.sqlite3"
    proc, _ = start_record(demo, path)
    try:
        wait_for_rows(path, proc, 3 * len(targets(config)))
        staleness = []
        late = 0.0  # how late this process's own sleeps woke: the machine's load, allowed on top of SLACK_S
        with Reader(path) as reader:
            for _ in range(12):
                now = time.time()
                written = reader.written_at()
                assert written is not None
                staleness.append(now - written)
                asleep = time.monotonic()
                time.sleep(0.37)  # not a divisor of the commit period: the samples walk through its phase
                late = max(late, time.monotonic() - asleep - 0.37)
        assert max(staleness) <= 1.0 + SLACK_S + late, (staleness, late)
        killed_at = time.time()
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    db.close()
    last: dict[tuple[str, str], float] = {}
    with Reader(path) as reader:
        for row in reader.rows():
            last[(row.kind, row.name)] = max(row.at, last.get((row.kind, row.name), 0.0))
    assert set(last) == targets(config)
    lost = {target: round(killed_at - at, 2) for target, at in last.items()}
    assert all(s <= 1.0 + interval + SLACK_S + late for s in lost.values()), (lost, late)


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_stop_signal_ends_record_with_exit_0_and_every_poll_committed(
    demo: Path, tmp_path: Path, stop: signal.Signals
) -> None:
    """systemd's stop (SIGTERM) or a closed terminal (SIGHUP): the buffered last second is committed too."""
    config = load_config(demo)
    path = tmp_path / "history.sqlite3"
    proc, first = start_record(demo, path)
    try:
        assert f"{len(config.engines)} engine(s) and {len(config.hosts)} host(s)" in first
        assert str(demo) in first and str(path) in first and "SIGTERM" in first
        wait_for_rows(path, proc, 2 * len(targets(config)))
        with pytest.raises(StoreBusy, match="being written by another poolconsole process"):
            Store(path, background=False)  # one writer per store
        proc.send_signal(stop)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    said = out.strip().splitlines()[-1]
    assert said.startswith("stopped: ") and said.endswith(f"polls written to {path}"), said
    with Reader(path) as reader:
        assert sum(1 for _ in reader.rows()) == int(said.split()[1])  # the buffered last second included


def test_close_commits_what_is_buffered(tmp_path: Path) -> None:
    """The writer commits on its cadence; what arrived since is committed by close()."""
    view, host = sample_view(), sample_host()
    path = tmp_path / "h.sqlite3"
    store = Store(path, commit_every_s=3600)
    t0 = time.time()
    for i in range(5):
        store.engine(replace(view, polled_at=t0 + i), {}, t0 + i)
        store.host(replace(host, fetched_at=t0 + i), t0 + i)
    with Reader(path) as reader:
        assert list(reader.rows()) == []  # nothing committed yet
    store.close()
    with Reader(path) as reader:
        assert len(list(reader.rows())) == 10


# -- retention -------------------------------------------------------------------------------------------
def sample_view() -> EngineView:
    cfg = uipool.config()
    state = PoolState(cfg)
    views = [state.apply_engine(s) for s in uipool.engine_snapshots(cfg)]
    return next(v for v in views if v.kind == "vllm" and v.kv_cache_usage is not None)


def sample_host() -> HostSnapshot:
    return next(h for h in uipool.host_snapshots(uipool.config()) if h.gpus)


def kv_at(at: float) -> float:
    return 0.3 + 0.5 * ((at / 10) % 7) / 7


def test_polls_held_while_the_store_opens_are_bounded_and_handed_over_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A disk that never answers must not grow the console's memory without end: the oldest held polls go,
    as the store's own buffer drops them; the rest reach the store in order, with their totals."""
    monkeypatch.setattr(store_writer, "MAX_PENDING", 3)
    cfg = uipool.config()
    state = PoolState(cfg)
    views = [state.apply_engine(s) for s in uipool.engine_snapshots(cfg)][:5]
    held = HeldPolls()
    for i, view in enumerate(views):
        held.engine(view, dict(state.engines[view.name].totals), 100.0 + i)
    assert [at for *_, at in held.polls] == [102.0, 103.0, 104.0]
    assert held.polls[0][2] == dict(state.engines[views[2].name].totals)
    path = tmp_path / "history.sqlite3"
    store = Store(path, background=False)
    held.hand_over(store)
    assert held.polls == []
    store.close()
    with Reader(path) as reader:
        rows = list(reader.rows(0, 1e12, reader.ids([v.name for v in views], ("engine",))))
    assert [(r.name, r.at) for r in rows] == [(v.name, 102.0 + i) for i, v in enumerate(views[2:])]


def test_retention_rolls_up_then_deletes(tmp_path: Path) -> None:
    """[store] full_resolution_hours = 1, rollup_days = 2, on an injected clock: polls older than the hour
    become one row per target and minute (gauges averaged, counters the last, the worst state), rows
    older than two days are deleted, and what is newer stays as it was."""
    config = parse_config("[store]\nfull_resolution_hours = 1\nrollup_days = 2\n", "hosts.toml")
    now = [1_800_000_000.0]  # on a minute boundary
    path = tmp_path / "history.sqlite3"
    store = Store.for_config(config, path, clock=lambda: now[0], background=False)
    view, host = sample_view(), sample_host()
    start = now[0] - 3 * 86400
    times = [start + 20 * i for i in range(int(3 * 86400 / 20))]  # every 20 s for three days
    down_minute = now[0] - 86400  # one poll of this minute is down: the rollup says so
    for i, at in enumerate(times):
        down = at == down_minute + 20
        polled = replace(
            view,
            polled_at=at,
            kv_cache_usage=kv_at(at),
            prompt_tokens_total=at - start,
            state=cast(EngineState, "down" if down else "ok"),
            error="connection refused" if down else None,
        )
        store.engine(polled, {}, at)
        store.host(replace(host, fetched_at=at), at)
        if i % 2000 == 0:
            store.flush()
    store.flush()
    store.retain()

    full_after = now[0] - 3600
    keep_after = now[0] - 2 * 86400
    with Reader(path) as reader:
        rows = list(reader.rows())
    raw = [r for r in rows if r.polls == 1]
    rolled = [r for r in rows if r.polls > 1]
    assert sorted({r.at for r in raw}) == [t for t in times if t >= full_after]
    assert len(raw) == 2 * len([t for t in times if t >= full_after])
    minutes = sorted({math.floor(t / ROLLUP_S) * ROLLUP_S for t in times if keep_after <= t < full_after})
    for name in (view.name, host.name):
        mine = [r for r in rolled if r.name == name]
        assert [r.at for r in mine] == minutes  # one row a minute, none older than two days
        assert all(r.polls == 3 for r in mine)
    engine_rows = {r.at: r.values for r in rolled if r.name == view.name}
    minute = minutes[100]
    polls = [t for t in times if minute <= t < minute + ROLLUP_S]
    assert engine_rows[minute]["kv_cache_usage"] == float(f"{sum(map(kv_at, polls)) / len(polls):.6g}")
    assert engine_rows[minute]["prompt_tokens_total"] == polls[-1] - start  # a counter: the last
    assert engine_rows[minute]["polled_at"] == polls[-1]
    assert engine_rows[minute]["state"] == "ok"
    assert engine_rows[down_minute]["state"] == "down"
    assert engine_rows[down_minute]["error"] == "connection refused"
    assert min(r.at for r in rows) >= keep_after

    now[0] += 86400  # a day later: the next day rolled up, the oldest deleted
    store.retain()
    with Reader(path) as reader:
        later = list(reader.rows())
    assert min(r.at for r in later) >= now[0] - 2 * 86400
    assert not [r for r in later if r.polls == 1 and r.at < now[0] - 3600]
    assert down_minute in {r.at for r in later if r.name == view.name and r.polls > 1}
    store.close()


# -- export ----------------------------------------------------------------------------------------------
@pytest.fixture
def written(tmp_path: Path) -> tuple[Path, float]:
    """An engine and a host polled once a minute for the last hour (30 s past each minute of the test)."""
    view, host = sample_view(), sample_host()
    path = tmp_path / "history.sqlite3"
    now = time.time()
    store = Store(path, background=False)
    for k in range(60, 0, -1):
        at = now - 60 * k + 30
        store.engine(replace(view, polled_at=at, requests_running=float(k)), {}, at)
        store.host(replace(host, fetched_at=at, rtt_ms=None), at)
    store.close()
    return path, now


@pytest.fixture
def west_of_utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Five hours west of UTC: a time without an offset must still read as UTC, not as local time."""
    monkeypatch.setenv("TZ", "XXX+5")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.mark.usefixtures("west_of_utc")
def test_export_filters_by_time_and_target(written: tuple[Path, float], capsys: pytest.CaptureFixture[str]) -> None:
    path, now = written
    everything = exported(path, capsys)
    assert len(everything) == 120
    assert [r["taken_at"] for r in everything] == sorted(r["taken_at"] for r in everything)
    recent = exported(path, capsys, "--from", "-10m")
    assert len(recent) == 2 * 10 and all(r["polled_at"] >= now - 600 for r in recent)
    start, end = iso(now - 20 * 60), iso(now - 10 * 60)
    window = exported(path, capsys, "--from", start, "--to", end)
    assert sorted({r["polled_at"] for r in window}) == [now - 60 * k + 30 for k in range(20, 10, -1)]
    engine = sample_view().name
    only = exported(path, capsys, "--target", engine, "--from", "-30m")
    assert {r["name"] for r in only} == {engine} and len(only) == 30
    assert all(r["target_type"] == "engine" and "totals" in r for r in only)
    zulu = exported(path, capsys, "--from", start.replace("+00:00", "Z"), "--to", end.replace("+00:00", ""))
    assert zulu == window  # Z and no offset both mean UTC


def test_export_csv_has_the_jsonl_fields(written: tuple[Path, float], capsys: pytest.CaptureFixture[str]) -> None:
    path, _ = written
    rows = exported(path, capsys)
    capsys.readouterr()
    assert cli.main(["export", "--store", str(path), "--format", "csv"]) == 0
    table = list(csv.reader(io.StringIO(capsys.readouterr().out)))
    header, body = table[0], table[1:]
    assert header == list(dict.fromkeys(k for r in rows for k in r)) == EXPORT_FIELDS
    assert len(body) == len(rows)

    def flat(value: Any) -> str:
        if value is None:
            return ""
        if isinstance(value, dict | list | bool):
            return json.dumps(value, separators=(",", ":"))
        return str(value)

    for row, cells in zip(rows, body, strict=True):
        assert cells == [flat(row.get(k)) for k in header]
    host = next(c for c in body if c[1] == "host")
    assert host[header.index("rtt_ms")] == ""  # unknown is an empty cell, never 0
    assert json.loads(host[header.index("gpus")])[0]["memory_total_bytes"] > 0  # nested: JSON text


def test_export_errors_are_sentences(
    written: tuple[Path, float], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, _ = written
    cases = {
        "missing": (["--store", str(tmp_path / "nope.sqlite3")], "no history store at"),
        "text": (["--store", str(tmp_path / "notes.txt")], "is not a SQLite file"),
        "other db": (["--store", str(tmp_path / "other.db")], "not a poolconsole history store"),
        "time": (["--store", str(path), "--from", "yesterday-ish"], "is not a time"),
        "target": (["--store", str(path), "--target", "nosuch"], "no target named nosuch"),
    }
    (tmp_path / "notes.txt").write_text("not a database, just notes\n" * 100)
    other = sqlite3.connect(tmp_path / "other.db")
    other.execute("CREATE TABLE audit (x)")
    other.commit()
    other.close()
    for name, (args, words) in cases.items():
        capsys.readouterr()
        assert cli.main(["export", *args]) == 2, name
        err = capsys.readouterr().err
        assert words in err, (name, err)
        assert "Traceback" not in err
        if name in ("missing", "text", "other db"):
            assert args[1] in err  # the sentence names the file
    assert not (tmp_path / "nope.sqlite3").exists()  # export never creates a store


def test_export_into_a_closed_pipe_is_not_a_traceback(tmp_path: Path) -> None:
    view, host = sample_view(), sample_host()
    path = tmp_path / "history.sqlite3"
    store = Store(path, background=False)
    t0 = time.time() - 3600
    for i in range(1500):
        store.engine(replace(view, polled_at=t0 + i), {}, t0 + i)
        store.host(replace(host, fetched_at=t0 + i), t0 + i)
    store.close()
    proc = subprocess.Popen(
        [sys.executable, "-m", "poolconsole", "export", "--store", str(path), "--format", "csv"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline().startswith(b"taken_at,")
    proc.stdout.close()  # `| head -1`
    err = proc.stderr.read().decode()
    proc.wait(30)
    assert "Traceback" not in err and "Exception ignored" not in err, err


# -- the console's charts on launch ----------------------------------------------------------------------
def test_charts_are_filled_from_the_store(tmp_path: Path) -> None:
    """The stored points go before the live ones in the history rings, VRAM from the host rows."""
    cfg = uipool.config()
    view = sample_view()
    engine = next(e for e in cfg.engines if e.name == view.name)
    host = next(h for h in uipool.host_snapshots(cfg) if h.name == engine.host)
    assert engine.gpus is None or len(engine.gpus) > 1
    host = replace(host, gpus=tuple(replace(g, memory_used_bytes=(i + 1) * 2**33) for i, g in enumerate(host.gpus)))
    path = tmp_path / "history.sqlite3"
    store = Store(path, background=False)
    t0 = time.time() - 600
    for i in range(100):
        at = t0 + 2 * i
        store.host(replace(host, fetched_at=at - 1), at - 1)
        store.engine(replace(view, polled_at=at, kv_cache_usage=i / 100, counter_resets=int(i == 50)), {}, at)
    store.close()

    state = PoolState(cfg)
    state.apply_host(replace(host, fetched_at=t0 + 1000))
    snapshot = next(s for s in uipool.engine_snapshots(cfg) if s.name == view.name)
    live = state.apply_engine(replace(snapshot, fetched_at=t0 + 1000))
    history = state.engines[view.name].history
    first_live = history.times[0]
    assert first_live is not None
    fill_history(state, read_history(path, cfg, t0 - 1, first_live))
    history = state.engines[view.name].history
    assert len(history.times) == 101
    assert history.times.tail(3)[:2] == [t0 + 196, t0 + 198] and history.times[-1] == first_live
    assert history.kv.tail(101) == [i / 100 for i in range(100)] + [live.kv_cache_usage]
    assert list(history.restarts) == [t0 + 100]
    expected = state.engine_vram_fraction(view.name)  # the same host readings, so the same fraction
    assert expected is not None and history.vram[0] == pytest.approx(expected)
    assert len(state.hosts[host.name].vram) == 101


def test_host_states_survive_the_round_trip(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A host that is down is stored as it was seen: its state, its error, and no GPUs (not zeros)."""
    host = replace(sample_host(), state=HostState.UNREACHABLE, error="connection refused", gpus=(), processes=())
    path = tmp_path / "history.sqlite3"
    store = Store(path, background=False)
    at = time.time()
    store.host(replace(host, fetched_at=at), at)
    store.close()
    (row,) = exported(path, capsys)
    assert (row["state"], row["error"], row["gpus"]) == ("unreachable", "connection refused", [])


def test_the_dictionaries_kept_for_a_session_hold_no_more_memory_than_their_bytes(tmp_path: Path) -> None:
    """The writer keeps each target's dictionary (its first poll's JSON) for the session: 1,250 of them at
    1,000 engines. orjson's bytes keep the buffer they were grown in (16 KB for a 3 KB poll), so the kept
    ones are copies of their own length: their traced memory is their bytes, not five times that."""
    store = Store(tmp_path / "history.sqlite3", background=False)
    at = time.time()
    tracemalloc.start()
    try:
        for i in range(50):
            store.host(replace(sample_host(), name=f"gpu-box-{i:02d}", fetched_at=at), at)
        store.flush()
        files = (store_writer.__file__, store_codec.__file__)  # where they are made: the poll's JSON, a copy
        kept = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(True, f) for f in files])
    finally:
        tracemalloc.stop()
        store.close()
    data = sum(len(d) for d in store._dict_data.values())
    assert len(store._dict_data) == 50 and data > 50 * 500
    assert sum(stat.size for stat in kept.statistics("filename")) < 2 * data


def test_a_poll_is_stored_as_compact_json_and_read_back_as_it_was() -> None:
    """What the codec writes: compact JSON, a non-finite number as null (`status --json` prints none either),
    a key that is not a string as a string; deflated against a dictionary and read back the same."""
    doc = {"name": "vllm-a", "rate": 1.5e16, "nan": math.nan, "ranks": {0: math.inf, "1": 2}, "models": ("q",)}
    raw = dumps(doc)
    assert raw == b'{"name":"vllm-a","rate":1.5e+16,"nan":null,"ranks":{"0":null,"1":2},"models":["q"]}'
    assert json.loads(raw) == {"name": "vllm-a", "rate": 1.5e16, "nan": None, "ranks": {"0": None, "1": 2},
                               "models": ["q"]}  # fmt: skip
    assert decode(deflate(raw, raw), raw) == json.loads(raw) == decode(raw, None)
    assert dumps({"tokens": 2**70, "nan": math.nan}) == b'{"tokens":1180591620717411303424,"nan":null}'  # past 64 bits
