"""A Prometheus-compatible query API (Prometheus, Thanos Query, VictoriaMetrics, Mimir) as the collectors
use it: keep-alive GETs that never raise, an instant query's answer as a vector of Series or an error in
words with the state it puts a target in, and the label quoting PromQL wants."""

from __future__ import annotations

import base64
import json
import os
import ssl
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

import msgspec
import orjson

from poolconsole.collect.http import Failure, Fetched, PollClient, fetch
from poolconsole.collect.prometheus.batch import scrape_error_in
from poolconsole.config.models import PrometheusSource, Settings
from poolconsole.model.snapshots import EngineState

if TYPE_CHECKING:
    from poolconsole.collect.prometheus.batch import Coalescer
    from poolconsole.collect.prometheus.source import EngineReads


class Series(msgspec.Struct, frozen=True, gc=False):
    """One element of an instant vector: its labels (with __name__) and its (evaluation time, value), as the
    answer's JSON has them ({"metric": {...}, "value": [at, "v"]}). A msgspec struct, so an answer is decoded
    into its series in C (parse_vector): 32,869 of them a tick at 1,000 engines. Not tracked by the cyclic
    collector: it holds only a dict of strings and floats. Made in code with `Series.of`."""

    labels: dict[str, str] = msgspec.field(name="metric")
    sample: tuple[float, float] = msgspec.field(name="value")

    @property
    def value(self) -> float:
        return self.sample[1]

    @property
    def at(self) -> float:
        return self.sample[0]

    @classmethod
    def of(cls, labels: dict[str, str], value: float, at: float) -> Series:
        """The series of these labels, value and evaluation time."""
        return cls(labels, (at, value))


class _Vector(msgspec.Struct, gc=False):
    resultType: str
    result: tuple[Series, ...]


class _VectorAnswer(msgspec.Struct, gc=False):
    status: str
    data: _Vector


_VECTOR = msgspec.json.Decoder(_VectorAnswer, strict=False)
"""A successful instant vector answer, decoded straight into its series; strict=False reads the values'
strings ("0.25", "NaN") as floats."""


@dataclass(frozen=True)
class Answer:
    """What one query gave: the vector, or an error in words and the state it puts an engine in."""

    series: tuple[Series, ...] = ()
    error: str | None = None
    state: EngineState | None = None
    elapsed_s: float | None = None
    same_scrape: bool = False
    """Not read again: the scrape the asker holds a reading of is still the latest (an engine's batch)."""

    @property
    def ok(self) -> bool:
        return self.error is None


def _query_error(fetched: Fetched) -> str | None:
    """Prometheus' own words for a refused query ({"status": "error", "errorType", "error"})."""
    try:
        doc = orjson.loads(fetched.body)
    except ValueError:
        return None
    if isinstance(doc, dict) and doc.get("status") == "error":
        return f"{doc.get('errorType', 'error')}: {doc.get('error', '')}".strip()
    return None


def query_result(body: bytes) -> tuple[Any, Any]:
    """A successful query API answer's (resultType, result). Raises ValueError (JSON errors included: orjson's
    error is a ValueError, and it refuses invalid UTF-8 and nesting past 1,024 with it too). orjson, not the
    stdlib's json: 6 MB of answers a tick at 1,000 engines, decoded in 0.58 of the time (BENCHMARKS.md)."""
    doc = orjson.loads(body)
    if not isinstance(doc, dict) or doc.get("status") != "success":
        raise ValueError("not a successful Prometheus query answer")
    data = doc.get("data") or {}
    return data.get("resultType"), data.get("result")


def parse_vector(body: bytes) -> tuple[Series, ...]:
    """An /api/v1/query answer of result type vector (or scalar) -> its series. Raises ValueError.

    The answers as Prometheus writes them are decoded by msgspec into their series in one pass: at 1,000
    engines, a third of the time orjson's objects took to decode and then walk in Python (BENCHMARKS.md). What
    that pass refuses (an error answer, a scalar, a value such as "+Inf" or a label that is not a string) is
    read by `_parse_any`, as every answer was before, so no answer is read differently."""
    try:
        answer = _VECTOR.decode(body)
    except msgspec.DecodeError:  # a ValidationError too
        return _parse_any(body)
    if answer.status != "success" or answer.data.resultType != "vector":
        return _parse_any(body)
    return answer.data.result


def _parse_any(body: bytes) -> tuple[Series, ...]:
    """parse_vector for any answer, through orjson's objects: the scalar, the labels that are not strings (made
    strings), the values float() reads, and the errors in words."""
    kind, result = query_result(body)
    if kind == "scalar" and isinstance(result, list):
        return (Series.of({}, float(result[1]), float(result[0])),)
    if kind != "vector" or not isinstance(result, list):
        raise ValueError(f"expected an instant vector, got {kind!r}")
    join = "".join
    out = []
    for item in result:
        metric = item["metric"]
        at, value = item["value"]
        try:
            join(metric.values())  # JSON's keys are strings; join() refuses any value that is not, in C
        except TypeError:
            metric = {str(k): str(v) for k, v in metric.items()}
        except AttributeError:
            raise ValueError(f"a series' labels are not an object: {metric!r:.80}") from None
        out.append(Series.of(metric, float(value), float(at)))
    return tuple(out)


class PrometheusAPI:
    """The query API of `[prometheus]`: keep-alive GETs (one poll client), never raising. Shared by every
    engine read from it; closed when the last of them closes (`acquire` / `release`)."""

    def __init__(self, source: PrometheusSource, settings: Settings | None = None) -> None:
        self.source = source
        self.settings = settings or Settings()
        tls = ssl.create_default_context(cafile=source.ca_file) if source.ca_file else None
        self.client = PollClient(tls)
        self.users = 0
        self.reuse_s = self.settings.poll_interval_s / 2
        """How long after a batch started its reading is served again (prometheus.batch)."""
        parts = urlsplit(source.url)
        self.where = parts.netloc.rpartition("@")[2]
        from poolconsole.collect.prometheus.source import EngineReads  # the engines' batch builds on this module

        self.engine_reads: EngineReads = EngineReads(self, self.reuse_s)
        """The engines read from this API, batched."""
        self.host_reads: Coalescer[Any, Any, Any] | None = None
        """The hosts read from it, batched (prometheus.hosts.HostReads, made by the first host poller)."""

    def acquire(self) -> PrometheusAPI:
        self.users += 1
        return self

    async def release(self) -> None:
        self.users -= 1
        if self.users <= 0:
            await self.client.aclose()

    def headers(self) -> tuple[dict[str, str] | None, str | None]:
        """The credentials from the environment, or why they are missing."""
        src = self.source
        if src.api_key_env is not None:
            token = os.environ.get(src.api_key_env)
            if not token:
                return None, f"environment variable {src.api_key_env} ([prometheus] api_key_env) is not set"
            return {"Authorization": f"Bearer {token}"}, None
        if src.username is not None and src.password_env is not None:
            password = os.environ.get(src.password_env)
            if password is None:
                return None, f"environment variable {src.password_env} ([prometheus] password_env) is not set"
            pair = base64.b64encode(f"{src.username}:{password}".encode()).decode()
            return {"Authorization": f"Basic {pair}"}, None
        return None, None

    async def get(self, path: str, timeout_s: float | None = None) -> Fetched:
        headers, _ = self.headers()
        return await fetch(
            self.client,
            self.source.url + path,
            timeout_s=self.settings.http_timeout_s if timeout_s is None else timeout_s,
            max_bytes=self.settings.max_body_bytes,
            headers=headers,
        )

    async def query(self, expr: str) -> Answer:
        """One instant query (evaluated now)."""
        fetched = await self.get(query_path(expr))
        failed = self.failed(fetched, "/api/v1/query")
        if failed is not None:
            return failed
        try:
            return Answer(parse_vector(fetched.body), elapsed_s=fetched.elapsed_s)
        except (ValueError, KeyError, TypeError, IndexError) as exc:
            return Answer(
                error=f"Prometheus at {self.where}: not a query API answer ({exc})",
                state=EngineState.DEGRADED,
                elapsed_s=fetched.elapsed_s,
            )

    def failed(self, fetched: Fetched, endpoint: str) -> Answer | None:
        """A query that got no answer (refused, timed out, unauthorized, an error) in words; None when it did."""
        elapsed = fetched.elapsed_s
        if fetched.failure in (Failure.REFUSED, Failure.TIMEOUT):
            said = (fetched.error or "").split(" (is the engine")[0]  # fetch's hint is about engines
            return Answer(error=f"Prometheus at {self.where}: {said}", state=EngineState.DOWN, elapsed_s=elapsed)
        if fetched.failure is Failure.AUTH:
            _, unset = self.headers()
            hint = unset or "set [prometheus] api_key_env, or username and password_env"
            return Answer(
                error=f"Prometheus at {self.where} refused the query (HTTP {fetched.status}): {hint}",
                state=EngineState.AUTH_FAILED,
                elapsed_s=elapsed,
            )
        if not fetched.ok:
            refused = _query_error(fetched)
            if refused is not None:
                return Answer(error=f"query error: {refused}", state=EngineState.DEGRADED, elapsed_s=elapsed)
            if fetched.failure is Failure.NOT_FOUND:
                error = f"{self.source.url}{endpoint} answers 404: is [prometheus] url the query API's base URL?"
            else:
                error = f"Prometheus at {self.where}: {fetched.error}"
            return Answer(error=error, state=EngineState.DEGRADED, elapsed_s=elapsed)
        return None

    async def active_targets(self) -> list[dict[str, Any]]:
        """/api/v1/targets' active targets; none when it cannot be read."""
        fetched = await self.get("/api/v1/targets?state=active")
        if not fetched.ok:
            return []
        try:
            targets = json.loads(fetched.body)["data"]["activeTargets"]
        except (ValueError, KeyError, TypeError):
            return []
        return targets if isinstance(targets, list) else []

    async def scrape_error(self, labels: dict[str, str]) -> str | None:
        """The last scrape error Prometheus reports for the target with these job / instance labels."""
        return scrape_error_in(await self.active_targets(), labels)


@lru_cache(maxsize=32)
def query_path(expr: str) -> str:
    """The instant query's path and query string. Kept for the queries sent again and again: a batch's scrape
    times are the same queries every tick, 9 KB each at 200 engines, which quote() takes 0.25 ms to encode.
    At most 32 held: about 1.3 MB with 200-engine reads of ~40 KB, key and path."""
    return "/api/v1/query?query=" + quote(expr, safe="")


def quoted(value: str) -> str:
    """A PromQL string literal."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
