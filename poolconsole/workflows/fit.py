"""What runs where and what fits (`poolconsole plan`): every engine's profiles through the fit check
(ops.fit, ops.planning), against a poll of the pool (each host's GPUs and what other processes hold on them,
the engines' own KV figures) or, offline, against the config alone; the profiles active after rollovers come
from the audit log."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path

from poolconsole.config.models import PoolConfig
from poolconsole.model.hosts import HostSnapshot
from poolconsole.ops import audit
from poolconsole.ops.fit import KvCapacity
from poolconsole.ops.planning import plan_lines, poll_hosts, read_kv


@dataclass(frozen=True)
class Measured:
    """The pool as polled for the fit check: each host's snapshot and each engine's own KV figures."""

    hosts: dict[str, HostSnapshot] = field(default_factory=dict)
    kv: dict[str, KvCapacity | None] = field(default_factory=dict)


async def measure(config: PoolConfig) -> Measured:
    """One poll of every host and of the KV figures of every engine with profiles, concurrently."""
    hosts, kv = await asyncio.gather(
        poll_hosts(config, {h.name for h in config.hosts}),
        read_kv([e for e in config.engines if e.profiles], config),
    )
    return Measured(hosts, kv)


def active_profiles(config: PoolConfig, audit_path: Path) -> dict[str, str]:
    """Each engine's profile now: the audit log's last promotion, else the config's, else ""."""
    return {e.name: audit.active_profile(audit_path, e.name) or e.profile or "" for e in config.engines}


def instance_map(config: PoolConfig, active: dict[str, str], measured: Measured | None) -> list[str]:
    """The lines `plan` prints: each host, what it holds now, and each engine's profiles through the fit check
    (`active`: each engine's profile now, `active_profiles`). `measured` None: offline, the config's figures
    only."""
    got = measured or Measured()
    return plan_lines(config, got.hosts, got.kv, active, measured is None)
