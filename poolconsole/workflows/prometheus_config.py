"""Scrape configs for a Prometheus watching the pool, once for every asker: the YAML rendered from the config
(ops.prometheus_config), the file_sd and credentials files written, and what the operator must still do."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from poolconsole.config.models import PoolConfig
from poolconsole.ops import prometheus_config


@dataclass(frozen=True)
class Generated:
    yaml: str
    """The scrape configs, for stdout."""
    written: tuple[Path, ...]
    """The file_sd and credentials files written, in order."""
    reminders: tuple[str, ...]
    """What the operator must still do on the engines themselves (SGLang's and llama.cpp's metrics flags)."""
    notes: tuple[str, ...]


def generate(config: PoolConfig, file_sd: Path | None, credentials_dir: Path) -> Generated:
    """Renders the scrape configs and writes their files (OSError where one cannot be written: nothing is said
    then)."""
    rendered = prometheus_config.render(config, file_sd, credentials_dir)
    prometheus_config.write_files(rendered.files)
    reminders = prometheus_config.reminders(config, credentials_dir)
    return Generated(rendered.yaml, tuple(rendered.files), tuple(reminders), tuple(rendered.notes))
