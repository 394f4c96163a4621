"""The watcher's remediation in its start lines (issue 38): which audit log its automatic actions write, and what
it may do, on which engines, within what budget. Kept apart from workflows.remediation, which acts."""

from __future__ import annotations

from pathlib import Path

from poolconsole.config.models import PoolConfig
from poolconsole.ops import audit
from poolconsole.workflows.remediation import rungs_of


def audit_path_of(config: str | None) -> Path:
    """The audit log the watcher's actions write: the demo's beside a hosts.toml the demo wrote (as the
    commands' actions do), else the user's."""
    from poolconsole.sim.demo_files import CONFIG_HEADER, demo_stores

    if config:
        try:
            with Path(config).open(encoding="utf-8", errors="replace") as text:
                if text.readline().startswith(CONFIG_HEADER):
                    return demo_stores(Path(config))[0]
        except OSError:
            pass
    return audit.default_path()


def said_at_start(config: PoolConfig, audit_path: Path, *, dry_run: bool = False) -> str:
    """The watcher's line about its remediation: off, or what it may do, on which engines, within what."""
    policy = config.remediation
    if not policy.enabled:
        return "remediation off ([remediation] enabled = false): alerts are only notified"
    acting = []
    for engine in config.engines:
        rungs = rungs_of(config, engine)
        said = [f"{rule} -> {'/'.join(r)}" for rule, r in rungs.items() if r]
        if said:
            acting.append(f"{engine.name} ({', '.join(said)})")
    what = "; ".join(acting) if acting else "no engine's policy acts (notify only)"
    mode = "DRY RUN: says what it would do, does nothing" if dry_run else f"audited in {audit_path}"
    return (
        f"remediation on ({mode}): {what}; grace {policy.grace_s:g} s, cooldown {policy.cooldown_s:g} s, "
        f"{policy.max_actions_per_hour} action(s) per engine per hour"
    )
