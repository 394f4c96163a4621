"""Start real engine processes for the slow test tier: llama.cpp's llama-server and vLLM's CPU build.

Binaries come from scripts/build-llama-server.sh and scripts/setup-vllm.sh (cached under
~/.cache/poolconsole); scripts/test.sh runs both and exports their paths. A missing engine is a test
failure with the fix in words, never a skip: CI must run this tier.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from tests.helpers.rawhttp import free_port

ROOT = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("POOLCONSOLE_CACHE", Path.home() / ".cache" / "poolconsole"))


def _locate(env: str, script: str) -> str:
    found = os.environ.get(env)
    if found and Path(found).exists():
        return found
    try:
        out = subprocess.run(
            [str(ROOT / "scripts" / script)],
            capture_output=True,
            text=True,
            timeout=1800,
            env={**os.environ, "PYTHON": os.environ.get("PYTHON", sys.executable)},
        )
    except subprocess.TimeoutExpired as exc:
        raise RuntimeError(f"scripts/{script} timed out") from exc
    if out.returncode != 0:
        raise RuntimeError(f"{env} is not set and scripts/{script} failed:\n{out.stderr[-3000:]}")
    return out.stdout.strip().splitlines()[-1]


def litellm_binary() -> str:
    return _locate("POOLCONSOLE_LITELLM", "setup-litellm.sh")


def llama_server_binary() -> str:
    return _locate("POOLCONSOLE_LLAMA_SERVER", "build-llama-server.sh")


def vllm_python() -> str:
    return _locate("POOLCONSOLE_VLLM_PYTHON", "setup-vllm.sh")


def model_path(name: str, **kw: int) -> Path:
    """A generated GGUF, cached by its parameters."""
    from tests.helpers.tiny_gguf import write_tiny_gguf

    tag = "-".join(f"{k}{v}" for k, v in sorted(kw.items()))
    path = CACHE / "models" / f"{name}-{tag or 'default'}.gguf"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        write_tiny_gguf(tmp, **kw)  # type: ignore[arg-type]
        tmp.replace(path)
    return path


def hf_model_path() -> Path:
    path = CACHE / "models" / "tiny-llama-hf"
    if not (path / "READY").exists():
        shutil.rmtree(path, ignore_errors=True)
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
        subprocess.run(
            [vllm_python(), str(ROOT / "tests/helpers/tiny_hf.py"), str(path)],
            check=True,
            env=env,
            capture_output=True,
            timeout=600,
        )
    return path


def wait_http(url: str, proc: subprocess.Popen[bytes], timeout_s: float, log: Path) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"engine exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            if httpx.get(url, timeout=1.0, trust_env=False).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"engine did not answer {url} within {timeout_s} s:\n{log.read_text()[-3000:]}")


@contextmanager
def running(
    cmd: list[str], health: str, port: int, log: Path, timeout_s: float, env: dict[str, str] | None = None
) -> Iterator[str]:
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http(url + health, proc, timeout_s, log)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        # pytest shows a test's captured stderr only when it fails: the engine's side of what went wrong
        print(
            f"--- the end of {log.name} ({' '.join(cmd[:1])}) ---\n{log.read_text(errors='replace')[-4000:]}",
            file=sys.stderr,
        )


@contextmanager
def llama_server(tmp: Path, model: Path, *extra: str, alias: str = "tiny") -> Iterator[str]:
    port = free_port()
    cmd = [
        llama_server_binary(),
        "-m",
        str(model),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--metrics",
        "--alias",
        alias,
        # One thread: llama.cpp's threads spin at a barrier each step, so two on a 2-core machine that also
        # runs the tests (and whatever else) stall each other; a long answer then took minutes and the
        # load test's requests timed out. A later "-t" in `extra` wins.
        "-t",
        "1",
        *extra,
    ]
    with running(cmd, "/health", port, tmp / f"llama-{port}.log", 120) as url:
        yield url


@contextmanager
def vllm_server(tmp: Path, *extra: str) -> Iterator[str]:
    port = free_port()
    work = tmp / "vllm"
    work.mkdir(parents=True, exist_ok=True)
    # vLLM binds ZeroMQ IPC sockets under TMPDIR; a Unix socket path must fit in 107 bytes, which pytest's
    # own tmp paths outgrow (pytest-of-root/pytest-101/test_.../vllm/tmp/<uuid>).
    sockets = Path(tempfile.mkdtemp(prefix="pc-vllm-"))
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "VLLM_HOST_IP": "127.0.0.1",
        "VLLM_CACHE_ROOT": str(CACHE / "vllm-runtime"),
        "TORCHINDUCTOR_CACHE_DIR": str(CACHE / "inductor"),
        "TMPDIR": str(sockets),
        "XDG_CACHE_HOME": str(CACHE / "xdg"),
    }
    cmd = [
        vllm_python(),
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(hf_model_path()),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--served-model-name",
        "tiny",
        "--max-model-len",
        "1024",
        "--max-num-seqs",
        "8",
        "--dtype",
        "float32",
        "--enforce-eager",
        "--block-size",
        "32",
        "--num-gpu-blocks-override",
        "128",
        "--enable-prefix-caching",
        *extra,
    ]
    try:
        with running(cmd, "/health", port, work / "server.log", 300, env) as url:
            yield url
    finally:
        shutil.rmtree(sockets, ignore_errors=True)


OPEN_GATEWAY_SETTING = "dangerously_permit_weak_or_unset_master_key: true"
"""LiteLLM 1.108.7 refuses to start without a master key (UnsafeMasterKeyError) unless this is set."""


@contextmanager
def litellm_proxy(
    tmp: Path,
    backends: dict[str, str],
    master_key: str | None = "sk-poolconsole-test",
    *,
    backend_models: dict[str, str] | None = None,
    callbacks: list[str] | None = None,
    custom_auth: str | None = None,
) -> Iterator[str]:
    """The real LiteLLM proxy (its own virtualenv) routing `model -> llama-server URL`, with a master key.
    `backend_models` names the model a route asks its backend for (default: the route's name); `callbacks`
    go to litellm_settings (["prometheus"] serves the per-route, per-key counters on /metrics/);
    `custom_auth` is `module.function` of a module in `tmp` (caller keys without a database); `master_key`
    None starts it without one, which it then refuses unless told it may (OPEN_GATEWAY_SETTING), and then
    lets every caller in."""
    port = free_port()
    lines = ["model_list:"]
    for model, url in backends.items():
        lines += [
            f"  - model_name: {model}",
            "    litellm_params:",
            f"      model: openai/{(backend_models or {}).get(model, model)}",
            f'      api_base: "{url}/v1"',
            '      api_key: "none"',
        ]
    listed = ", ".join(f'"{c}"' for c in callbacks or ())
    lines += [
        "litellm_settings: {telemetry: false, drop_params: true"
        + (f", callbacks: [{listed}]" if callbacks else "")
        + "}",
        "general_settings: {"
        + ", ".join(
            ([f"master_key: {master_key}"] if master_key is not None else [OPEN_GATEWAY_SETTING])
            + ([f"custom_auth: {custom_auth}"] if custom_auth else [])
        )
        + "}",
    ]
    config = tmp / f"litellm-{port}.yaml"
    config.write_text("\n".join(lines) + "\n")
    env = {
        **os.environ,
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "LITELLM_TELEMETRY": "False",
        "NO_PROXY": "127.0.0.1,localhost",
    }
    if custom_auth:
        env["PYTHONPATH"] = str(tmp)
    cmd = [litellm_binary(), "--config", str(config), "--host", "127.0.0.1", "--port", str(port)]
    with running(cmd, "/health/liveliness", port, tmp / f"litellm-{port}.log", 120, env) as url:
        yield url
