"""A real supervisord on a Unix socket in a test's directory, running llama-server programs that source a
profile file (the launcher a rollover writes to), as a GPU host's process manager would."""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.helpers.engines import llama_server_binary


def llama_program(profile: Path, port: int, *extra: str) -> str:
    """The program's command: source the profile file, then exec llama-server with its POOL_ARGS."""
    args = " ".join(extra)
    return (
        f"/bin/sh -c '. {profile}; exec {llama_server_binary()} $POOL_ARGS --host 127.0.0.1 "
        f"--port {port} --metrics {args}'"
    )


@dataclass
class Supervisor:
    """supervisord with the given `[program:NAME]` sections (NAME -> option lines)."""

    root: Path
    programs: dict[str, dict[str, str]]

    @property
    def conf(self) -> Path:
        return self.root / "supervisord.conf"

    @property
    def log(self) -> Path:
        return self.root / "supervisord.log"

    def start(self) -> Supervisor:
        self.root.mkdir(parents=True, exist_ok=True)
        sock = self.root / "supervisor.sock"
        sections = [
            f"[unix_http_server]\nfile={sock}\n",
            f"[supervisord]\nlogfile={self.log}\npidfile={self.root}/supervisord.pid\nchildlogdir={self.root}\n",
            "[rpcinterface:supervisor]\n"
            "supervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface\n",
            f"[supervisorctl]\nserverurl=unix://{sock}\n",
        ]
        for name, options in self.programs.items():
            lines = {"stopasgroup": "true", "killasgroup": "true", "redirect_stderr": "true"}
            lines |= {"stdout_logfile": str(self.root / f"{name}.log"), **options}
            sections.append(f"[program:{name}]\n" + "".join(f"{k}={v}\n" for k, v in lines.items()))
        self.conf.write_text("\n".join(sections))
        subprocess.run(["supervisord", "-c", str(self.conf)], check=True, timeout=60)
        return self

    def ctl(self, *args: str) -> str:
        done = subprocess.run(
            ["supervisorctl", "-c", str(self.conf), *args], capture_output=True, text=True, timeout=60, check=False
        )
        return done.stdout.strip()

    def pid(self, name: str) -> int:
        """The program's process id now; 0 while it is not running."""
        out = self.ctl("pid", name)
        return int(out) if out.isdigit() else 0

    def stop(self) -> None:
        """Shut supervisord down, which stops its programs (their process groups) first."""
        self.ctl("shutdown")
        pidfile = self.root / "supervisord.pid"
        deadline = time.monotonic() + 30
        while pidfile.exists() and time.monotonic() < deadline:
            time.sleep(0.1)


def wait_healthy(url: str, timeout_s: float = 60.0) -> None:
    """Until GET /health answers 200 (RuntimeError at the timeout)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/health", timeout=2, trust_env=False).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{url}/health did not answer 200 within {timeout_s:g} s")
