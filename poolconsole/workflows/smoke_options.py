"""What a smoke run is asked to do, checked before anything runs: the workloads and context lengths parsed,
the targets named in the config, something left to test. A refusal is a usage problem (the command exits 2)."""

from __future__ import annotations

from poolconsole.config.models import PoolConfig
from poolconsole.ops.smoke.context import LengthError, parse_lengths
from poolconsole.ops.smoke.runner import SmokeOptions, choose_targets
from poolconsole.ops.smoke.workloads import WorkloadError, parse_workloads

__all__ = ["SmokeOptions", "SmokeRefused", "smoke_options"]


class SmokeRefused(Exception):
    """Why the run cannot start, in words: a bad --workload or --context, an unknown target, nothing to test."""


def smoke_options(
    config: PoolConfig,
    targets: tuple[str, ...],
    *,
    via_gateway: bool,
    concurrency: tuple[int, ...],
    requests: int,
    seed: int | None,
    stall_s: float,
    total_s: float,
    workload: str | None,
    context: str | None,
) -> SmokeOptions:
    """The options of a run on `config`, or SmokeRefused saying why it cannot start."""
    try:
        workloads = parse_workloads(workload) if workload is not None else ()
        lengths = parse_lengths(context) if context is not None else ()
    except (WorkloadError, LengthError) as exc:
        raise SmokeRefused(str(exc)) from None
    options = SmokeOptions(
        targets,
        via_gateway,
        concurrency,
        requests,
        seed,
        stall_s,
        total_s,
        workloads=workloads,
        context=lengths,
    )
    unknown = [t for t in targets if t not in {e.name for e in config.engines}]
    if unknown:
        raise SmokeRefused(f"no engine named {', '.join(unknown)} in the config")
    if not choose_targets(config, options):
        raise SmokeRefused("nothing to test (no engine; gateways need --via-gateway)")
    return options
