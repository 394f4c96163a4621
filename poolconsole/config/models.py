"""Pydantic models of hosts.toml.

Every table forbids unknown keys, so a typo is an error rather than a silently ignored setting.
Secrets are never written inline: a field ending in ``_env`` names the environment variable that
holds the secret, and it is read only when a request is made.
"""

from __future__ import annotations

import re
from enum import StrEnum
from functools import lru_cache
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import Field, field_validator, model_validator

from poolconsole.config.alerting import AlertSettings as AlertSettings
from poolconsole.config.alerting import Notify as Notify
from poolconsole.config.alerting import Slo as Slo
from poolconsole.config.engine_tables import SAFE_PATH as SAFE_PATH
from poolconsole.config.engine_tables import Control as Control
from poolconsole.config.engine_tables import EnvRef as EnvRef
from poolconsole.config.engine_tables import LogSource as LogSource
from poolconsole.config.engine_tables import Profile as Profile
from poolconsole.config.engine_tables import _check_path
from poolconsole.config.remediation import EngineRemediation as EngineRemediation
from poolconsole.config.remediation import Remediation as Remediation
from poolconsole.config.strict import ENV_NAME as ENV_NAME
from poolconsole.config.strict import SAFE_NAME as SAFE_NAME
from poolconsole.config.strict import Strict as Strict
from poolconsole.config.strict import _check_env, _check_name


@lru_cache(maxsize=4096)
def instance_of(url: str) -> str:
    """HOST:PORT of an engine's url (Engine.instance). Cached by url: a batch at 1,000 engines asks it of every
    engine each tick, and urlsplit was 2.3 % of the console's samples (py-spy, scale_bench)."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    host = parts.hostname or ""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


# An engine kind, as hosts.toml names it. What a kind is (its poll, metric names, paths, rules) lives in its
# adapter, collect/engines/kinds/<value>.py. The one fact kept here is the one hosts.toml's validation needs
# before any adapter can be asked (config is the bottom layer): whether a Prometheus can hold the kind's
# metrics (`read = "prometheus"`), a member's second word; tests/unit/test_engine_kinds.py holds it to the
# adapter's metric spec. (A comment, not a docstring: the JSON Schema would show a docstring.)


class EngineKind(StrEnum):
    _value_: str
    in_prometheus: bool
    """A Prometheus scraping it holds the families its adapter's metric spec reads."""

    def __new__(cls, word: str, in_prometheus: bool = False) -> EngineKind:
        member = str.__new__(cls, word)
        member._value_ = word
        member.in_prometheus = in_prometheus
        return member

    VLLM = "vllm", True
    SGLANG = "sglang", True
    LLAMACPP = "llamacpp", True
    OLLAMA = "ollama"
    LITELLM = "litellm"
    OPENAI = "openai"


PROMETHEUS_KINDS = tuple(kind for kind in EngineKind if kind.in_prometheus)
"""The kinds whose metrics a Prometheus can hold (the families the direct collectors read from /metrics)."""


def said(kinds: tuple[EngineKind, ...]) -> str:
    """Kinds in words: "vllm, sglang and llamacpp"."""
    words = [kind.value for kind in kinds]
    return " and ".join([", ".join(words[:-1]), words[-1]] if len(words) > 1 else words)


class Settings(Strict):
    """Console-wide settings (the optional `[settings]` table)."""

    poll_interval_s: Annotated[float, Field(gt=0, le=3600)] = 2.0
    """Seconds between two polls of the same target."""
    http_timeout_s: Annotated[float, Field(gt=0, le=120)] = 5.0
    """Timeout of one HTTP request to an engine (connect and read)."""
    max_body_bytes: Annotated[int, Field(ge=1024, le=256 * 1024 * 1024)] = 16 * 1024 * 1024
    """Largest response body read from an engine; a bigger one is an error, not a hang."""
    ssh_timeout_s: Annotated[float, Field(gt=0, le=120)] = 10.0
    """Timeout of one SSH command or connection attempt."""
    ssh_concurrency: Annotated[int, Field(ge=1, le=1024)] = 32
    """At most this many hosts are polled over SSH at the same time."""
    litellm_health_interval_s: Annotated[float, Field(ge=0)] = 0.0
    """Seconds between two calls of each LiteLLM gateway's deep `/health` in the console (0 = never). Each
    call makes a real request to every deployment behind the gateway, so it spends tokens: keep it slow
    (e.g. 600). The result shows on the gateway screen."""


class StoreSettings(Strict):
    """The history store (the optional `[store]` table): every poll's normalized values (the fields of
    `status --json`), written by the console and by `poolconsole record`, read by `poolconsole export`
    and by the console's charts on launch. Full resolution for `full_resolution_hours`, then one row per
    target and minute until `rollup_days`, then deleted."""

    path: str | None = None
    """SQLite file (default: history.sqlite3 in the user data directory, ~/.local/share/poolconsole/ on
    Linux); `~` is expanded."""
    record: bool = True
    """The console records every poll while it runs and fills its charts from the store on launch (false:
    neither; `poolconsole record` always records)."""
    full_resolution_hours: Annotated[float, Field(gt=0, le=24 * 366)] = 24.0
    """Every poll is kept this long; older ones become 1-minute rollups (gauges averaged, counters last)."""
    rollup_days: Annotated[float, Field(gt=0, le=3660)] = 90.0
    """Rollups (and anything else) older than this many days are deleted."""

    @model_validator(mode="after")
    def _order(self) -> StoreSettings:
        if self.rollup_days * 24 < self.full_resolution_hours:
            raise ValueError("rollup_days must cover full_resolution_hours (rows are rolled up before deleted)")
        return self


class LedgerSettings(Strict):
    """Prices and the decision line of `poolconsole ledger` (the optional `[ledger]` table). Every field is
    optional: without prices the ledger still counts tokens, busy hours and energy, and decides on the
    threshold alone."""

    currency: str = ""
    """A label printed with every amount (EUR, USD, ...); amounts are plain numbers in it."""
    electricity_per_kwh: Annotated[float, Field(ge=0)] | None = None
    """Price of one kWh at the wall: turns GPU energy into the energy cost and the idle burn into money."""
    pue: Annotated[float, Field(ge=1, le=5)] = 1.0
    """Wall kWh per GPU kWh (cooling, power supplies, the rest of the machine): 1.0 counts the GPUs alone."""
    api_price_per_mtok: dict[str, Annotated[float, Field(ge=0)]] = {}
    """API-equivalent price of one million output tokens, by model name as the engine lists it (or by engine
    name); the key "*" prices every other model. The value produced is an engine's output tokens at it."""
    hardware_cost: Annotated[float, Field(ge=0)] | None = None
    """What the pool's hardware cost: depreciated over `hardware_lifetime_years`, and the payback."""
    hardware_lifetime_years: Annotated[float, Field(gt=0, le=50)] = 3.0
    """Straight-line depreciation period of `hardware_cost`."""
    threshold_output_tokens_per_day: Annotated[int, Field(ge=1)] = 200_000
    """The decision line: a median day above it means pooling pays off (the seed's "hundreds of thousands
    of output tokens per day"); below it, treat the pool as an on-prem compliance backup."""


class Host(Strict):
    """A machine reached over SSH (`[[hosts]]`)."""

    gpu_memory_gib: list[float] | None = None
    """GPU memory per card for `poolconsole plan` when the host is not polled (e.g. [24, 24, 24, 24])."""
    memory_gib: float | None = None
    """System memory (unified-memory hosts: what the GPU can use)."""

    name: str
    """Short name shown in the console; engines refer to it with `host = "..."`."""
    address: str
    """DNS / Tailscale name or IP; may be a `Host` alias from ~/.ssh/config. Always reached over SSH, even
    127.0.0.1 or localhost (a tunnel, a simulated host): only `local = true` reads this machine directly."""
    port: Annotated[int, Field(ge=1, le=65535)] | None = None
    """SSH port (default: from ~/.ssh/config, else 22)."""
    user: str | None = None
    """SSH user (default: from ~/.ssh/config, else the local user)."""
    identity_file: str | None = None
    """Private key file (default: from ~/.ssh/config and the agent)."""
    known_hosts: str | None = None
    """known_hosts file to verify the host key against (default: ~/.ssh/known_hosts)."""
    host_key_policy: Literal["strict", "accept-new"] = "strict"
    """`strict` refuses unknown keys; `accept-new` records a first-seen key (never a changed one)."""
    ssh_config: str | None = None
    """OpenSSH client config file to read (default: ~/.ssh/config)."""
    description: str | None = None
    """Free text: the hardware, shown in the console."""
    memory_kind: Literal["auto", "dedicated", "unified"] = "auto"
    """`unified` for GB10 / Jetson / Apple Silicon; `auto` detects it."""
    local: bool = False
    """Read this machine directly through NVML and /proc/meminfo, without SSH (when NVML does not load,
    the host is read over SSH at `address` as any other)."""
    read: Literal["direct", "prometheus"] = "direct"
    """Where the host's telemetry (GPUs, memory, swap) comes from: `direct` reads it over SSH (or NVML with
    `local = true`); `prometheus` reads node_exporter and a GPU exporter (NVIDIA's DCGM exporter or
    nvidia_gpu_exporter) from the `[prometheus]` query API. The SSH settings still serve the host's actions
    (restarts, logs, container checks) either way."""
    selector: str | None = None
    """With read = "prometheus": the host's exporter series as PromQL label matchers, e.g.
    `{instance=~"gpu-box:(9100|9400)"}` (default: every target whose `instance` is `address` with any port,
    e.g. gpu-box:9100 and gpu-box:9400)."""

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return _check_name(value)

    @field_validator("selector")
    @classmethod
    def _selector(cls, value: str | None) -> str | None:
        return _check_selector(value, '{instance=~"gpu-box:(9100|9400)"}', "the exporters' families")

    @field_validator("address", "user")
    @classmethod
    def _no_shell(cls, value: str | None) -> str | None:
        if value is not None and not re.match(r"^[A-Za-z0-9._:@%\[\]-]+$", value):
            raise ValueError("contains characters that are not allowed in a host address or user name")
        return value


class SmokeSettings(Strict):
    """How `poolconsole smoke` tests an engine (the optional `[engines.smoke]` table)."""

    tools: bool = False
    """The engine serves tool calls (vLLM --enable-auto-tool-choice, SGLang with a tool parser, llama.cpp --jinja)."""
    json_schema: bool = False
    """The engine supports response_format json_schema (structured output)."""
    anthropic: bool = False
    """A gateway that also speaks the Anthropic Messages API (/v1/messages)."""
    embedding_models: list[str] | None = None
    """Models to test as embedding models (default: names containing "embed")."""
    models: list[str] | None = None
    """Only these models (default: every model /v1/models lists)."""
    probe_prompt: str | None = None
    """Correctness probe: a prompt..."""
    probe_expect: str | None = None
    """...and a regular expression the answer must match."""
    max_tokens: Annotated[int, Field(ge=2, le=8192)] = 64
    """Output tokens asked for by the timed streaming check."""
    slo_ttft_p95_s: Annotated[float, Field(gt=0)] | None = None
    """SLO: 95th percentile time to first token, seconds."""
    slo_itl_p95_s: Annotated[float, Field(gt=0)] | None = None
    """SLO: 95th percentile inter-token latency, seconds."""
    slo_min_tokens_per_s: Annotated[float, Field(gt=0)] | None = None
    """SLO: minimum decode speed of one stream (per_stream tok/s)."""

    @field_validator("probe_expect")
    @classmethod
    def _regex(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:  # not a ValueError: pydantic would let it through as a traceback
                raise ValueError(f"not a regular expression: {exc}") from None
        return value


MATCHER = r'[A-Za-z_][A-Za-z0-9_]*\s*(?:=~|!~|!=|=)\s*"(?:[^"\\\n]|\\.)*"'
SELECTOR = re.compile(rf"^\{{\s*{MATCHER}(?:\s*,\s*{MATCHER})*\s*,?\s*\}}$")


def _check_selector(value: str | None, example: str, names_from: str) -> str | None:
    """PromQL label matchers in braces, none of them on __name__ (the reader picks the metric names)."""
    if value is None:
        return None
    if not SELECTOR.match(value.strip()):
        raise ValueError(f"must be PromQL label matchers in braces, e.g. {example}")
    if re.search(r"(^|[{,\s])__name__\s*[=!]", value):
        raise ValueError(f"must not match __name__: the metric names come from {names_from}")
    return value.strip()


def _check_url(value: str) -> str:
    if not re.match(r"^https?://[^\s/?#]+(/[^\s?#]*)?$", value):
        raise ValueError("must be an http:// or https:// base URL without query or fragment")
    try:
        _ = urlsplit(value).port  # what a poll reads: raises for a port out of range, or "http://[x"
    except ValueError as exc:
        raise ValueError(f"is not a URL a poll can use: {exc}") from None
    return value.rstrip("/")


class PrometheusSource(Strict):
    """A Prometheus-compatible query API (Prometheus, Thanos Query, VictoriaMetrics, Mimir) that already
    scrapes the pool (the optional `[prometheus]` table): engines with `read = "prometheus"` are read from it
    with instant queries instead of polling their own endpoints."""

    url: str
    """Base URL of the query API, e.g. http://prometheus.tailnet-example.ts.net:9090 (the part before
    /api/v1/query; with its path prefix for Thanos, VictoriaMetrics or Mimir)."""
    api_key_env: str | None = None
    """Environment variable holding a token sent as `Authorization: Bearer ...`."""
    username: str | None = None
    """HTTP basic auth user (with `password_env`)."""
    password_env: str | None = None
    """Environment variable holding the HTTP basic auth password."""
    ca_file: str | None = None
    """PEM file of the certificate authority that signed an https:// query API's certificate (default: the
    system's trust store)."""

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        return _check_url(value)

    @field_validator("api_key_env", "password_env")
    @classmethod
    def _env(cls, value: str | None) -> str | None:
        return _check_env(value)

    @field_validator("ca_file")
    @classmethod
    def _path(cls, value: str | None) -> str | None:
        return _check_path(value)

    @model_validator(mode="after")
    def _auth(self) -> PrometheusSource:
        if (self.username is None) != (self.password_env is None):
            raise ValueError("basic auth needs both username and password_env")
        if self.username is not None and self.api_key_env is not None:
            raise ValueError("give api_key_env (a Bearer token) or username + password_env (basic auth), not both")
        return self


class Engine(Strict):
    """An inference engine endpoint (`[[engines]]`)."""

    name: str
    """Short unique name shown in the console and used on the command line."""
    kind: EngineKind
    """vllm, sglang, llamacpp, ollama, litellm, or openai (any other OpenAI-compatible server)."""
    url: str
    """Base URL of the engine, e.g. http://gpu-box:8000 (without /v1)."""
    host: str | None = None
    """Name of the `[[hosts]]` entry the engine runs on."""
    api_key_env: str | None = None
    """Environment variable holding the API key sent as a Bearer token (LiteLLM master key, --api-key)."""
    read: Literal["direct", "prometheus"] = "direct"
    """Where the engine's metrics come from: `direct` polls its own endpoints; `prometheus` reads the same
    metric families from the `[prometheus]` query API (vLLM, SGLang and llama.cpp)."""
    selector: str | None = None
    """With read = "prometheus": this engine's series as PromQL label matchers, e.g.
    `{job="vllm", instance="gpu-box:8000"}` (default: `{instance="HOST:PORT"}`, HOST:PORT of `url`)."""
    model: str | None = None
    """What it serves, for people: e.g. "Qwen3-Next-80B-A3B-Instruct AWQ 4-bit"."""
    profile: str | None = None
    """Name of the active quantization profile."""
    gpus: list[int] | None = None
    """GPU indices on the host this engine uses (tensor-parallel nodes list several)."""
    container: str | None = None
    """Container or systemd unit that runs the engine (default: `control.name`): a GPU several engines share
    has its processes mapped to engines by the container or unit their cgroup names. Restarts use
    `[engines.control]`."""
    description: str | None = None
    """Free text shown in the console."""
    degrade_to: str | None = None
    """Engine (by name) with a smaller model that non-critical traffic can move to when this one queues."""
    smoke: SmokeSettings = SmokeSettings()
    """Smoke-test settings and SLOs."""
    control: Control | None = None
    """Restart and profile control over SSH; without it the engine is watch-only."""
    logs: LogSource | None = None
    """Where `poolconsole logs` and the detail screen read the engine's log (default: through `control`)."""
    profiles: list[Profile] = []
    """Quantization profiles; `profile` names the active one."""
    remediation: EngineRemediation = EngineRemediation()
    """This engine's remediation policy over `[remediation]`'s defaults (`poolconsole watch` only)."""

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return _check_name(value)

    @field_validator("api_key_env")
    @classmethod
    def _env(cls, value: str | None) -> str | None:
        return _check_env(value)

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        return _check_url(value)

    @field_validator("selector")
    @classmethod
    def _selector(cls, value: str | None) -> str | None:
        return _check_selector(value, '{job="vllm", instance="gpu-box:8000"}', "the engine's kind")

    @property
    def instance(self) -> str:
        """HOST:PORT of `url`: the `instance` label Prometheus gives a target scraped at this address."""
        return instance_of(self.url)

    @field_validator("container")
    @classmethod
    def _container(cls, value: str | None) -> str | None:
        return None if value is None else _check_name(value)


class PoolConfig(Strict):
    """The whole hosts.toml."""

    settings: Settings = Settings()
    alerts: AlertSettings = AlertSettings()
    store: StoreSettings = StoreSettings()
    ledger: LedgerSettings = LedgerSettings()
    keys: dict[str, str] = {}
    """Key remapping: action id = key, e.g. `filter = "f"` (`poolconsole schema` lists the ids)."""
    prometheus: PrometheusSource | None = None
    """The query API that engines and hosts with `read = "prometheus"` are read from."""
    notify: list[Notify] = []
    """Where `poolconsole watch` sends alerts (`[[notify]]`): webhook, alertmanager or ntfy receivers."""
    slo: list[Slo] = []
    """TTFT objectives (`[[slo]]`) the watcher's slo_burn rule and `prometheus-rules` hold engines and models to."""
    remediation: Remediation = Remediation()
    """What `poolconsole watch` may do by itself when a rule fires (`[remediation]`; off by default)."""
    hosts: list[Host] = []
    engines: list[Engine] = []

    @model_validator(mode="after")
    def _unique(self) -> PoolConfig:
        problems: list[str] = []
        for engine in self.engines:
            if engine.read == "prometheus" and self.prometheus is None:
                problems.append(f'engine {engine.name!r}: read = "prometheus" needs a [prometheus] table with its url')
            if engine.read == "prometheus" and engine.kind not in PROMETHEUS_KINDS:
                problems.append(
                    f'engine {engine.name!r}: read = "prometheus" is for {said(PROMETHEUS_KINDS)} ({engine.kind} '
                    "exposes no engine metrics)"
                )
            if engine.selector is not None and engine.read != "prometheus":
                problems.append(f'engine {engine.name!r}: selector is only read with read = "prometheus"')
        for host in self.hosts:
            if host.read == "prometheus" and self.prometheus is None:
                problems.append(f'host {host.name!r}: read = "prometheus" needs a [prometheus] table with its url')
            if host.read == "prometheus" and host.local:
                problems.append(
                    f'host {host.name!r}: local = true reads this machine through NVML, read = "prometheus" from '
                    "[prometheus]: pick one"
                )
            if host.selector is not None and host.read != "prometheus":
                problems.append(f'host {host.name!r}: selector is only read with read = "prometheus"')
        for label, names in (("host", [h.name for h in self.hosts]), ("engine", [e.name for e in self.engines])):
            seen: set[str] = set()
            for name in names:
                if name in seen:
                    problems.append(f"duplicate {label} name {name!r}")
                seen.add(name)
        engines = {e.name for e in self.engines}
        for engine in self.engines:
            names = [p.name for p in engine.profiles]
            if engine.profiles and engine.profile is not None and engine.profile not in names:
                problems.append(f"engine {engine.name!r}: profile {engine.profile!r} is not one of its profiles")
            if len(set(names)) != len(names):
                problems.append(f"engine {engine.name!r}: duplicate profile names")
            if engine.degrade_to is not None and engine.degrade_to not in engines:
                problems.append(f"engine {engine.name!r}: degrade_to names no engine ({engine.degrade_to!r})")
        targets = [s.target for s in self.slo]
        problems += [f"slo: {t!r} has two objectives" for t in sorted({t for t in targets if targets.count(t) > 1})]
        problems += [f"slo: engine {s.engine!r} is not an [[engines]] name" for s in self.slo if s.engine is not None
                     and s.engine not in engines]  # fmt: skip
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def host(self, name: str | None) -> Host | None:
        return next((h for h in self.hosts if h.name == name), None)

    def warnings(self) -> list[str]:
        """Problems that do not stop the console (an engine naming a host that is not declared)."""
        names = {h.name for h in self.hosts}
        spending = [
            f"settings.litellm_health_interval_s = {self.settings.litellm_health_interval_s:g}: every probe of "
            "a gateway's deep /health makes a real call to each deployment and spends tokens"
        ]
        gateways = any(e.kind is EngineKind.LITELLM for e in self.engines)
        empty = [] if self.engines or self.hosts else ["nothing to poll: no [[engines]] and no [[hosts]]"]
        return (
            empty
            + (spending if self.settings.litellm_health_interval_s > 0 and gateways else [])
            + [
                f"engines.{e.name}: host {e.host!r} has no [[hosts]] entry, so its GPUs are not read"
                for e in self.engines
                if e.host is not None and names and e.host not in names
            ]
        )
