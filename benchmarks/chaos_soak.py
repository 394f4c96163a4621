"""A chaos soak you can rerun (issue 35, deliverable 5): the console, `record` and `watch` for hours on two demo
pools and eight hostile endpoints, the recorder killed with SIGKILL midway; memory, CPU, tracebacks, update
gaps, the hostile rows' words and the store's loss to the kill, each judged against its goal.

    .venv/bin/python benchmarks/chaos_soak.py [--minutes 120] [--warmup-minutes 10] [--out DIR]

What runs, all on 127.0.0.1:
- two simulated pools, `poolconsole demo --serve-only --scenario restart` and `--scenario node-down` (their
  own processes, different seeds), whose hosts.toml files are merged into one (names prefixed `r-` and `n-`);
- eight hostile vLLM endpoints served by this script, added to that hosts.toml as [[engines]]:
  h-502 (an nginx HTML 502 page on every path), h-nul (200 with random bytes and NUL bytes), h-login (200
  with an HTML sign-in page), h-blackhole (accepts, never answers), h-cut (/metrics cut mid-line, its
  Content-Length honest), h-short (/metrics shorter than its Content-Length, then the connection closed),
  h-flap (a real vLLM 0.32.0 page for FLAP_UP_S, then connection refused for FLAP_DOWN_S) and h-reset (the
  same real page, its counters lower on every poll);
- a webhook receiver, the watcher's one [[notify]];
- the console in tmux (`tmux new-session -d -x 160 -y 48`, its own tmux socket), `poolconsole record` and
  `poolconsole watch`, each with its own history store; the recorder gets `kill -9` at the midpoint and is
  started again at once on the same store.

Every --sample-seconds (60) it reads RSS and CPU time of the console, the recorder and the watcher from
/proc and captures the console's screen (OUT/screens/). At the end (also after Ctrl-C or SIGTERM) it stops
everything it started, then reads the three stores and writes OUT/summary.json with the figures and the
goals beside them (printed as well). How each goal is judged is in `judge` below and in BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import itertools
import json
import math
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
import tomllib
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CAPTURE = ROOT / "tests/fixtures/real/vllm-0.32.0-cpu"
VENV_BIN = Path(sys.executable).parent
POOLCONSOLE = str(VENV_BIN / "poolconsole") if (VENV_BIN / "poolconsole").exists() else "poolconsole"

FLAP_UP_S = 15.0
FLAP_DOWN_S = 15.0
RESET_STEPS = 20
"""h-reset: its counters are the capture's times (RESET_STEPS - n % RESET_STEPS) / RESET_STEPS on its n-th
page: lower than the page before on every poll but one in RESET_STEPS."""
COMMIT_EVERY_S = 1.0
"""The history store's writer commits once a second (runtime/store.py): what a kill -9 may lose, plus the
poll in flight."""
RSS_GOAL_MIB_H = 1.0
RINGS_FULL_S = 3600.0
"""The charts' rings hold an hour of 1 s polls: RSS grows while they fill. Besides the judged slope (after the
warm-up) the summary gives the slope from a process's first hour on (not judged; None when under 3 samples)."""
NAMED_SHARE = 0.9
"""A hostile target names its problem when at least this share of its polls with an error say it in words."""
PREFIXES = {"restart": "r-", "node-down": "n-"}
SCENARIO_SEEDS = {"restart": 11, "node-down": 23}
DOWN_ON_PURPOSE = {"n-ws48", "n-qwen3-30b-a3b"}
"""What `--scenario node-down` takes down 15 s in (the host ws48 and the engine on it): not healthy targets."""

HOSTILE = ("h-502", "h-nul", "h-login", "h-blackhole", "h-cut", "h-short", "h-flap", "h-reset")
PROBLEM_WORDS: dict[str, str] = {
    "h-502": r"\b502\b|bad gateway",
    "h-nul": r"\bNUL\b|null byte|binary|not UTF-?8|not (?:prometheus )?text",
    "h-login": r"HTML|not prometheus|not a metrics page|sign.?in|login",
    "h-blackhole": r"time[sd]? ?out|no answer|did not answer|not answer",
    "h-cut": r"cut|truncat|mid-line|line break|incomplete",
    "h-short": r"content-length|shorter|truncat|incomplete|not enough data|cut",
    "h-flap": r"refused",
    "h-reset": r"reset|restart|went back|goes back|decreas",
}
"""The problem each hostile target's row must name (a regular expression, case-insensitive, searched in the
error the row shows, the reasons of its unknown values and, for h-reset, the alerts the watcher sent)."""


# -- hosts.toml: merge the demo pools' and add the hostile engines ---------------------------------------
def prefixed(doc: dict[str, Any], prefix: str) -> dict[str, Any]:
    """A demo pool's hosts.toml with its hosts and engines renamed PREFIX+name, and the names that refer to
    them (an engine's host, its degrade_to) renamed alike; containers keep their names (each pool's hosts
    are its own)."""
    out: dict[str, Any] = {}
    out["hosts"] = [{**h, "name": prefix + h["name"]} for h in doc.get("hosts", [])]
    engines = []
    for engine in doc.get("engines", []):
        renamed = {**engine, "name": prefix + engine["name"]}
        for ref in ("host", "degrade_to"):
            if ref in renamed:
                renamed[ref] = prefix + renamed[ref]
        engines.append(renamed)
    out["engines"] = engines
    return out


def merge_configs(
    pools: Sequence[tuple[str, dict[str, Any]]], hostile: dict[str, int], webhook: str | None
) -> dict[str, Any]:
    """One hosts.toml: the first pool's [settings], every pool's hosts and engines (prefixed), the hostile
    endpoints as vLLM engines, and `webhook` as the one [[notify]]."""
    merged: dict[str, Any] = {"settings": dict(pools[0][1].get("settings", {})) if pools else {}}
    if webhook:
        merged["notify"] = [{"kind": "webhook", "url": webhook, "min_severity": "info"}]
    merged["hosts"], merged["engines"] = [], []
    for prefix, doc in pools:
        renamed = prefixed(doc, prefix)
        merged["hosts"] += renamed["hosts"]
        merged["engines"] += renamed["engines"]
    for name, port in hostile.items():
        merged["engines"].append(
            {"name": name, "kind": "vllm", "url": f"http://127.0.0.1:{port}", "description": "hostile (chaos soak)"}
        )
    return merged


def _toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{value} has no TOML form here")
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a TOML basic string (\uXXXX escapes included)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"no TOML for {type(value).__name__}")


def _is_tables(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)


def to_toml(doc: dict[str, Any], _path: str = "") -> str:
    """TOML text of `doc` (what tomllib gives back): plain keys first, then tables, then arrays of tables."""
    lines = [f"{_toml_key(k)} = {_toml_value(v)}" for k, v in doc.items() if not isinstance(v, dict | list)]
    lines += [f"{_toml_key(k)} = {_toml_value(v)}" for k, v in doc.items() if isinstance(v, list) and not _is_tables(v)]
    text = "\n".join(lines) + ("\n" if lines else "")
    for key, value in doc.items():
        name = f"{_path}.{_toml_key(key)}" if _path else _toml_key(key)
        if isinstance(value, dict):
            text += f"\n[{name}]\n" + to_toml(value, name)
        elif _is_tables(value):
            for item in value:
                text += f"\n[[{name}]]\n" + to_toml(item, name)
    return text


# -- the hostile pages -----------------------------------------------------------------------------------
_SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{[^}]*\})?\s+(\S+)(\s+\S+)?$")
_COUNTER_SUFFIXES = ("_total", "_bucket", "_count", "_sum")


def counters_back(page: str, n: int, steps: int = RESET_STEPS) -> str:
    """The page with every counter sample (counters, histogram and summary series; not `_created`) scaled by
    (steps - n % steps) / steps: each page's counters lower than the one before, bar one page in `steps`."""
    factor = (steps - n % steps) / steps
    kinds: dict[str, str] = {}
    out = []
    for line in page.splitlines(keepends=True):
        if line.startswith("# TYPE "):
            parts = line.split()
            if len(parts) >= 4:
                kinds[parts[2]] = parts[3]
            out.append(line)
            continue
        match = _SAMPLE.match(line.rstrip("\n"))
        if match is None or line.startswith("#"):
            out.append(line)
            continue
        name = match.group(1)
        family = next((name[: -len(s)] for s in _COUNTER_SUFFIXES if name.endswith(s)), name)
        kind = kinds.get(name) or kinds.get(family) or kinds.get(family + "_total")
        if kind not in ("counter", "histogram", "summary") or name.endswith("_created"):
            out.append(line)
            continue
        value = float(match.group(3)) * factor
        out.append(f"{name}{match.group(2) or ''} {value!r}{match.group(4) or ''}\n")
    return "".join(out)


def cut_mid_line(page: bytes, n: int) -> bytes:
    """The page cut inside the value of one of its vllm: samples (which one turns with n): the last line
    still parses, as a number with digits missing."""
    starts = [m.start() for m in re.finditer(rb"^vllm:[^\n]* [0-9][^\n]*$", page, re.M)]
    if not starts:
        return page[: len(page) // 2]
    start = starts[(n * 7919) % len(starts)]
    end = page.index(b"\n", start)
    space = page.rindex(b" ", start, end)
    return page[: space + 1 + max(1, (end - space - 1) // 2)]


def whole_lines_prefix(page: bytes, share: float = 0.6) -> bytes:
    """The page's first `share`, ending on a line break: only the Content-Length can tell it is cut."""
    cut = page.rfind(b"\n", 0, int(len(page) * share))
    return page[: cut + 1]


def nul_garbage(n: int, page: bytes) -> bytes:
    """Garbage with NUL bytes: random bytes on even n, the real page with NULs sprinkled in on odd n."""
    rnd = random.Random(n)
    if n % 2 == 0:
        return bytes(rnd.randrange(256) for _ in range(4096)) + b"\x00\x00\n"
    data = bytearray(page)
    for _ in range(64):
        data.insert(rnd.randrange(len(data)), 0)
    return bytes(data)


NGINX_502 = (
    b"<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1>"
    b"</center>\r\n<hr><center>nginx/1.24.0</center>\r\n</body>\r\n</html>\r\n"
)
LOGIN_PAGE = (
    b'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>Sign in - Pool Gateway</title>'
    b'</head>\n<body><form method="post" action="/login"><h1>Sign in</h1><input name="user">'
    b'<input name="password" type="password"><button>Sign in</button></form></body></html>\n'
)
REASONS = {200: "OK", 404: "Not Found", 502: "Bad Gateway"}
PROM = "text/plain; version=0.0.4; charset=utf-8"


@dataclass
class Reply:
    status: int
    body: bytes
    content_type: str = "text/plain"
    declared: int | None = None
    """Content-Length sent when it is not len(body) (h-short)."""


@dataclass
class HostileServer:
    name: str
    respond: Callable[[str, int], Reply | None]
    """(path, n-th request of that path) -> the reply; None: never answer."""
    port: int = 0
    server: asyncio.Server | None = None
    counts: Counter[str] = field(default_factory=Counter)
    held: set[asyncio.StreamWriter] = field(default_factory=set)


class Hostile:
    """The hostile endpoints on 127.0.0.1, on an event loop in a thread of this process; HTTP/1.1 written by
    hand (each reply closes its connection, as a dying engine's would), so a page can lie about its length
    and a target can refuse connections between two polls."""

    def __init__(self) -> None:
        self.page = (CAPTURE / "metrics.after.txt").read_bytes()
        self.models = (CAPTURE / "v1_models.json").read_bytes()
        self.version = (CAPTURE / "version.json").read_bytes()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="hostile", daemon=True)
        self.servers = {
            "h-502": HostileServer("h-502", lambda p, n: Reply(502, NGINX_502, "text/html")),
            "h-nul": HostileServer("h-nul", lambda p, n: Reply(200, nul_garbage(n, self.page), PROM)),
            "h-login": HostileServer("h-login", lambda p, n: Reply(200, LOGIN_PAGE, "text/html; charset=utf-8")),
            "h-blackhole": HostileServer("h-blackhole", lambda p, n: None),
            "h-cut": HostileServer("h-cut", self._metrics(lambda n: cut_mid_line(self.page, n))),
            "h-short": HostileServer("h-short", self._short),
            "h-flap": HostileServer("h-flap", self._metrics(lambda n: self.page)),
            "h-reset": HostileServer("h-reset", self._metrics(lambda n: counters_back(self.page.decode(), n).encode())),
        }
        self.flap_down: list[tuple[float, float]] = []
        self.webhook_port = 0
        self.alerts: list[dict[str, Any]] = []
        self._tasks: list[asyncio.Task[None]] = []

    def _valid(self, path: str) -> Reply:
        if path == "/v1/models":
            return Reply(200, self.models, "application/json")
        if path == "/version":
            return Reply(200, self.version, "application/json")
        if path in ("/health", "/ping"):
            return Reply(200, b"")
        return Reply(404, b'{"detail":"Not Found"}', "application/json")

    def _metrics(self, page: Callable[[int], bytes]) -> Callable[[str, int], Reply | None]:
        return lambda path, n: Reply(200, page(n), PROM) if path == "/metrics" else self._valid(path)

    def _short(self, path: str, n: int) -> Reply | None:
        if path != "/metrics":
            return self._valid(path)
        return Reply(200, whole_lines_prefix(self.page), PROM, declared=len(self.page))

    # the loop's side
    async def _handle(self, server: HostileServer, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 60)
            parts = head.split(b"\r\n", 1)[0].split()
            path = parts[1].decode("latin-1").split("?")[0] if len(parts) > 1 else "/"
            n = server.counts[path]
            server.counts[path] += 1
            reply = server.respond(path, n)
            if reply is None:  # the black hole: hold the connection until the client gives up
                server.held.add(writer)
                while await reader.read(65536):
                    pass
                return
            length = len(reply.body) if reply.declared is None else reply.declared
            writer.write(
                f"HTTP/1.1 {reply.status} {REASONS.get(reply.status, 'Error')}\r\nServer: chaos-soak\r\n"
                f"Content-Type: {reply.content_type}\r\nContent-Length: {length}\r\nConnection: close\r\n\r\n".encode()
                + reply.body
            )
            await writer.drain()
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
            pass
        finally:
            server.held.discard(writer)
            writer.close()

    async def _listen(self, server: HostileServer) -> None:
        server.server = await asyncio.start_server(
            lambda r, w: self._handle(server, r, w), "127.0.0.1", server.port, reuse_address=True
        )
        server.port = server.server.sockets[0].getsockname()[1]

    async def _flap(self, server: HostileServer) -> None:
        while True:
            await asyncio.sleep(FLAP_UP_S)
            assert server.server is not None
            down = time.time()
            server.server.close()  # connection refused until it listens again
            await asyncio.sleep(FLAP_DOWN_S)
            for _ in range(50):
                try:
                    await self._listen(server)
                    break
                except OSError:  # the port is briefly unavailable: retry
                    await asyncio.sleep(0.1)
            self.flap_down.append((down, time.time()))

    async def _webhook(self) -> asyncio.Server:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
                match = re.search(rb"(?im)^content-length:\s*(\d+)", head)
                body = await reader.readexactly(int(match.group(1))) if match else b""
                with contextlib.suppress(ValueError):
                    doc = json.loads(body)
                    for alert in doc.get("alerts", []) if isinstance(doc, dict) else []:
                        labels = alert.get("labels", {})
                        self.alerts.append(
                            {
                                "at": time.time(),
                                "status": alert.get("status"),
                                "alertname": labels.get("alertname"),
                                "target": labels.get("engine") or labels.get("host") or labels.get("target"),
                                "summary": (alert.get("annotations") or {}).get("summary"),
                            }
                        )
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                await writer.drain()
            except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
                pass
            finally:
                writer.close()

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        self.webhook_port = server.sockets[0].getsockname()[1]
        return server

    async def _start(self) -> None:
        for server in self.servers.values():
            await self._listen(server)
        self._hook = await self._webhook()
        self._tasks.append(asyncio.create_task(self._flap(self.servers["h-flap"])))

    async def _stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for server in self.servers.values():
            for writer in list(server.held):
                writer.close()
            if server.server is not None:
                server.server.close()
        self._hook.close()

    # the caller's side
    def start(self) -> dict[str, int]:
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self.loop).result(30)
        return {name: s.port for name, s in self.servers.items()}

    def stop(self) -> None:
        if not self.thread.is_alive():
            return
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(self._stop(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


# -- figures ---------------------------------------------------------------------------------------------
def slope_per_hour(points: Sequence[tuple[float, float]]) -> float | None:
    """Least-squares slope of (seconds, value) points, in value per hour; None under 3 points."""
    if len(points) < 3:
        return None
    xs = [p[0] / 3600.0 for p in points]
    ys = [p[1] for p in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    den = sum((x - mx) ** 2 for x in xs)
    if den == 0:
        return None
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den


def gap_stats(times: Sequence[float]) -> dict[str, Any]:
    """Gaps between consecutive updates: count, median (the target's cycle), p99 and the longest (with when)."""
    ordered = sorted(times)
    gaps = [(b - a, a) for a, b in itertools.pairwise(ordered)]
    if not gaps:
        return {"updates": len(ordered), "median_s": None, "p99_s": None, "max_s": None, "max_at": None}
    values = sorted(g for g, _ in gaps)
    longest, at = max(gaps)
    return {
        "updates": len(ordered),
        "median_s": round(statistics.median(values), 3),
        "p99_s": round(values[min(len(values) - 1, math.ceil(0.99 * len(values)) - 1)], 3),
        "max_s": round(longest, 3),
        "max_at": iso(at),
    }


def iso(at: float) -> str:
    return dt.datetime.fromtimestamp(at, dt.UTC).isoformat(timespec="seconds")


def kill_loss(times: Sequence[float], killed_at: float) -> dict[str, Any]:
    """What the store kept of a target up to the kill: its last poll before the kill, how long before the
    kill that was, the longest gap among its polls before it, and the first poll after it (the restart)."""
    before = sorted(t for t in times if t <= killed_at)
    after = sorted(t for t in times if t > killed_at)
    gaps = [b - a for a, b in itertools.pairwise(before)]
    return {
        "polls_before": len(before),
        "last_before_kill_s": round(killed_at - before[-1], 3) if before else None,
        "longest_gap_before_kill_s": round(max(gaps), 3) if gaps else None,
        "median_gap_s": round(statistics.median(gaps), 3) if gaps else None,
        "first_after_kill_s": round(after[0] - killed_at, 3) if after else None,
    }


def names_problem(name: str, texts: Iterable[str]) -> bool:
    """Whether any of `texts` says `name`'s problem in PROBLEM_WORDS; the target's own name is taken out
    first (h-502 and h-reset would say it by being named)."""
    words = re.compile(PROBLEM_WORDS[name], re.I)
    return any(words.search(t.replace(name, "")) for t in texts if t)


def normalized(text: str) -> str:
    """An error with its numbers replaced by N, so that repeated errors count as one kind."""
    return re.sub(r"\d+(?:\.\d+)?", "N", text)[:300]


# -- processes -------------------------------------------------------------------------------------------
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def proc_sample(pid: int) -> tuple[float, float] | None:
    """(RSS in MiB, CPU seconds) of a live process, from /proc; None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
        with open(f"/proc/{pid}/status") as f:
            status = f.read()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime, stime
    match = re.search(r"^VmRSS:\s+(\d+) kB", status, re.M)
    return (int(match.group(1)) / 1024 if match else 0.0), cpu


def child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy") and k != "POOLCONSOLE_CONFIG"}
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    return env


def stop_process(proc: subprocess.Popen[bytes] | None, grace_s: float = 15.0) -> None:
    """SIGINT (each command's clean stop), then SIGKILL after `grace_s`."""
    if proc is None or proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGINT)
    try:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        proc.wait(5)


class Tmux:
    """The console in tmux on a socket of its own (nothing else of the user's tmux touched)."""

    def __init__(self, out: Path) -> None:
        self.socket = f"chaos-soak-{os.getpid()}"
        self.session = "soak"
        self.out = out

    def _run(self, *args: str) -> str:
        done = subprocess.run(
            ["tmux", "-L", self.socket, "-f", "/dev/null", *args], capture_output=True, text=True, timeout=30
        )
        return done.stdout

    def start(self, command: str) -> int:
        self._run(
            "new-session", "-d", "-s", self.session, "-x", "160", "-y", "48", command,
            ";", "set-option", "-t", self.session, "remain-on-exit", "on",
        )  # fmt: skip
        return int(self._run("display-message", "-p", "-t", self.session, "#{pane_pid}").strip() or 0)

    def dead(self) -> bool:
        return self._run("display-message", "-p", "-t", self.session, "#{pane_dead}").strip() != "0"

    def capture(self, history: bool = False) -> str:
        """The pane as shown; with `history`, its scrollback too (what a console that exited printed)."""
        return self._run("capture-pane", "-p", "-t", self.session, *(["-S", "-"] if history else []))

    def stop(self) -> None:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            socket = self._run("display-message", "-p", "#{socket_path}").strip()
            self._run("kill-server")
            if socket:
                Path(socket).unlink(missing_ok=True)


# -- the run ---------------------------------------------------------------------------------------------
@dataclass
class Tracked:
    role: str
    pid: int
    started: float
    samples: list[dict[str, float]] = field(default_factory=list)
    last_cpu: tuple[float, float] | None = None


class Soak:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.out = Path(args.out).resolve()
        self.out.mkdir(parents=True, exist_ok=True)
        (self.out / "screens").mkdir(exist_ok=True)
        self.config = self.out / "hosts.toml"
        self.record_store = self.out / "record.history.sqlite3"
        self.watch_store = self.out / "watch.history.sqlite3"
        self.hostile = Hostile()
        self.tmux = Tmux(self.out)
        self.pools: dict[str, subprocess.Popen[bytes]] = {}
        self.recorder: subprocess.Popen[bytes] | None = None
        self.watcher: subprocess.Popen[bytes] | None = None
        self.tracked: list[Tracked] = []
        self.events: list[dict[str, Any]] = []
        self.killed_at: float | None = None
        self.killed_pid: int | None = None
        self.exited: set[int] = set()
        self.started_at = time.time()
        self.ended_at: float | None = None
        self.interrupted = False
        self.console_died = False

    def event(self, what: str, **kw: Any) -> None:
        entry = {"at": iso(time.time()), "t_s": round(time.time() - self.started_at, 1), "what": what, **kw}
        self.events.append(entry)
        print(f"[{entry['t_s']:>7.1f}s] {what} {json.dumps(kw) if kw else ''}", flush=True)

    def _log(self, name: str) -> Any:
        return open(self.out / name, "ab")  # the child holds it

    def start_pools(self) -> list[tuple[str, dict[str, Any]]]:
        for scenario, seed in SCENARIO_SEEDS.items():
            path = self.out / f"pool-{scenario}.toml"
            path.unlink(missing_ok=True)
            log = self._log(f"pool-{scenario}.log")
            self.pools[scenario] = subprocess.Popen(
                [POOLCONSOLE, "demo", "--serve-only", "--scenario", scenario, "--seed", str(seed),
                 "--config-out", str(path)],
                stdout=log, stderr=subprocess.STDOUT, env=child_env(), start_new_session=True, cwd=self.out,
            )  # fmt: skip
        docs = []
        deadline = time.monotonic() + 120
        for scenario, proc in self.pools.items():
            path = self.out / f"pool-{scenario}.toml"
            while not path.exists():
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the {scenario} demo pool did not start (see {self.out}/pool-{scenario}.log)")
                time.sleep(0.2)
            docs.append((PREFIXES[scenario], tomllib.loads(path.read_text())))
            self.event("pool up", scenario=scenario, pid=proc.pid)
        return docs

    def write_config(self, docs: list[tuple[str, dict[str, Any]]], ports: dict[str, int]) -> None:
        from poolconsole.sim.demo_files import CONFIG_HEADER

        merged = merge_configs(docs, ports, f"http://127.0.0.1:{self.hostile.webhook_port}/hook")
        text = (
            f"{CONFIG_HEADER}, merged by benchmarks/chaos_soak.py: the console's own stores stay beside it.\n"
            "# Two demo pools (r-: --scenario restart, n-: --scenario node-down) and the soak's hostile endpoints.\n\n"
            + to_toml(merged)
        )
        self.config.write_text(text)
        check = subprocess.run(
            [POOLCONSOLE, "check-config", "--config", str(self.config)], capture_output=True, text=True, env=child_env()
        )
        if check.returncode != 0:
            raise RuntimeError(f"the merged hosts.toml does not load:\n{check.stdout}{check.stderr}")

    def start_recorder(self) -> None:
        self.recorder = subprocess.Popen(
            [POOLCONSOLE, "record", "--config", str(self.config), "--store", str(self.record_store)],
            stdout=self._log("record.stdout"), stderr=self._log("record.stderr"),
            env=child_env(), start_new_session=True, cwd=self.out,
        )  # fmt: skip
        self.tracked.append(Tracked(f"recorder#{sum(t.role.startswith('rec') for t in self.tracked) + 1}",
                                    self.recorder.pid, time.time()))  # fmt: skip

    def start_clients(self) -> None:
        console = (
            f"exec env -u POOLCONSOLE_CONFIG NO_PROXY=127.0.0.1 no_proxy=127.0.0.1 {POOLCONSOLE} --config {self.config}"
        )
        pid = self.tmux.start(console)
        if not pid:
            raise RuntimeError("tmux did not start the console")
        self.tracked.append(Tracked("console", pid, time.time()))
        self.start_recorder()
        self.watcher = subprocess.Popen(
            [POOLCONSOLE, "watch", "--config", str(self.config), "--store", str(self.watch_store)],
            stdout=self._log("watch.stdout"), stderr=self._log("watch.stderr"),
            env=child_env(), start_new_session=True, cwd=self.out,
        )  # fmt: skip
        self.tracked.append(Tracked("watcher", self.watcher.pid, time.time()))
        self.event("clients up", **{t.role: t.pid for t in self.tracked})

    def sample(self, index: int) -> None:
        now = time.time()
        for tracked in self.tracked:
            got = proc_sample(tracked.pid)
            if got is None:
                continue
            rss, cpu = got
            cpu_pct = None
            if tracked.last_cpu is not None and now > tracked.last_cpu[0]:
                cpu_pct = 100.0 * (cpu - tracked.last_cpu[1]) / (now - tracked.last_cpu[0])
            tracked.last_cpu = (now, cpu)
            tracked.samples.append(
                {"t_s": round(now - self.started_at, 1), "rss_mib": round(rss, 2), "cpu_s": cpu,
                 **({"cpu_pct": round(cpu_pct, 2)} if cpu_pct is not None else {})}
            )  # fmt: skip
        dead = self.tmux.dead()
        screen = self.tmux.capture(history=dead)
        (self.out / "screens" / f"{index:04d}.txt").write_text(screen)
        if dead and not self.console_died:
            self.console_died = True
            self.event("console exited", screen_tail=screen.strip().splitlines()[-5:])
        line = "  ".join(
            f"{t.role} {t.samples[-1]['rss_mib']:.1f} MiB {t.samples[-1].get('cpu_pct', 0):.0f}%"
            for t in self.tracked
            if t.samples and (t.role != "recorder#1" or self.killed_at is None)
        )
        print(f"[{now - self.started_at:>7.1f}s] sample {index}: {line}", flush=True)

    def kill_recorder(self) -> None:
        assert self.recorder is not None
        pid = self.killed_pid = self.recorder.pid
        self.killed_at = time.time()
        os.kill(pid, signal.SIGKILL)
        self.recorder.wait(10)
        self.event("recorder killed (SIGKILL)", pid=pid)
        self.start_recorder()
        self.event("recorder restarted", pid=self.recorder.pid)

    def run(self) -> None:
        ports = self.hostile.start()
        self.event("hostile endpoints up", **ports, webhook=self.hostile.webhook_port)
        docs = self.start_pools()
        self.write_config(docs, ports)
        self.start_clients()
        self.started_at = time.time()
        total_s = self.args.minutes * 60.0
        kill_s = total_s / 2 if self.args.kill_at_minutes is None else self.args.kill_at_minutes * 60.0
        start = time.monotonic()
        next_sample, index = 0.0, 0
        while True:
            elapsed = time.monotonic() - start
            if self.killed_at is None and elapsed >= kill_s:
                self.kill_recorder()
            if elapsed >= next_sample:
                self.sample(index)
                index += 1
                next_sample += self.args.sample_seconds
            if elapsed >= total_s:
                break
            for name, proc in [*self.pools.items(), ("watcher", self.watcher), ("recorder", self.recorder)]:
                if proc is not None and proc.poll() is not None and proc.pid not in self.exited:
                    self.exited.add(proc.pid)
                    if proc.pid != self.killed_pid:
                        self.event("process exited", name=name, rc=proc.returncode)
            time.sleep(min(1.0, max(0.05, min(next_sample, kill_s if self.killed_at is None else total_s) - elapsed)))
        self.ended_at = time.time()

    def stop(self) -> None:
        if self.ended_at is None:
            self.ended_at = time.time()
        with contextlib.suppress(Exception):
            (self.out / "screens" / "final.txt").write_text(self.tmux.capture(history=True))
        self.tmux.stop()
        stop_process(self.recorder)
        stop_process(self.watcher)
        for proc in self.pools.values():
            stop_process(proc, 20)
        self.hostile.stop()
        self.event("everything stopped")

    # -- the report ------------------------------------------------------------------------------------
    def store_rows(self, path: Path) -> dict[str, list[tuple[float, dict[str, Any]]]]:
        """Each target's stored polls in time order: (at, the fields the report reads); only the hostile
        targets' fields are kept (the others' times are enough, and two hours of every row would not fit)."""
        from poolconsole.runtime.store import Reader, StoreProblem

        rows: dict[str, list[tuple[float, dict[str, Any]]]] = {}
        kept = ("state", "error", "unknown", "counter_resets")
        try:
            with Reader(path) as reader:
                for row in reader.rows():
                    values = {k: row.values.get(k) for k in kept} if row.name in HOSTILE else {}
                    rows.setdefault(row.name, []).append((row.at, values))
        except StoreProblem as exc:
            self.event("store unreadable", path=str(path), problem=str(exc))
        return rows

    def tracebacks(self) -> dict[str, Any]:
        found: dict[str, Any] = {}
        for name in ("record.stderr", "watch.stderr", "pool-restart.log", "pool-node-down.log"):
            path = self.out / name
            text = path.read_text(errors="replace") if path.exists() else ""
            found[name] = {"count": text.count("Traceback"), "first": _first_traceback(text)}
        screens = sorted((self.out / "screens").glob("*.txt"))
        hits = [p.name for p in screens if "Traceback" in p.read_text(errors="replace")]
        found["console screen"] = {"count": len(hits), "captures": len(screens), "in": hits[:20]}
        internal = [p.name for p in screens if "internal error" in p.read_text(errors="replace").lower()]
        found["console screen: 'internal error' (not a traceback; not judged)"] = {
            "count": 0,
            "captures_showing_it": len(internal),
            "in": internal[:20],
        }
        return found

    def screen_rows(self) -> dict[str, list[str]]:
        """Each hostile target's line on the newest screen capture that shows it."""
        lines: dict[str, list[str]] = {}
        for path in sorted((self.out / "screens").glob("[0-9]*.txt"), reverse=True):
            text = path.read_text(errors="replace").splitlines()
            for name in HOSTILE:
                if name not in lines:
                    shown = [ln.rstrip() for ln in text if re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", ln)]
                    if shown:
                        lines[name] = [f"{path.name}: {ln}" for ln in shown[:3]]
        return lines

    def report(self) -> dict[str, Any]:
        warm_s = self.args.warmup_minutes * 60.0
        poll_s = float(tomllib.loads(self.config.read_text()).get("settings", {}).get("poll_interval_s", 2.0))
        processes: dict[str, Any] = {}
        for t in self.tracked:
            since = (t.started - self.started_at) + warm_s
            end = (self.killed_at - self.started_at) if t.role == "recorder#1" and self.killed_at else math.inf
            after = [s for s in t.samples if since <= s["t_s"] <= end]
            slope = slope_per_hour([(s["t_s"], s["rss_mib"]) for s in after])
            full = since - warm_s + RINGS_FULL_S  # the charts' rings hold an hour at 1 s: full from then on
            filled = slope_per_hour([(s["t_s"], s["rss_mib"]) for s in after if s["t_s"] >= full])
            cpu = [s["cpu_pct"] for s in after if "cpu_pct" in s]
            all_cpu = [s["cpu_pct"] for s in t.samples if "cpu_pct" in s]
            processes[t.role] = {
                "pid": t.pid,
                "samples": len(t.samples),
                "samples_after_warmup": len(after),
                "rss_first_mib": t.samples[0]["rss_mib"] if t.samples else None,
                "rss_last_mib": t.samples[-1]["rss_mib"] if t.samples else None,
                "rss_slope_mib_per_h": None if slope is None else round(slope, 3),
                "rss_slope_rings_full_mib_per_h": None if filled is None else round(filled, 3),
                "cpu_pct_mean_after_warmup": round(statistics.fmean(cpu), 2) if cpu else None,
                "cpu_pct_mean": round(statistics.fmean(all_cpu), 2) if all_cpu else None,
                "rss_samples": [(s["t_s"], s["rss_mib"]) for s in t.samples],
            }
        stores = {
            "console": self.config.with_name(self.config.stem + ".history.sqlite3"),
            "watcher": self.watch_store,
            "recorder": self.record_store,
        }
        rows = {who: self.store_rows(path) for who, path in stores.items()}
        config = tomllib.loads(self.config.read_text())
        demo = [e["name"] for e in config["engines"] if e["name"] not in HOSTILE] + [h["name"] for h in config["hosts"]]
        healthy = [n for n in demo if n not in DOWN_ON_PURPOSE]
        # the first minute is the pools' own start (the node-down host goes down 15 s in): gaps from then on
        settle = self.started_at + 60.0
        gaps: dict[str, dict[str, Any]] = {}
        for who in ("console", "watcher"):
            per = {}
            for name in healthy:
                times = [at for at, _ in rows[who].get(name, []) if at >= settle]
                per[name] = gap_stats(times)
            gaps[who] = per
        hostile_rows: dict[str, Any] = {}
        alerts_by_target: dict[str, Counter[str]] = {}
        for alert in self.hostile.alerts:
            alerts_by_target.setdefault(str(alert.get("target")), Counter())[
                f"{alert.get('status')}: {alert.get('alertname')}: {alert.get('summary')}"
            ] += 1
        screen = self.screen_rows()
        for name in HOSTILE:
            polls = rows["console"].get(name, [])
            raw = [str(v["error"]) for _, v in polls if v.get("error")]
            errors = Counter(normalized(e) for e in raw)
            example = {normalized(e): e for e in reversed(raw)}
            states = Counter(str(v.get("state")) for _, v in polls)
            unknown = Counter(str(r) for _, v in polls for r in (v.get("unknown") or {}).values())
            resets = max((int(v.get("counter_resets") or 0) for _, v in polls), default=0)
            alerts = alerts_by_target.get(name, Counter())
            named_share = sum(names_problem(name, [e]) for e in raw) / len(raw) if raw else None
            sources = {
                "errors": named_share is not None and named_share >= NAMED_SHARE,
                "screen": names_problem(name, screen.get(name, [])),
                "alerts": names_problem(name, list(alerts)),
            }
            hostile_rows[name] = {
                "polls": len(polls),
                "states": dict(states),
                "errors": {example[k]: n for k, n in errors.most_common(6)},
                "polls_with_error": len(raw),
                "share_of_errors_naming_it": None if named_share is None else round(named_share, 4),
                "unknown_reasons": dict(unknown.most_common(3)),
                "counter_resets_max": resets,
                "alerts": dict(alerts.most_common(4)),
                "on_screen": screen.get(name, []),
                "named_by": sorted(k for k, ok in sources.items() if ok),
                # the row's own why (errors) must say it; h-reset answers ok, so its row says it with the
                # alert on it (on screen) or, failing a capture that shows it, the same rules' alert in watch
                "names_its_problem": sources["errors"]
                or (name == "h-reset" and (sources["screen"] or sources["alerts"])),
                "words_wanted": PROBLEM_WORDS[name],
            }
        if "h-flap" in hostile_rows:
            flap = rows["console"].get("h-flap", [])
            hostile_rows["h-flap"]["ok_polls"] = sum(1 for _, v in flap if v.get("state") == "ok")
            hostile_rows["h-flap"]["down_windows"] = len(self.hostile.flap_down)
        kill: dict[str, Any] = {"killed_at": iso(self.killed_at) if self.killed_at else None}
        if self.killed_at is not None:
            per_target = {}
            for name, polls in rows["recorder"].items():
                per_target[name] = kill_loss([at for at, _ in polls], self.killed_at)
            kill["per_target"] = per_target
        summary = {
            "command": " ".join([Path(sys.executable).name, *sys.argv]),
            "started": iso(self.started_at),
            "ended": iso(self.ended_at or time.time()),
            "minutes_run": round(((self.ended_at or time.time()) - self.started_at) / 60, 2),
            "interrupted": self.interrupted,
            "warmup_minutes": self.args.warmup_minutes,
            "poll_interval_s": poll_s,
            "targets": {"demo": len(demo), "healthy": len(healthy), "hostile": list(HOSTILE)},
            "processes": processes,
            "tracebacks": self.tracebacks(),
            "update_gaps": gaps,
            "hostile": hostile_rows,
            "kill": kill,
            "console_died": self.console_died,
            "webhook_alerts": len(self.hostile.alerts),
            "events": self.events,
        }
        summary["goals"] = judge(summary, poll_s)
        return summary


def _first_traceback(text: str) -> str | None:
    at = text.find("Traceback")
    return None if at < 0 else text[at : at + 3000]


def judge(summary: dict[str, Any], poll_s: float) -> dict[str, Any]:
    """Each goal: the figure, the bar, met or not.

    - tracebacks: 'Traceback' in the console's screen captures, its stderr, record's and watch's stderr: 0.
    - RSS slope: least squares over the samples after the warm-up (each recorder run after its own start
      plus the warm-up; the first run up to the kill): under RSS_GOAL_MIB_H for every process (a process
      with fewer than 3 samples after the warm-up is "too short").
    - updates: every healthy target (every demo host and engine but the node-down pool's downed host and
      its engine; from a minute in) has no gap between two stored polls in the console's and the watcher's
      stores longer than 1.5 poll intervals: none missed a cycle, none was half a cycle late.
    - hostile rows: each hostile target's errors in the console's store (the row's why) or its unknown
      reasons match its PROBLEM_WORDS; h-reset may name it through the watcher's alerts (restart loop).
    - the kill: in the recorder's store every target's last poll before the kill is at most COMMIT_EVERY_S
      plus one poll interval plus 0.5 s before it, and no gap before the kill is longer than 1.5 of that
      target's median gap (polls lost in the middle), every target polled again after the restart.
    """
    goals: dict[str, Any] = {}
    tb = summary["tracebacks"]
    count = sum(v["count"] for k, v in tb.items() if not k.startswith("pool-"))
    goals["0 tracebacks"] = {"figure": count, "met": count == 0 and not summary["console_died"]}
    slopes = {k: v["rss_slope_mib_per_h"] for k, v in summary["processes"].items()}
    known = {k: v for k, v in slopes.items() if v is not None}
    goals[f"RSS slope under {RSS_GOAL_MIB_H:g} MiB/h"] = {
        "figure": slopes,
        "met": bool(known) and all(v < RSS_GOAL_MIB_H for v in known.values()) and len(known) == len(slopes),
        **({"too short": sorted(set(slopes) - set(known))} if len(known) != len(slopes) else {}),
    }
    bar = 1.5 * poll_s
    worst: dict[str, Any] = {}
    for who, per in summary["update_gaps"].items():
        late = {n: g["max_s"] for n, g in per.items() if g["max_s"] is None or g["max_s"] > bar}
        longest = max(((g["max_s"], n) for n, g in per.items() if g["max_s"] is not None), default=(None, None))
        p99 = max((g["p99_s"] for g in per.values() if g["p99_s"] is not None), default=None)
        worst[who] = {"longest_gap_s": longest[0], "target": longest[1], "worst_p99_s": p99, "late": late}
    goals[f"every healthy target updated within one cycle (gap <= {bar:g} s)"] = {
        "figure": worst,
        "met": all(not w["late"] for w in worst.values()),
    }
    named = {n: h["names_its_problem"] for n, h in summary["hostile"].items()}
    goals["every hostile target's row naming its problem"] = {
        "figure": {
            n: (next(iter(summary["hostile"][n]["errors"]), None) if ok else "NOT NAMED") for n, ok in named.items()
        },
        "met": all(named.values()),
    }
    kill = summary["kill"].get("per_target")
    if kill:
        lost = {n: k["last_before_kill_s"] for n, k in kill.items()}
        holes = {
            n: k["longest_gap_before_kill_s"]
            for n, k in kill.items()
            if k["median_gap_s"] and k["longest_gap_before_kill_s"] > 1.5 * max(k["median_gap_s"], poll_s)
        }
        limits = {n: COMMIT_EVERY_S + max(poll_s, k["median_gap_s"] or poll_s) + 0.5 for n, k in kill.items()}
        known_loss = [v for v in lost.values() if v is not None]
        too_old = {n: v for n, v in lost.items() if v is None or v > limits[n]}
        unrestarted = [n for n, k in kill.items() if k["first_after_kill_s"] is None]
        restarted = [k["first_after_kill_s"] for k in kill.values() if k["first_after_kill_s"] is not None]
        around = [
            k["first_after_kill_s"] + k["last_before_kill_s"]
            for k in kill.values()
            if k["first_after_kill_s"] is not None and k["last_before_kill_s"] is not None
        ]
        goals["the store holding every poll up to the kill"] = {
            "figure": {
                "max_loss_s": max(known_loss, default=None),
                "loss_limit_s": f"{COMMIT_EVERY_S:g} s + one cycle (the target's median gap) + 0.5 s",
                "first_poll_after_kill_s": min(restarted, default=None),
                "every_target_polled_again_after_s": max(restarted, default=None),
                "longest_gap_around_kill_s": round(max(around), 3) if around else None,
                "older_than_limit": too_old,
                "holes_before_kill": holes,
                "not_polled_after_restart": unrestarted,
            },
            "met": not too_old and not holes and not unrestarted,
        }
    else:
        goals["the store holding every poll up to the kill"] = {"figure": "no kill in this run", "met": False}
    return goals


def print_goals(summary: dict[str, Any]) -> None:
    print("\n== chaos soak:", summary["minutes_run"], "minutes", "(interrupted)" if summary["interrupted"] else "")
    for role, p in summary["processes"].items():
        print(
            f"  {role:11s} RSS {p['rss_first_mib']} -> {p['rss_last_mib']} MiB, slope after warm-up "
            f"{p['rss_slope_mib_per_h']} MiB/h ({p['samples_after_warmup']} samples; from its first hour on "
            f"{p['rss_slope_rings_full_mib_per_h']} MiB/h), "
            f"CPU {p['cpu_pct_mean_after_warmup']} %"
        )
    for name, h in summary["hostile"].items():
        print(f"  {name:12s} {h['polls']:6d} polls  {h['states']}  {next(iter(h['errors']), '-')!s:.110}")
    print()
    for goal, g in summary["goals"].items():
        print(f"  [{'MET ' if g['met'] else 'MISS'}] {goal}: {json.dumps(g['figure'], default=str)[:600]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=120.0)
    parser.add_argument("--warmup-minutes", type=float, default=10.0)
    parser.add_argument("--out", default="chaos-soak-out", help="logs, screen captures, stores, summary.json")
    parser.add_argument("--sample-seconds", type=float, default=60.0, help="RSS, CPU and a screen capture this often")
    parser.add_argument("--kill-at-minutes", type=float, default=None, help="kill -9 of the recorder (default: midway)")
    args = parser.parse_args(argv)
    if shutil.which("tmux") is None:
        print("chaos_soak: tmux is needed (the console runs in it)", file=sys.stderr)
        return 2
    sys.path.insert(0, str(ROOT))

    def terminate(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, terminate)
    soak = Soak(args)
    try:
        soak.run()
    except KeyboardInterrupt:
        soak.interrupted = True
        soak.event("interrupted: stopping everything")
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the stop and the report are not cut short
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        soak.stop()
    summary = soak.report()
    path = soak.out / "summary.json"
    path.write_text(json.dumps(summary, indent=2, default=str) + "\n")
    print_goals(summary)
    print(f"\nsummary: {path}")
    return 0 if all(g["met"] for g in summary["goals"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
