"""The exposure audit, once for every asker: every engine and gateway of the config probed without a key and
its host's listening sockets read (ops.exposure), judged into one report that `poolconsole exposure` prints (text
or JSON, with its exit code) and the console's security screen shows. Never destructive."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from poolconsole.config.models import PoolConfig
from poolconsole.model.exposure import EngineExposure
from poolconsole.ops import exposure

__all__ = ["ExposureReport", "NoEngines", "audit", "summary"]


class NoEngines(Exception):
    """The config has no engine to check (a usage problem: the command exits 2)."""


@dataclass(frozen=True)
class ExposureReport:
    results: list[EngineExposure]
    completion: bool
    """Whether the one-token completion was sent."""

    @property
    def summary(self) -> str:
        return exposure.summary(self.results)

    @property
    def exit_code(self) -> int:
        """0 every engine checked and none exposed; 1 one exposed or one not checked."""
        return exposure.exit_code(self.results)

    def document(self) -> dict[str, Any]:
        """The JSON document `exposure --json` prints."""
        return exposure.document(self.results, self.completion)

    def text_lines(self) -> list[str]:
        """The report as `exposure` prints it: each engine's verdict, its findings with their fixes, what was not
        checked, and the summary."""
        return exposure.text_lines(self.results)


def summary(results: list[EngineExposure]) -> str:
    """The audit's verdict in one line (the security screen's head)."""
    return exposure.summary(results)


async def audit(config: PoolConfig, completion: bool = True) -> ExposureReport:
    """Every engine and gateway of the config, in its order; NoEngines where there is none."""
    if not config.engines:
        raise NoEngines("the config has no [[engines]] to check")
    return ExposureReport(await exposure.audit(config, completion), completion)
