"""A pool discovered from what a Prometheus holds (`poolconsole --prometheus URL`, no hosts.toml): one engine
per scrape target with `vllm:*`, `sglang:*` or `llamacpp:*` series, each read from that Prometheus by its
job and instance labels, and one host per instance host (the part before the port) with node_exporter,
DCGM exporter or nvidia_gpu_exporter series, read from there too; an engine at that host names it.
Discovery knows no control tables, so the console runs read-only."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterable

from pydantic import ValidationError

from poolconsole.collect.engines.kinds import adapters
from poolconsole.collect.prometheus.api import PrometheusAPI, quoted
from poolconsole.collect.prometheus.exporters import MARKERS
from poolconsole.config.load import ConfigError, Problem
from poolconsole.config.models import Engine, EngineKind, Host, PoolConfig, PrometheusSource, Settings


def prefixes() -> dict[EngineKind, str]:
    """kind -> the name prefix of its families, for every kind a Prometheus can hold (its adapter's metric spec:
    vllm:, sglang:, llamacpp:), in EngineKind's order."""
    return {a.kind: a.spec.prefix for a in adapters() if a.spec is not None and a.kind.in_prometheus}


class DiscoveryError(Exception):
    """Prometheus could not be asked, or holds no engine series."""


class NoEngineSeries(DiscoveryError):
    """Prometheus answered, and holds no engine series."""


def instance_host(instance: str) -> str:
    """The host part of an `instance` label: gpu-box of gpu-box:9100, ::1 of [::1]:9100."""
    if instance.startswith("["):
        return instance[1:].partition("]")[0]
    return instance.rsplit(":", 1)[0] if instance.count(":") == 1 else instance


def _name(text: str) -> str:
    name = re.sub(r"[^A-Za-z0-9._]+", "-", text).strip("-._")[:63]
    return name or "engine"


def _either(names: Iterable[str]) -> str:
    """Families in words: "vllm:*, sglang:* or llamacpp:*"."""
    words = [f"{name}*" for name in names]
    return " or ".join([", ".join(words[:-1]), words[-1]] if len(words) > 1 else words)


def engines_from_targets(targets: list[tuple[EngineKind, str, str]]) -> list[Engine]:
    """(kind, job, instance) per target -> engines named after their instance (HOST-PORT, then the job or the
    kind where two targets share an instance)."""
    engines: list[Engine] = []
    taken: set[str] = set()
    for kind, job, instance in sorted(targets, key=lambda t: (t[2], t[1], t[0].value)):
        host = instance.rsplit(":", 1)[0].strip("[]") if ":" in instance else instance
        name = _name(instance)
        for candidate in (name, _name(f"{name}-{job}"), _name(f"{name}-{job}-{kind.value}")):
            if candidate not in taken:
                name = candidate
                break
        taken.add(name)
        engines.append(
            Engine(
                name=name,
                kind=kind,
                url=f"http://{instance}",
                host=host or None,
                read="prometheus",
                selector=f"{{job={quoted(job)}, instance={quoted(instance)}}}",
                description=f"discovered in Prometheus: job {job}, instance {instance}",
            )
        )
    return engines


async def discover(api: PrometheusAPI) -> list[Engine]:
    """Every scrape target with engine series, grouped by (job, instance). Raises DiscoveryError."""
    prefix = prefixes()
    kinds = list(prefix)
    answers = await asyncio.gather(
        *(api.query(f'group by (job, instance) ({{__name__=~"{prefix[k]}.+"}})') for k in kinds)
    )
    for answer in answers:
        if not answer.ok:
            raise DiscoveryError(answer.error or "query failed")
    targets = [
        (kind, s.labels.get("job", ""), s.labels["instance"])
        for kind, answer in zip(kinds, answers, strict=True)
        for s in answer.series
        if s.labels.get("instance")
    ]
    if not targets:
        raise NoEngineSeries(
            f"{api.source.url} holds no {_either(prefix.values())} series, nor node_exporter, DCGM exporter "
            "or nvidia_gpu_exporter series (is it scraping the pool?)"
        )
    return engines_from_targets(targets)


def hosts_from_targets(targets: list[tuple[str, str, str]]) -> list[Host]:
    """(exporter, job, instance) per exporter target -> one host per instance host, named after it."""
    grouped: dict[str, list[tuple[str, str, str]]] = {}
    for exporter, job, instance in sorted(targets):
        grouped.setdefault(instance_host(instance), []).append((exporter, job, instance))
    hosts: list[Host] = []
    taken: set[str] = set()
    for address, found in sorted(grouped.items()):
        name = _name(address) if _name(address) != "engine" else "host"
        for n in range(2, 1000):
            if name not in taken:
                break
            name = _name(f"{_name(address)}-{n}")
        taken.add(name)
        seen = ", ".join(f"{exporter} {instance} (job {job})" for exporter, job, instance in found)
        hosts.append(
            Host(name=name, address=address, read="prometheus", description=f"discovered in Prometheus: {seen}")
        )
    return hosts


async def discover_hosts(api: PrometheusAPI) -> list[Host]:
    """Every instance host with exporter series. Raises DiscoveryError when a query fails."""
    exporters = list(MARKERS)
    answers = await asyncio.gather(
        *(api.query(f'group by (job, instance) ({{__name__=~"{"|".join(MARKERS[e])}"}})') for e in exporters)
    )
    for answer in answers:
        if not answer.ok:
            raise DiscoveryError(answer.error or "query failed")
    return hosts_from_targets(
        [
            (exporter, s.labels.get("job", ""), s.labels["instance"])
            for exporter, answer in zip(exporters, answers, strict=True)
            for s in answer.series
            if s.labels.get("instance")
        ]
    )


def _on_hosts(engines: list[Engine], hosts: list[Host]) -> list[Engine]:
    """Each engine names the discovered host at its instance host (if one was found there)."""
    by_address = {h.address: h.name for h in hosts}
    return [e.model_copy(update={"host": by_address.get(instance_host(e.instance), e.host)}) for e in engines]


def discovered_config(url: str, settings: Settings | None = None) -> PoolConfig:
    """The pool a Prometheus at `url` holds; raises ConfigError (naming the URL) when there is none."""
    try:
        source = PrometheusSource(url=url)
    except ValidationError as exc:
        raise ConfigError(url, [Problem("--prometheus", exc.errors()[0]["msg"])]) from None
    chosen = settings or Settings()

    async def run() -> tuple[list[Engine], list[Host]]:
        api = PrometheusAPI(source, chosen).acquire()
        try:
            hosts = await discover_hosts(api)
            try:
                engines = await discover(api)
            except NoEngineSeries:
                if not hosts:
                    raise
                engines = []
            return _on_hosts(engines, hosts), hosts
        finally:
            await api.release()

    try:
        engines, hosts = asyncio.run(run())
    except DiscoveryError as exc:
        raise ConfigError(url, [Problem("--prometheus", f"nothing discovered: {exc}")]) from None
    return PoolConfig(settings=chosen, prometheus=source, hosts=hosts, engines=engines)
