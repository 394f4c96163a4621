"""What every workflow runs in, built once by its asker: the config, the stores actions write, the
capabilities (read-only), and the SSH connections (the console's pool, or one the command opens and closes)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from poolconsole.collect.ssh import HostConnection, SSHPool
from poolconsole.config.models import Engine, Host, PoolConfig


@dataclass
class Workspace:
    config: PoolConfig
    audit_path: Path
    read_only: bool = False
    ssh: SSHPool | None = None
    """The console's pool of connections; None: one is opened for the hosts a run needs, and closed after."""
    _own: SSHPool | None = field(default=None, repr=False)

    def engine(self, name: str) -> Engine | None:
        return next((e for e in self.config.engines if e.name == name), None)

    def host_of(self, engine: Engine) -> Host | None:
        return self.config.host(engine.host)

    def connection(self, host: Host) -> HostConnection:
        """The connection to `host`, from the console's pool, else from one this workspace opens."""
        pool = self.ssh
        if pool is None:
            if self._own is None:
                self._own = SSHPool([], self.config.settings.ssh_timeout_s, 4)
            pool = self._own
        return pool.connections.get(host.name) or pool.add(host)

    async def close(self) -> None:
        """Closes what this workspace opened (never the console's pool)."""
        if self._own is not None:
            await self._own.close()
            self._own = None
