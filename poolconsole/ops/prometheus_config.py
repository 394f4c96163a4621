"""`poolconsole prometheus-config`: scrape configs for a Prometheus that watches the pool of hosts.toml, so
that the console (and anything else) can then read it with `[prometheus]` and `read = "prometheus"`.

One job per engine kind (and per API key: each key is a credentials file of its own, written 0600 and
referenced from the YAML, never in it), each target labelled with its engine's name; the instance label is
HOST:PORT of the engine's url, which is what `read = "prometheus"` matches by default. Every host gets a
node_exporter job and a DCGM exporter job at their default ports. With --file-sd the targets go to
file_sd JSON files, which Prometheus re-reads when they change."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from poolconsole.collect.engines.kinds import adapter
from poolconsole.config.models import Engine, PoolConfig

NODE_EXPORTER_PORT = 9100
DCGM_EXPORTER_PORT = 9400


@dataclass
class Job:
    name: str
    scheme: str
    metrics_path: str
    credentials_env: str | None = None
    credentials_file: str | None = None
    comment: str = ""
    targets: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    reminder: bool = False
    """Its comment is a step the operator must still take on the engines (a flag that turns /metrics on)."""


@dataclass
class Written:
    yaml: str
    files: dict[Path, str]
    """file_sd JSON files and credentials files to write (path -> content)."""
    notes: list[str]


def _engine_job_key(engine: Engine) -> tuple[str, str, str, str | None]:
    parts = urlsplit(engine.url)
    return engine.kind.value, parts.scheme, (parts.path or "").rstrip("/") + "/metrics", engine.api_key_env


def jobs_for(config: PoolConfig, credentials_dir: Path) -> tuple[list[Job], list[str]]:
    notes: list[str] = []
    jobs: dict[tuple[str, str, str, str | None], Job] = {}
    for engine in config.engines:
        kind = adapter(engine.kind)
        if not kind.scraped:
            notes.append(f"engine {engine.name}: not scraped ({kind.scrape_note})")
            continue
        key = _engine_job_key(engine)
        job = jobs.get(key)
        if job is None:
            kind_name, scheme, path, env = key
            same_kind = sum(1 for k in jobs if k[0] == kind_name)
            name = kind_name if same_kind == 0 else f"{kind_name}-{same_kind + 1}"
            job = Job(name, scheme, path, env, comment=kind.scrape_note, reminder=kind.scrape_reminder)
            if env is not None:
                job.credentials_file = str(credentials_dir / f"{name}.token")
            jobs[key] = job
        job.targets.append((engine.instance, {"engine": engine.name, **({"host": engine.host} if engine.host else {})}))
    out = list(jobs.values())
    for port, name, comment in (
        (NODE_EXPORTER_PORT, "node", "node_exporter at its default port"),
        (DCGM_EXPORTER_PORT, "dcgm", "NVIDIA's DCGM exporter at its default port (drop hosts without NVIDIA GPUs)"),
    ):
        if config.hosts:
            host_job = Job(name, "http", "/metrics", comment=comment)
            for host in config.hosts:
                address = f"[{host.address}]" if ":" in host.address else host.address
                host_job.targets.append((f"{address}:{port}", {"host": host.name}))
            out.append(host_job)
    return out, notes


def _q(text: str) -> str:
    return json.dumps(text)


def render(config: PoolConfig, file_sd: Path | None, credentials_dir: Path) -> Written:
    """The YAML, and the files it refers to."""
    jobs, notes = jobs_for(config, credentials_dir)
    lines = [
        "# Written by `poolconsole prometheus-config` from hosts.toml.",
        "global:",
        f"  scrape_interval: {_q(f'{max(1, round(config.settings.poll_interval_s))}s')}",
        "scrape_configs:",
    ]
    files: dict[Path, str] = {}
    for job in jobs:
        if job.comment:
            lines.append(f"  # {job.comment}")
        lines += [
            f"  - job_name: {_q(job.name)}",
            f"    scheme: {_q(job.scheme)}",
            f"    metrics_path: {_q(job.metrics_path)}",
        ]
        if job.credentials_file is not None and job.credentials_env is not None:
            lines += ["    authorization:", f"      credentials_file: {_q(job.credentials_file)}"]
            secret = os.environ.get(job.credentials_env)
            if secret:
                files[Path(job.credentials_file)] = secret
            else:
                notes.append(
                    f"job {job.name}: ${job.credentials_env} is not set, so {job.credentials_file} was not written: "
                    f'printf %s "${job.credentials_env}" > {job.credentials_file}; chmod 600 {job.credentials_file}'
                )
        groups = [{"targets": [target], "labels": labels} for target, labels in job.targets]
        if file_sd is not None:
            path = file_sd / f"{job.name}.json"
            files[path] = json.dumps(groups, indent=2) + "\n"
            lines += ["    file_sd_configs:", f"      - files: [{_q(str(path))}]"]
        else:
            lines.append("    static_configs:")
            for group in groups:
                lines.append(f"      - targets: {json.dumps(group['targets'])}")
                lines.append(f"        labels: {json.dumps(group['labels'])}")
    if not jobs:
        lines.append("  []")
    return Written("\n".join(lines) + "\n", files, notes)


def write_files(files: dict[Path, str]) -> None:
    for path, content in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        secret = path.suffix == ".token"
        if secret:
            path.parent.chmod(0o700)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if secret else 0o644)
        with os.fdopen(fd, "w") as out:
            out.write(content)
        if secret:
            path.chmod(0o600)


def reminders(config: PoolConfig, credentials_dir: Path) -> list[str]:
    """What the operator must still do on the engines themselves (SGLang's and llama.cpp's metrics flags)."""
    return [job.comment for job in jobs_for(config, credentials_dir)[0] if job.reminder]
