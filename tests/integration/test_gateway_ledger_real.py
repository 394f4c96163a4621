"""The gateway's own accounting on real parts (issue 15, items 1, 3 and 7): the real LiteLLM proxy 1.108.7
(its `prometheus` callback, no database, two caller keys through a custom-auth module) routing two model
groups to one real llama-server, recorded by `poolconsole record`. After a known set of calls, `ledger
--json` holds per route and caller exactly the requests sent and the tokens each response's `usage`
reported; the calls sent straight to llama-server show up as output tokens that bypassed the gateway; the
callers of the last minute have their requests and rate limits; and no key is in the store or the output."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from poolconsole import cli
from poolconsole.collect.engines.litellm_usage import METRICS_PATH, parse_usage
from poolconsole.runtime.store import Reader
from tests.helpers.engines import litellm_binary, litellm_proxy, llama_server, model_path

pytestmark = pytest.mark.engine

ROOT = Path(__file__).resolve().parents[2]
RPM_LIMIT = 600
AUTH = """
from litellm.proxy._types import UserAPIKeyAuth

KEYS = {KEYS!r}


async def user_api_key_auth(request, api_key):
    alias = KEYS.get(api_key)
    if alias is None:
        raise Exception("unknown key")
    return UserAPIKeyAuth(api_key=api_key, key_alias=alias, rpm_limit={RPM_LIMIT}, max_parallel_requests=8)
"""


def _chat(
    client: httpx.Client, url: str, key: str | None, model: str, max_tokens: int, stream: bool = False
) -> dict[str, int]:
    """One call; the usage the engine reported in its response (the last SSE chunk's when streamed)."""
    body: dict[str, Any] = {
        "model": model,
        "messages": [{"role": "user", "content": f"count to {max_tokens}"}],
        "max_tokens": max_tokens,
        "temperature": 0,
    }
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    if not stream:
        reply = client.post(url + "/v1/chat/completions", json=body, headers=headers)
        assert reply.status_code == 200, reply.text
        usage = reply.json()["usage"]
        return {"prompt_tokens": usage["prompt_tokens"], "output_tokens": usage["completion_tokens"]}
    body |= {"stream": True, "stream_options": {"include_usage": True}}
    found: dict[str, int] = {}
    with client.stream("POST", url + "/v1/chat/completions", json=body, headers=headers) as reply:
        assert reply.status_code == 200
        for line in reply.iter_lines():
            if line.startswith("data: {"):
                usage = json.loads(line[6:]).get("usage")
                if usage:
                    found = {"prompt_tokens": usage["prompt_tokens"], "output_tokens": usage["completion_tokens"]}
    assert found, "the stream carried no usage chunk"
    return found


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("gateway-ledger")
    prom = subprocess.run(
        [str(Path(litellm_binary()).parent / "python"), "-c", "import prometheus_client"], capture_output=True
    )
    assert prom.returncode == 0, "prometheus-client is missing beside LiteLLM: rerun scripts/setup-litellm.sh"
    keys = {
        "alpha": "sk-alpha-" + secrets.token_hex(12),
        "beta": "sk-beta-" + secrets.token_hex(12),
        "ops": "sk-ops-" + secrets.token_hex(12),
    }
    (tmp / "pc_gateway_auth.py").write_text(
        AUTH.replace("{KEYS!r}", repr({v: k for k, v in keys.items()})).replace("{RPM_LIMIT}", str(RPM_LIMIT))
    )
    with (
        llama_server(tmp, model_path("tiny"), "--parallel", "2") as engine,
        litellm_proxy(
            tmp,
            {"tiny": engine, "tiny-b": engine},
            keys["ops"],
            backend_models={"tiny-b": "tiny"},
            callbacks=["prometheus"],
            custom_auth="pc_gateway_auth.user_api_key_auth",
        ) as gateway,
    ):
        config, store = tmp / "hosts.toml", tmp / "history.sqlite3"
        config.write_text(
            "[settings]\npoll_interval_s = 0.5\n\n"
            f'[[engines]]\nname = "llama"\nkind = "llamacpp"\nurl = "{engine}"\n\n'
            f'[[engines]]\nname = "gw"\nkind = "litellm"\nurl = "{gateway}"\napi_key_env = "PC_TEST_GATEWAY_KEY"\n'
        )
        record = subprocess.Popen(
            [sys.executable, "-m", "poolconsole", "record", "--config", str(config), "--store", str(store)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PC_TEST_GATEWAY_KEY": keys["ops"]},
        )
        try:
            assert record.stdout is not None
            assert record.stdout.readline().startswith("recording "), record.stderr.read() if record.stderr else ""
            time.sleep(3.0)  # the first polls of both: the baseline, which counts nothing
            sent: dict[tuple[str, str], list[dict[str, int]]] = {}
            bypass: list[dict[str, int]] = []
            plan = [("alpha", "tiny", 8, False), ("alpha", "tiny", 9, False), ("alpha", "tiny", 10, False),
                    ("alpha", "tiny-b", 7, True), ("beta", "tiny-b", 11, False), ("beta", "tiny-b", 12, False),
                    ("beta", "tiny", 6, False)]  # fmt: skip
            with httpx.Client(timeout=60, trust_env=False) as client:
                for caller, route, tokens, stream in plan:
                    usage = _chat(client, gateway, keys[caller], route, tokens, stream)
                    sent.setdefault((route, caller), []).append(usage)
                for tokens in (40, 41, 42):
                    bypass.append(_chat(client, engine, None, "tiny", tokens))
                deadline = time.monotonic() + 60  # LiteLLM counts after the response, in a background task
                while True:
                    page = client.get(gateway + METRICS_PATH, headers={"Authorization": f"Bearer {keys['ops']}"})
                    assert page.status_code == 200 and len(page.content) < 16_000, page.text[:300]  # name[] honoured
                    counted = sum(c["requests"] for c in parse_usage(page.content)["callers"])
                    if counted >= len(plan) or time.monotonic() > deadline:
                        break
                    time.sleep(0.3)
            time.sleep(2.0)  # a few more polls of both after the last count
        finally:
            record.send_signal(signal.SIGTERM)
            assert record.wait(30) == 0
        yield {"config": config, "store": store, "keys": keys, "sent": sent, "bypass": bypass}


def _ledger(capsys: pytest.CaptureFixture[str], recorded: dict[str, Any], *extra: str) -> str:
    capsys.readouterr()
    argv = ["ledger", "--store", str(recorded["store"]), "--config", str(recorded["config"]), *extra]
    assert cli.main(argv) == 0
    return capsys.readouterr().out


def test_gateway_totals_equal_what_was_sent(recorded: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    doc = json.loads(_ledger(capsys, recorded, "--json"))
    got = {
        (g["route"], g["caller"]): (g["requests"], g["failed_requests"], g["prompt_tokens"], g["output_tokens"])
        for g in doc["gateway"]
    }
    expected = {
        key: (len(calls), 0, sum(c["prompt_tokens"] for c in calls), sum(c["output_tokens"] for c in calls))
        for key, calls in recorded["sent"].items()
    }
    assert got == expected  # requests exactly; tokens as each response's usage said, per route and caller
    assert {g["gateway"] for g in doc["gateway"]} == {"gw"}
    assert all(g["models"] == ["tiny"] for g in doc["gateway"])
    # every existing field is still there
    assert {"entries", "unattributed_energy", "costs", "decision"} <= set(doc)


def test_traffic_around_the_gateway_is_flagged(recorded: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    doc = json.loads(_ledger(capsys, recorded, "--json"))
    through = sum(c["output_tokens"] for calls in recorded["sent"].values() for c in calls)
    around = sum(c["output_tokens"] for c in recorded["bypass"])
    assert around > 50  # over the tolerance, or there would be nothing to flag
    engine = {e["engine"]: e for e in doc["entries"]}["llama"]
    assert engine["output_tokens"] == through + around  # the engine counted both
    [mismatch] = doc["mismatches"]
    assert mismatch["engine"] == "llama" and mismatch["routes"] == ["tiny", "tiny-b"]
    assert mismatch["gateway_output_tokens"] == through
    assert mismatch["bypassed_output_tokens"] == around
    assert "bypassed the gateway" in mismatch["reason"]
    assert "bypassed the gateway" in _ledger(capsys, recorded)


def test_callers_of_the_last_minute(recorded: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    now = json.loads(_ledger(capsys, recorded, "--json"))["callers_now"]
    callers = {c["caller"]: c for c in now["callers"]}
    assert set(callers) == {"alpha", "beta"}
    for name, count in (("alpha", 4), ("beta", 3)):
        c = callers[name]
        assert round(c["rpm"] * c["window_s"] / 60) == count  # every request of the recording's last minute
        assert c["rpm_limit"] == RPM_LIMIT  # the limit the gateway enforces on that key
        assert c["concurrency"] > 0
    assert callers["alpha"]["share"] == pytest.approx(4 / 7, abs=0.01)
    assert now["saturating"] is None and "nobody is saturating" in now["reason"]  # llama-server never queued


def test_no_key_is_kept(recorded: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    with Reader(recorded["store"]) as reader:
        stored = "\n".join(json.dumps(r.values) for r in reader.rows())
    assert '"gateway_usage"' in stored
    out = _ledger(capsys, recorded) + _ledger(capsys, recorded, "--json")
    for key in recorded["keys"].values():
        assert key not in stored and key not in out
        assert key[3:] not in stored and key[3:] not in out
