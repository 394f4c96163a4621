"""A pool with no hosts.toml: the engines and hosts a Prometheus holds (collect.prometheus.discovery), as the
config `status --prometheus` samples and the console opens read-only."""

from __future__ import annotations

from poolconsole.collect.prometheus.discovery import discovered_config
from poolconsole.config.models import PoolConfig


def discover_pool(url: str) -> PoolConfig:
    """The pool the Prometheus at `url` holds; ConfigError naming the URL when it holds none or cannot be read."""
    return discovered_config(url)
