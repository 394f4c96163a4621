"""Engine logs and the exposure audit on real parts: a real sshd, a real supervisord running a real
llama-server that cannot hold the context it is given (diagnosed from its own log line, read with
`supervisorctl tail` and from the file over SSH), `tail -F` followed over SSH, and two real llama-servers,
one without a key listening on 0.0.0.0 inside a network namespace, one with `--api-key` on loopback, their
listening sockets read with the real `ss` over SSH."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from poolconsole.cli import main
from poolconsole.collect.engine_logs import MAX_LINE_CHARS, follow_logs
from poolconsole.collect.ssh import SSHPool
from poolconsole.config import parse_config
from poolconsole.config.models import EngineKind
from poolconsole.model.failure_modes import Finding
from tests.helpers.engines import litellm_proxy, llama_server, llama_server_binary, model_path
from tests.helpers.rawhttp import free_port
from tests.helpers.sshd import Lab, NetNamespace
from tests.helpers.supervised import Supervisor

pytestmark = pytest.mark.engine
CANARY = "hf_canary_0123456789abcdef"


def test_logs_diagnose_a_llama_server_that_cannot_hold_its_context(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pwned = tmp_path / "pwned"
    start = tmp_path / "start.sh"
    start.write_text(
        f"echo HF_TOKEN={CANARY}\n"
        f"echo '$(touch {pwned})' \"'; touch {pwned}; '\"\n"  # log text that would run if it reached a shell
        "ulimit -v 1500000\n"
        f"exec {llama_server_binary()} -m {model_path('tiny')} -c 2000000 --fit off -t 1 --host 127.0.0.1 "
        f"--port {free_port()}\n"
    )
    options = {"command": f"/bin/sh {start}", "startsecs": "1", "startretries": "0", "autorestart": "false"}
    supervisor = Supervisor(tmp_path / "supervisor", {"llama": options})
    lab = Lab(tmp_path / "lab")
    try:
        lab.add("box", {}, ())
        supervisor.start()
        deadline = time.monotonic() + 60
        while not _ended(supervisor.ctl("status", "llama")) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _ended(supervisor.ctl("status", "llama"))
        engines = (
            f'[[engines]]\nname = "llama"\nkind = "llamacpp"\nurl = "http://127.0.0.1:1"\nhost = "box"\n'
            f'[engines.control]\nbackend = "supervisor"\nname = "llama"\nsupervisor_conf = "{supervisor.conf}"\n'
            f'[[engines]]\nname = "llama-file"\nkind = "llamacpp"\nurl = "http://127.0.0.1:2"\nhost = "box"\n'
            f'[engines.logs]\nsource = "file"\npath = "{supervisor.root / "llama.log"}"\n'
        )
        config = tmp_path / "pool.toml"
        config.write_text(lab.toml(engines))

        rc = main(["logs", "llama", "--config", str(config), "--json"])
        out = capsys.readouterr().out
        doc = json.loads(out)
        assert rc == 1, "a failure mode found exits 1"
        assert doc["source"] == "supervisorctl tail llama" and doc["error"] is None
        [finding] = doc["findings"]
        assert finding["pattern"] == "llamacpp_buffer_alloc"
        assert "failed to allocate" in finding["line"] and finding["line"] in doc["lines"]
        assert finding["adjustment"].startswith("Lower -c")
        assert any("exiting due to model loading error" in line for line in doc["lines"])
        assert CANARY not in out and "HF_TOKEN=<redacted>" in out

        rc = main(["logs", "llama-file", "--config", str(config), "--json", "--since", "10m", "--lines", "50"])
        file_doc = json.loads(capsys.readouterr().out)
        assert rc == 1 and [f["pattern"] for f in file_doc["findings"]] == ["llamacpp_buffer_alloc"]
        assert "--since not applied" in file_doc["note"]
        assert len(file_doc["lines"]) <= 50

        rc = main(["logs", "llama", "--config", str(config)])
        text = capsys.readouterr().out
        assert rc == 1 and "!! llama.cpp buffer allocation failed" in text and "change: Lower -c" in text
        assert not pwned.exists(), "log text reached a shell"
    finally:
        supervisor.stop()
        lab.stop()


def _ended(status: str) -> bool:
    return "EXITED" in status or "FATAL" in status


async def test_follow_sees_a_new_failure_line_and_bounds_an_endless_one(tmp_path: Path) -> None:
    log = tmp_path / "engine.log"
    log.write_text("INFO started\n")
    lab = Lab(tmp_path / "lab")
    try:
        lab.add("box", {}, ())
        engines = (
            f'[[engines]]\nname = "e"\nkind = "vllm"\nurl = "http://127.0.0.1:1"\nhost = "box"\n'
            f'[engines.logs]\nsource = "file"\npath = "{log}"\n'
        )
        config = parse_config(lab.toml(engines))
        pool = SSHPool(config.hosts, 5.0, 2)
        seen: list[tuple[str, Finding | None]] = []
        task = asyncio.create_task(
            follow_logs(pool["box"], config.engines[0], lambda line, f: seen.append((line, f)), lines=10)
        )
        try:
            await _until(lambda: any(line == "INFO started" for line, _ in seen))
            with log.open("a") as fh:
                fh.write("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0\n")
                fh.write("y" * 200_000)  # no newline: must come out cut, not buffered whole
            await _until(lambda: any(f is not None for _, f in seen) and any(line.startswith("y") for line, _ in seen))
            [hit] = [f for _, f in seen if f is not None]
            assert hit.pattern == "cuda_out_of_memory" and "20.00 MiB" in hit.line
            assert all(len(line) <= MAX_LINE_CHARS for line, _ in seen)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await pool.close()
    finally:
        lab.stop()


async def _until(check: Callable[[], bool], timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "not seen in time"
        await asyncio.sleep(0.1)


def _wait(url: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, "llama-server exited"
        try:
            if httpx.get(url + "/health", timeout=1.0, trust_env=False).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"{url} did not come up")


def test_exposure_flags_an_open_server_on_all_interfaces_and_passes_a_keyed_one_on_loopback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    key = "sk-exposure-test-5f1e"
    monkeypatch.setenv("KEYED_KEY", key)
    ns = NetNamespace(f"px{os.getpid() % 100000}", "10.250.78.1", "10.250.78.2").up()
    lab = Lab(tmp_path / "lab")
    port = free_port()
    model = model_path("tiny")
    cmd = ["ip", "netns", "exec", ns.name, llama_server_binary(), "-m", str(model), "--host", "0.0.0.0"]
    cmd += ["--port", str(port), "-t", "1", "-c", "512", "--metrics"]
    with (tmp_path / "open.log").open("wb") as log:
        open_proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        _wait(f"http://{ns.ns_ip}:{port}", open_proc)
        lab.add("far", {}, (), address=ns.ns_ip, netns=ns.name)
        lab.add("near", {}, ())
        with llama_server(tmp_path, model, "--api-key", key, "-c", "512") as keyed_url:
            keyed_port = int(keyed_url.rsplit(":", 1)[1])
            engines = (
                f'[[engines]]\nname = "open"\nkind = "llamacpp"\nurl = "http://{ns.ns_ip}:{port}"\nhost = "far"\n'
                f'[[engines]]\nname = "keyed"\nkind = "llamacpp"\nurl = "{keyed_url}"\nhost = "near"\n'
                'api_key_env = "KEYED_KEY"\n'
            )
            config = tmp_path / "pool.toml"
            config.write_text(lab.toml(engines))
            open_url = f"http://{ns.ns_ip}:{port}"
            t0 = _prompt_tokens(open_url)
            rc = main(["exposure", "--config", str(config), "--json"])
            out = capsys.readouterr().out
            doc = json.loads(out)
            t1 = _prompt_tokens(open_url)
            rc_skip = main(["exposure", "--config", str(config), "--json", "--no-completion"])
            skipped = json.loads(capsys.readouterr().out)
            t2 = _prompt_tokens(open_url)
            rc_text = main(["exposure", "--config", str(config)])
            text = capsys.readouterr().out
    finally:
        open_proc.terminate()
        open_proc.wait(20)
        lab.stop()
        ns.down()
    assert rc == 1 and doc["exposed"] is True
    entries = {e["name"]: e for e in doc["engines"]}
    opened, keyed = entries["open"], entries["keyed"]
    assert opened["unauthenticated"] is True and opened["listen"] == [f"0.0.0.0:{port}"]
    exposed = {f["check"] for f in opened["findings"] if f["exposed"]}
    assert {"completion_without_key", "models_without_key", "slots_open", "listen_all_interfaces"} <= exposed
    assert all(f["fix"] for f in opened["findings"])
    assert keyed["unauthenticated"] is False and keyed["listen"] == [f"127.0.0.1:{keyed_port}"]
    assert keyed["exposed"] is False and keyed["unchecked"] == []
    assert not {"completion_without_key", "models_without_key", "slots_open", "metrics_without_key"} & {
        f["check"] for f in keyed["findings"]
    }
    assert key not in out
    # --no-completion: the same verdicts from the models list alone, and nothing generated anywhere
    assert rc_skip == 1 and skipped["completion_probe"] is False
    verdicts = {e["name"]: e["unauthenticated"] for e in skipped["engines"]}
    assert verdicts == {"open": True, "keyed": False}
    assert t1 > t0, "the one-token completion reached the open engine"
    assert t2 == t1, "--no-completion still generated"
    *rows, summary = [line for line in text.splitlines() if line[:1] not in ("", " ")]
    said = {line.split()[1]: line.split()[0] for line in rows}  # the last line is the audit's summary
    assert rc_text == 1 and said["open"] == "EXPOSED" and "fix:" in text
    assert summary == "EXPOSED: open (1 of 2)", summary
    assert said["keyed"] == ("contained" if keyed["findings"] else "ok")  # the exposure screen's words


def test_exposure_flags_a_litellm_proxy_without_a_master_key_and_passes_one_with_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real LiteLLM proxy in front of a real llama-server, once with a master key and once without: the
    one without lets a key-less caller list models and generate (the backend's prompt counter grows), and is
    flagged with the master-key fix; the one with it refuses both and passes; the key never shows. (This
    LiteLLM refuses to start without a master key unless `dangerously_permit_weak_or_unset_master_key` is
    set: the open one is started so, as an operator would have to.)"""
    master = "sk-gateway-master-" + os.urandom(4).hex()
    monkeypatch.setenv("GATEWAY_KEY", master)
    model = model_path("tiny")
    with (
        llama_server(tmp_path, model, "-c", "512") as backend,
        litellm_proxy(tmp_path, {"tiny": backend}, master) as keyed_url,
        litellm_proxy(tmp_path, {"tiny": backend}, None) as open_url,
    ):
        engines = (
            f'[[engines]]\nname = "gw-open"\nkind = "litellm"\nurl = "{open_url}"\n'
            f'[[engines]]\nname = "gw-keyed"\nkind = "litellm"\nurl = "{keyed_url}"\napi_key_env = "GATEWAY_KEY"\n'
        )
        config = tmp_path / "pool.toml"
        config.write_text(engines)
        t0 = _prompt_tokens(backend)
        rc = main(["exposure", "--config", str(config), "--json"])
        out = capsys.readouterr().out
        t1 = _prompt_tokens(backend)
        rc_skip = main(["exposure", "--config", str(config), "--json", "--no-completion"])
        skipped_out = capsys.readouterr().out
        t2 = _prompt_tokens(backend)
    doc, skipped = json.loads(out), json.loads(skipped_out)
    entries = {e["name"]: e for e in doc["engines"]}
    opened, keyed = entries["gw-open"], entries["gw-keyed"]
    assert rc == 1 and doc["exposed"] is True
    assert opened["unauthenticated"] is True and opened["exposed"] is True
    checks = {f["check"]: f for f in opened["findings"]}
    assert {"litellm_master_key", "completion_without_key", "models_without_key"} <= set(checks)
    assert checks["litellm_master_key"]["exposed"] and "master_key" in checks["litellm_master_key"]["fix"]
    assert "the gateway accepts a caller without a key" in checks["completion_without_key"]["found"]
    assert keyed["unauthenticated"] is False and keyed["exposed"] is False, keyed
    assert not {"litellm_master_key", "completion_without_key", "models_without_key"} & {
        f["check"] for f in keyed["findings"]
    }
    assert t1 > t0, "the key-less completion through the open gateway reached the engine"
    assert rc_skip == 1 and {e["name"]: e["unauthenticated"] for e in skipped["engines"]} == {
        "gw-open": True,
        "gw-keyed": False,
    }
    assert t2 == t1, "--no-completion still generated"
    assert master not in out and master not in skipped_out


def _prompt_tokens(url: str) -> float:
    text = httpx.get(url + "/metrics", trust_env=False).text
    return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith("llamacpp:prompt_tokens_total"))


async def test_an_engine_that_goes_down_gets_its_log_read_and_the_failure_mode_as_an_alert(tmp_path: Path) -> None:
    from poolconsole.model.snapshots import EngineSnapshot, EngineState
    from poolconsole.runtime.live import LivePool, Update
    from poolconsole.ui.screens.detail import engine_text

    log = tmp_path / "vllm.log"
    log.write_text(
        "INFO 11-18 18:07:20 api_server.py:149] vLLM API server version 0.6.4\n"
        "vllm-1  | ERROR 11-18 18:07:28 engine.py:366] ValueError: No available memory for the cache blocks. "
        "Try increasing `gpu_memory_utilization` when initializing the engine.\n"
    )
    lab = Lab(tmp_path / "lab")
    try:
        lab.add("box", {}, ())
        engines = (
            f'[[engines]]\nname = "v"\nkind = "vllm"\nurl = "http://127.0.0.1:1"\nhost = "box"\n'
            f'[engines.logs]\nsource = "file"\npath = "{log}"\n'
        )
        config = parse_config(lab.toml(engines))
        live = LivePool(config)
        heard: list[Update] = []
        live.subscribe(heard.append)
        live.ssh = SSHPool(config.hosts, 5.0, 2)

        def snap(state: EngineState, at: float) -> EngineSnapshot:
            return EngineSnapshot("v", EngineKind.VLLM, "http://127.0.0.1:1", "box", at, at, state, error=None)

        live.apply_engine(snap(EngineState.OK, 1.0))
        live.apply_engine(snap(EngineState.DOWN, 2.0))
        await _until(lambda: any(u.kind == "diagnosis" for u in heard))
        [update] = [u for u in heard if u.kind == "diagnosis"]
        [event] = update.events
        assert event.fired and event.rule == "log:vllm_no_cache_blocks"
        assert "v went down" in event.message and "Change: Raise --gpu-memory-utilization" in event.message
        diagnosis = live.state.engines["v"].diagnosis
        assert diagnosis is not None and diagnosis.reason == "went down"
        shown = engine_text(live.state.engines["v"]).plain
        assert "no memory left for the KV cache" in shown and "change: Raise --gpu-memory-utilization" in shown
        await live.stop()
    finally:
        lab.stop()
