"""The tailnet survey, once for every asker: each host of the config, direct or relayed, online, its last
handshake (ops.tailnet: this machine's Tailscale status, each host's over SSH), judged into one report that
`poolconsole tailnet` prints (model.tailnet: text or JSON, with its exit code)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from poolconsole.config.models import PoolConfig
from poolconsole.model import tailnet as view
from poolconsole.model.tailnet import HostTailnet
from poolconsole.ops import tailnet

__all__ = ["HostTailnet", "NoHosts", "TailnetReport", "survey"]


class NoHosts(Exception):
    """The config has no host to survey (a usage problem: the command exits 2)."""


@dataclass(frozen=True)
class TailnetReport:
    results: list[HostTailnet]

    @property
    def exit_code(self) -> int:
        """0 every host on the tailnet and direct (or idle), 1 a host flagged."""
        return view.exit_code(self.results)

    def document(self) -> dict[str, Any]:
        """The JSON document `tailnet --json` prints."""
        return view.document(self.results)

    def text_lines(self) -> list[str]:
        return view.text_lines(self.results)


async def survey(config: PoolConfig) -> TailnetReport:
    """Every host of the config, in its order; NoHosts where there is none."""
    if not config.hosts:
        raise NoHosts("the config has no [[hosts]]")
    return TailnetReport(await tailnet.survey(config))
