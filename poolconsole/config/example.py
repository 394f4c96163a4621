"""The checkout's hosts.toml documents a pool of fictional hosts under one made-up tailnet domain. Opened as a
pool (`poolconsole --config hosts.toml`), every target is down, and that is no history to keep: the console
records nothing for it, and `record` refuses it (135 rows of down targets had reached the user's store)."""

from __future__ import annotations

from urllib.parse import urlsplit

from poolconsole.config.models import PoolConfig

EXAMPLE_DOMAIN = "tailnet-example.ts.net"
"""The made-up MagicDNS domain of the example's hosts; no real tailnet has it."""


def names_example_hosts(config: PoolConfig) -> bool:
    """Whether any host or engine of `config` is on the example's made-up domain."""
    names = [h.address for h in config.hosts] + [urlsplit(str(e.url)).hostname or "" for e in config.engines]
    return any(name == EXAMPLE_DOMAIN or name.endswith("." + EXAMPLE_DOMAIN) for name in names)
