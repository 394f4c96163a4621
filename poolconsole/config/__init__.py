"""hosts.toml: models, loading with every problem reported, JSON Schema."""

from poolconsole.config.load import ConfigError, Problem, json_schema, load_config, parse_config
from poolconsole.config.models import Engine, EngineKind, Host, PoolConfig, Settings

__all__ = [
    "ConfigError",
    "Engine",
    "EngineKind",
    "Host",
    "PoolConfig",
    "Problem",
    "Settings",
    "json_schema",
    "load_config",
    "parse_config",
]
