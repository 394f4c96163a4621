"""The capacity ledger on a real recording (issue 15): `poolconsole record` on the demo pool for a few
seconds, then `ledger --json` holds each engine's output tokens of the day equal to the reset-safe counter
growth `export` gives over the same rows, energy from the hosts' GPU power, and a decision with its reason.

The demo pool runs as a subprocess (`poolconsole demo --serve-only`), `record` as another, as in
test_store.py."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from poolconsole import cli
from poolconsole.config import load_config
from poolconsole.runtime.store import Reader
from tests.helpers.demo_serve import served_demo, start_record

ROOT = Path(__file__).resolve().parents[2]
RECORD_S = 12.0


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """The demo pool recorded for RECORD_S seconds: (its hosts.toml, the store)."""
    folder = tmp_path_factory.mktemp("ledger")
    store = folder / "history.sqlite3"
    with served_demo(folder) as config:
        record, _ = start_record(config, store)
        time.sleep(RECORD_S)
        record.send_signal(signal.SIGTERM)
        assert record.wait(30) == 0
        yield config, store


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
    capsys.readouterr()
    assert cli.main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def test_ledger_output_tokens_equal_the_counter_growth_in_export(
    recording: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    config_path, store = recording
    config = load_config(config_path)
    doc = run_json(capsys, "ledger", "--store", str(store), "--config", str(config_path), "--json")

    capsys.readouterr()
    assert cli.main(["export", "--store", str(store)]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    growth: dict[tuple[str, str], float] = {}
    first: dict[tuple[str, str], float] = {}
    last: dict[tuple[str, str], float] = {}
    for row in rows:
        if row["target_type"] != "engine":
            continue
        key = (row["taken_at"][:10], row["name"])
        counted = row["increase"].get("generation_tokens_total")
        if counted is not None:
            growth[key] = growth.get(key, 0.0) + counted
        total = row["totals"].get("generation_tokens_total")
        if total is not None:
            first.setdefault(key, total)
            last[key] = total
    entries = {(e["date"], e["engine"]): e for e in doc["entries"]}
    assert {name for _, name in entries} == {e.name for e in config.engines}
    produced = {k: e["output_tokens"] for k, e in entries.items() if e["output_tokens"] is not None}
    assert produced == {k: round(v) for k, v in growth.items()}  # every engine with a counter, to the token
    assert produced == {k: round(last[k] - first[k]) for k in produced}  # = the running totals' growth
    assert sum(produced.values()) > 0, "the demo's load produced no tokens while recorded"

    by_name = {e.name: e for e in config.engines}
    for (_, name), e in entries.items():
        if by_name[name].kind.value == "litellm":
            assert e["output_tokens"] is None and e["energy_kwh"] is None
        if by_name[name].kind.value == "llamacpp":
            assert e["requests"] is None and e["unknown"]["requests"]
        if by_name[name].kind.value in ("vllm", "sglang"):
            assert e["requests"] is not None and e["busy_s"] is not None
            assert e["busy_s"] + e["idle_s"] <= RECORD_S + 5
    powered = [e for e in entries.values() if e["energy_kwh"]]
    assert powered and all(e["energy_kwh"] < 1.0 for e in powered)  # watts over seconds: well under a kWh

    decision = doc["decision"]
    today = {k: v for k, v in produced.items() if by_name[k[1]].kind.value != "litellm"}
    assert decision["output_tokens_per_day"] == sum(today.values())  # one day: the median is that day
    assert decision["pays_off"] is None
    assert "1 day of data" in decision["reason"] and "too early" in decision["reason"]
    assert {"date", "engine", "prompt_tokens", "output_tokens", "requests", "busy_s", "energy_kwh"} <= set(
        doc["entries"][0]
    )


def test_ledger_text_and_its_errors(recording: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    config_path, store = recording
    capsys.readouterr()
    assert cli.main(["ledger", "--store", str(store), "--config", str(config_path), "--days", "3"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split()[:4] == ["DATE", "ENGINE", "PROMPT", "OUTPUT"]
    assert "decision: " in out and "too early" in out
    with Reader(store):  # the store is intact and still readable
        pass
    assert cli.main(["ledger", "--store", str(store.with_name("missing.sqlite3")), "--config", str(config_path)]) == 2
    assert "no history store" in capsys.readouterr().err


def test_ledger_idle_burn_per_host_matches_the_engines_energy(
    recording: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """`hosts` in `ledger --json`: per host, busy / idle / unknown time within what was recorded, power at
    idle or under load where the GPUs reported it, and the host's energy equal to its engines' energy plus its
    unattributed energy (the same GPU readings, split or not)."""
    config_path, store = recording
    config = load_config(config_path)
    doc = run_json(capsys, "ledger", "--store", str(store), "--config", str(config_path), "--json")
    hosts = {e["host"]: e for e in doc["hosts"] if e["date"] == doc["to"]}
    assert hosts, "no host in the ledger's hosts"
    assert set(hosts) <= {h.name for h in config.hosts}
    engine_kwh: dict[str, float] = {}
    for e in doc["entries"]:
        if e["energy_kwh"] is not None and e["host"]:
            engine_kwh[e["host"]] = engine_kwh.get(e["host"], 0.0) + e["energy_kwh"]
    for u in doc["unattributed_energy"]:
        engine_kwh[u["host"]] = engine_kwh.get(u["host"], 0.0) + u["energy_kwh"]
    powered = 0
    for name, h in hosts.items():
        assert h["busy_s"] + h["idle_s"] + h["unknown_s"] <= RECORD_S + 5, name
        if h["energy_kwh"] is not None:
            powered += 1
            assert h["energy_kwh"] == pytest.approx(engine_kwh.get(name, 0.0), abs=1e-5), name
            watts = [w for w in (h["idle_power_w"], h["load_power_w"]) if w is not None]
            assert watts and all(0 < w < 5000 for w in watts), (name, h)
    assert powered, "no host with a GPU power reading"
    assert any(h["busy_s"] + h["idle_s"] > 0 for h in hosts.values())
    capsys.readouterr()
    assert cli.main(["ledger", "--store", str(store), "--config", str(config_path)]) == 0
    assert f"idle burn per host today ({doc['to']}):" in capsys.readouterr().out
