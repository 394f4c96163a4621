"""What a Prometheus watching the pool is given, once for every asker: the scrape configs rendered from the config
(ops.prometheus_config) with their file_sd and credentials files written and what the operator must still do, and
the watcher's pager rules as a rule file (ops.prometheus_rules)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from poolconsole.config.models import PoolConfig
from poolconsole.ops import prometheus_config, prometheus_rules


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


def rule_file(config: PoolConfig) -> str:
    """The watcher's pager rules (down, stalled) as a Prometheus rule file, for the same Prometheus to evaluate."""
    return prometheus_rules.render(config)
