"""Ollama residency from real captures: /api/ps (size, size in VRAM, expiry), the server config line's
OLLAMA_KEEP_ALIVE / OLLAMA_NUM_PARALLEL, and a client overriding keep-alive pointed out."""

from __future__ import annotations

import datetime as dt
import json
import math
from pathlib import Path

import pytest

from poolconsole.collect.engines.jsonparse import parse_ollama_ps
from poolconsole.model import ollama
from poolconsole.model.snapshots import OllamaModel
from poolconsole.ops.ollama import keep_alive_value
from tests.conftest import FIXTURES, REAL

PS = REAL / "issue-samples" / "ollama-api-ps-2025-08-nirmato-issue13.txt"
CONFIG_LINES = FIXTURES / "log-lines" / "ollama-server-config.txt"


def capture_json(path: Path) -> str:
    """The JSON document of a capture: from its first `{` line to the matching closing `}` line."""
    lines = path.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line == "{")
    end = next(i for i in range(start, len(lines)) if lines[i] == "}")
    return "\n".join(lines[start : end + 1])


def test_real_api_ps_rows() -> None:
    (model,) = parse_ollama_ps(capture_json(PS))
    assert model.name == "gemma3:latest" and model.size_bytes == model.size_vram_bytes == 5964735424
    assert model.context_length is None  # this server predates context_length: unknown, not 0
    expires = ollama.parse_expiry(model.expires_at)
    assert expires is not None
    assert expires == pytest.approx(dt.datetime(2025, 8, 7, 22, 7, 26, 817828, dt.UTC).timestamp(), abs=1e-3)
    residency = ollama.observe(None, [model], expires - 200)
    (row,) = ollama.rows(residency, None, expires - 150)
    assert row.vram_share == 1.0 and row.expires_in_s == pytest.approx(150, abs=0.01)
    assert ollama.duration_text(row.expires_in_s) == "2m30s" and row.context is None
    assert row.override is None  # the server's keep-alive unknown: nothing is judged


def test_server_config_lines_from_real_logs() -> None:
    lines = [line for line in CONFIG_LINES.read_text().splitlines() if line and not line.startswith("#")]
    old, new = (ollama.parse_server_config(line, "log") for line in lines)
    assert (old.keep_alive_s, old.num_parallel, old.parallel_text()) == (300.0, 0, "auto")
    assert new.keep_alive_s is not None and new.keep_alive_s >= ollama.FOREVER_S and new.num_parallel == 1
    assert new.keep_alive_text() == "forever" and old.keep_alive_text() == "5m00s"
    assert ollama.parse_server_config("level=INFO msg=listening", "log").error is not None


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("5m0s", 300.0), ("1h0m0s", 3600.0), ("0s", 0.0), ("1m30.5s", 90.5), ("2562047h47m16.854775807s", 9223372036.85)],
)
def test_go_durations(text: str, seconds: float) -> None:
    got = ollama.parse_go_duration(text)
    assert got is not None and math.isclose(got, seconds, rel_tol=1e-3)


def model(name: str, expires: float) -> OllamaModel:
    stamp = dt.datetime.fromtimestamp(expires, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f") + "123Z"
    return OllamaModel(name, 1000, 800, 8192, stamp)


SERVER = ollama.OllamaServer(300.0, 4, "log")
T = 1_796_000_000.0


def test_keep_alive_overrides_are_pointed_out() -> None:
    r = ollama.observe(None, [model("a", T + 280), model("b", T + 9e9), model("c", T + 1800)], T)
    by_name = {row.name: row for row in ollama.rows(r, SERVER, T + 10)}
    assert by_name["a"].override is None and by_name["a"].vram_share == 0.8  # 20 % offloaded to system RAM
    assert by_name["b"].override is not None and "kept forever: a client sent keep_alive -1" in by_name["b"].override
    assert by_name["c"].override is not None and "beyond the server's OLLAMA_KEEP_ALIVE=5m00s" in by_name["c"].override
    # a request refreshes a's expiry to 30 s from now: a client's keep_alive under the server's 5m
    r = ollama.observe(r, [model("a", T + 32), model("b", T + 9e9), model("c", T + 1800)], T + 2)
    a = next(row for row in ollama.rows(r, SERVER, T + 3) if row.name == "a")
    assert a.override is not None and "~30s" in a.override and "unloads early" in a.override
    # c leaves long before its expiry; a, due now, leaves on time
    r = ollama.observe(r, [model("b", T + 9e9)], T + 40)
    (note,) = ollama.notes(r, SERVER, T + 41)
    assert note.startswith("c unloaded") and "keep_alive 0" in note


def test_operator_keep_alive_values() -> None:
    assert keep_alive_value("10m") == "10m" and keep_alive_value("-1") == -1 and keep_alive_value("300") == 300
    assert keep_alive_value("1h30m") == "1h30m"
    for bad in ("", "ten minutes", "5 m", "10m; rm -rf /"):
        with pytest.raises(ValueError):
            keep_alive_value(bad)
    assert json.dumps({"keep_alive": keep_alive_value("-1")}) == '{"keep_alive": -1}'
