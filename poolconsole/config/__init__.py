"""hosts.toml: models, loading with every problem reported (its JSON Schema: config.schema)."""

from poolconsole.config.load import ConfigError, Problem, load_config, parse_config
from poolconsole.config.models import Engine, EngineKind, Host, PoolConfig, Settings

__all__ = [
    "ConfigError",
    "Engine",
    "EngineKind",
    "Host",
    "PoolConfig",
    "Problem",
    "Settings",
    "load_config",
    "parse_config",
]
