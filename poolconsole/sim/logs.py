"""The simulated engines' container logs, and what a simulated host answers to the log commands
poolconsole sends (collect.engine_logs): `docker logs [--tail N] [--since Ns] [--follow] NAME`, wrapped in
the one-shot read's `{ ...; printf EXIT; } | tail -c BYTES`, or piped into `grep -a -F -e ... | tail -n 1`
(the Ollama server's settings line).

A container's log keeps every run, as `docker logs` does across restarts: the crash that caused a restart
is still there after it. Each line is stamped with the wall time it was written (what `--since` selects
by). The lines follow the engines' own formats (vLLM's `(APIServer pid=1) INFO MM-DD HH:MM:SS [file:line]`,
Ollama's slog `time=... level=INFO source=... msg=...`); the failure lines are real engines' messages,
verbatim."""

from __future__ import annotations

import re
import shlex
import time
from collections import deque
from collections.abc import Callable, Iterable

MAX_LOG_LINES = 5000
"""Per container: the oldest lines go (a real log rotates too)."""

OOM_LINE = (
    "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.50 GiB. GPU 0 has a total capacty of "
    "23.69 GiB of which 3.09 GiB is free. Including non-PyTorch memory, this process has 20.57 GiB memory in use. "
    "Of the allocated memory 20.13 GiB is allocated by PyTorch, and 755.50 KiB is reserved by PyTorch but "
    "unallocated. If reserved but unallocated memory is large try setting max_split_size_mb to avoid "
    "fragmentation.  See documentation for Memory Management and PYTORCH_CUDA_ALLOC_CONF"
)
"""A real vLLM worker's CUDA out-of-memory message on a 24 GB card (vllm-project/vllm#2140), verbatim."""

OLLAMA_SERVER_CONFIG = (
    'msg="server config" env="map[CUDA_VISIBLE_DEVICES:0 GPU_DEVICE_ORDINAL: HIP_VISIBLE_DEVICES: '
    "HSA_OVERRIDE_GFX_VERSION: HTTPS_PROXY: HTTP_PROXY: NO_PROXY: OLLAMA_CONTEXT_LENGTH:8192 OLLAMA_DEBUG:INFO "
    "OLLAMA_FLASH_ATTENTION:false OLLAMA_GPU_OVERHEAD:0 OLLAMA_HOST:http://{address} "
    "OLLAMA_KEEP_ALIVE:{keep_alive} OLLAMA_KV_CACHE_TYPE: OLLAMA_LLM_LIBRARY: OLLAMA_LOAD_TIMEOUT:5m0s "
    "OLLAMA_MAX_LOADED_MODELS:0 OLLAMA_MAX_QUEUE:512 OLLAMA_MODELS:/root/.ollama/models OLLAMA_NOHISTORY:false "
    "OLLAMA_NOPRUNE:false OLLAMA_NUM_PARALLEL:{parallel} OLLAMA_ORIGINS:[http://localhost https://localhost "
    "http://127.0.0.1 https://127.0.0.1 app://* file://* tauri://* vscode-webview://* vscode-file://*] "
    'OLLAMA_SCHED_SPREAD:false ROCR_VISIBLE_DEVICES: http_proxy: https_proxy: no_proxy:]"'
)
"""The first line an Ollama server logs (routes.go), in the format of ollama/ollama#16592 and #9722."""

READ = re.compile(r"^\{ (?P<argv>.+) 2>&1; printf '\\n(?P<mark>[\w-]+:)%s\\n' \"\$\?\"; \} \| tail -c (?P<bytes>\d+)$")
GREP = re.compile(r"^(?P<argv>.+?) 2>&1 \| grep -a -F -e (?P<pattern>\S+) \| tail -n 1$")
FOLLOW = re.compile(r"^(?P<argv>.+) 2>&1$")


class ContainerLog:
    """One container's output: (wall time, line), bounded."""

    def __init__(self) -> None:
        self.lines: deque[tuple[float, str]] = deque(maxlen=MAX_LOG_LINES)
        self.written = 0
        """Lines written in all (a follower's position survives the oldest lines going)."""

    def write(self, *lines: str, at: float | None = None) -> None:
        stamp = time.time() if at is None else at
        for line in lines:
            self.lines.append((stamp, line))
            self.written += 1

    def select(self, tail: int | None, since_s: float | None, now: float | None = None) -> list[str]:
        """What `docker logs [--since] [--tail]` prints: the lines since then, the newest `tail` of them."""
        now = time.time() if now is None else now
        picked = [line for at, line in self.lines if since_s is None or at >= now - since_s]
        return picked[-tail:] if tail is not None and tail >= 0 else picked

    def after(self, seen: int) -> tuple[list[str], int]:
        """Lines written after the first `seen`, and the new count (for `--follow`)."""
        new = self.written - seen
        if new <= 0:
            return [], self.written
        return [line for _, line in list(self.lines)[-min(new, len(self.lines)) :]], self.written


def vllm_line(level: str, where: str, text: str, process: str = "APIServer pid=1", at: float | None = None) -> str:
    stamp = time.strftime("%m-%d %H:%M:%S", time.localtime(time.time() if at is None else at))
    return f"({process}) {level} {stamp} [{where}] {text}"


def slog_line(level: str, source: str, text: str, at: float | None = None) -> str:
    now = time.time() if at is None else at
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1000):03d}Z"
    return f"time={stamp} level={level} source={source} {text}"


def startup_lines(kind: str, version: str, model: str, port: int, address: str = "127.0.0.1") -> list[str]:
    """What the engine prints as it starts, in its own format, bound to `address` (what its host's `ss` shows)."""
    if kind == "vllm":
        return [
            vllm_line("INFO", "api_server.py:1839", f"vLLM API server version {version}"),
            vllm_line("INFO", "model.py:547", f"Resolved architecture: {model}"),
            vllm_line("INFO", "gpu_worker.py:298", "Available KV cache memory: 9.80 GiB", "Worker_TP0 pid=270"),
            vllm_line("INFO", "api_server.py:1634", f"Starting vLLM API server 0 on http://{address}:{port}"),
            "(APIServer pid=1) INFO:     Started server process [1]",
            "(APIServer pid=1) INFO:     Waiting for application startup.",
            "(APIServer pid=1) INFO:     Application startup complete.",
        ]
    if kind == "sglang":
        return [
            f"[2026-11-29 00:00:00] server_args=ServerArgs(model_path='/models/{model}', port={port})",
            "[2026-11-29 00:00:05 TP0] Load weight end. type=Gemma3ForConditionalGeneration, dtype=torch.bfloat16",
            "[2026-11-29 00:00:09] INFO:     Application startup complete.",
        ]
    if kind == "llamacpp":
        return [
            f"build: {version} with cc (GCC) for x86_64-linux-gnu",
            f"main: HTTP server is listening, hostname: {address}, port: {port}, http threads: 7",
            f"main: server is listening on http://{address}:{port} - starting the main loop",
        ]
    return []


def answer(command: str, logs: Callable[[str], ContainerLog | None]) -> tuple[str, str, int] | None:
    """The one-shot read or the settings grep of a container's log, or None when `command` is neither."""
    read = READ.match(command)
    if read is not None:
        out, err, code = docker_logs(read["argv"], logs)
        text = f"{out}{err}\n{read['mark']}{code}\n"
        keep = int(read["bytes"])
        data = text.encode()
        return data[-keep:].decode(errors="replace"), "", 0
    grep = GREP.match(command)
    if grep is not None:
        pattern = shlex.split(grep["pattern"])[0]
        out, err, code = docker_logs(grep["argv"], logs)
        hits = [line for line in (out + err).splitlines() if pattern in line]
        return (hits[-1] + "\n" if hits else ""), "", 0 if hits else 1
    return None


def parse_logs_argv(words: list[str]) -> tuple[str, int | None, float | None, bool] | None:
    """(container, --tail, --since seconds, --follow) of `docker logs ...`, None when it is not one."""
    if words[:2] != ["docker", "logs"] or len(words) < 3:
        return None
    tail: int | None = None
    since: float | None = None
    follow = False
    rest = words[2:]
    while len(rest) > 1:
        flag = rest.pop(0)
        if flag == "--tail":
            tail = int(rest.pop(0))
        elif flag == "--since":
            value = rest.pop(0)
            since = float(value.removesuffix("s"))
        elif flag in ("--follow", "-f"):
            follow = True
        else:
            return None
    return rest[0], tail, since, follow


def follow_request(command: str) -> tuple[str, int | None] | None:
    """(container, --tail) of a followed read (`docker logs ... --follow NAME 2>&1`), else None."""
    found = FOLLOW.match(command)
    try:
        parsed = parse_logs_argv(shlex.split(found["argv"])) if found is not None else None
    except ValueError:
        return None
    return (parsed[0], parsed[1]) if parsed is not None and parsed[3] else None


def docker_logs(argv: str, logs: Callable[[str], ContainerLog | None]) -> tuple[str, str, int]:
    try:
        parsed = parse_logs_argv(shlex.split(argv))
    except ValueError:  # unbalanced quotes, or a --tail that is no number
        parsed = None
    if parsed is None:
        return "", f"sh: 1: {argv.split()[0]}: not found\n", 127
    name, tail, since, _ = parsed
    log = logs(name)
    if log is None:
        return "", f"Error response from daemon: No such container: {name}\n", 1
    return join(log.select(tail, since)), "", 0


def join(lines: Iterable[str]) -> str:
    text = "\n".join(lines)
    return text + "\n" if text else ""
