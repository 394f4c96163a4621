"""hosts.toml's alerting tables: `[alerts]` (the rules' thresholds and holds), `[[notify]]` (where the
watcher pages) and `[[slo]]` (TTFT objectives). Split from config/models.py by size; config.models imports
them back as the one schema module, and config/schema.py reads their field docstrings from here."""

from __future__ import annotations

from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import Field, field_validator, model_validator

from poolconsole.config.strict import Strict, _check_env


class AlertSettings(Strict):
    """Alert thresholds (the optional `[alerts]` table). An alert clears `hysteresis` below its threshold."""

    kv_usage: Annotated[float, Field(gt=0, le=1)] = 0.90
    """KV-cache usage (0..1) at which new requests start to queue."""
    waiting: Annotated[float, Field(ge=1)] = 8
    """Requests waiting in an engine's queue."""
    vram: Annotated[float, Field(gt=0, le=1)] = 0.95
    """GPU memory used (0..1), per GPU."""
    tps_collapse: Annotated[float, Field(gt=0, lt=1)] = 0.3
    """Generation tok/s below this fraction of the engine's recent peak, with requests running."""
    hysteresis: Annotated[float, Field(ge=0, lt=0.5)] = 0.05
    """How far below a fraction threshold an alert must fall to clear."""
    bell: bool = False
    """Ring the terminal bell when an alert fires."""
    restart_loop_count: Annotated[int, Field(ge=2)] = 3
    """Restart loop: this many restarts (counter resets, new process start time) ..."""
    restart_loop_minutes: Annotated[float, Field(gt=0)] = 10.0
    """... within this many minutes."""
    down_for_s: Annotated[float, Field(ge=0)] = 0.0
    """A target down (not answering) fires once it has been down this long (Prometheus' `for`); its row
    says so at once either way."""
    kv_usage_for_s: Annotated[float, Field(ge=0)] = 30.0
    """The KV-cache alert fires once usage has stayed at or over `kv_usage` this long."""
    waiting_for_s: Annotated[float, Field(ge=0)] = 15.0
    """The queue alert fires once `waiting` or more requests have waited this long."""
    vram_for_s: Annotated[float, Field(ge=0)] = 30.0
    """A GPU's memory alert fires once it has stayed at or over `vram` this long."""
    swap_for_s: Annotated[float, Field(ge=0)] = 10.0
    """Swap in use on unified memory fires once it has been in use this long."""
    tps_collapse_for_s: Annotated[float, Field(ge=0)] = 15.0
    """The tok/s collapse fires once the mean of the last 15 polls has stayed under the line this long; it
    clears `hysteresis` (a fraction of the recent best) above the line."""
    stall_s: Annotated[float, Field(gt=0)] = 30.0
    """Stalled (the wedge `/health` hides): the engine answers, requests are running or waiting, and neither its
    generation counter nor its prompt (prefill) counter has grown for this long. It clears once either moves
    again or nothing is running or waiting."""
    canary_interval_s: Annotated[float, Field(gt=0)] | None = None
    """canary (critical, `poolconsole watch` only; off by default): a vLLM, SGLang or llama.cpp engine that has
    been idle this long (no request running or waiting, its counters still) gets one completion of one token
    (a one-word prompt: about 2 prompt tokens and 1 generated token per probe, so at most 86400 / this
    probes per engine a day); it fires when the answer does not come within `canary_timeout_s` or is an
    error, and clears once a probe answers or the engine generates again. A busy engine is never probed."""
    canary_timeout_s: Annotated[float, Field(gt=0, le=600)] = 30.0
    """How long a canary completion may take before the canary fires."""
    canary_for_s: Annotated[float, Field(ge=0)] = 0.0
    """The canary fires once its probes have failed this long (0: the first failed probe)."""
    slo_burn_for_s: Annotated[float, Field(ge=0)] = 0.0
    """slo_burn fires once its two windows have burned over the factor this long (the short window already
    makes it clear soon after the burn stops)."""
    gpu_xid_for_s: Annotated[float, Field(ge=0)] = 0.0
    """gpu_xid (critical): the kernel logged an `NVRM: Xid` for a GPU in the last 5 minutes; fires once that
    held this long ..."""
    gpu_xid_clear_s: Annotated[float, Field(ge=0)] = 0.0
    """... and clears once no Xid has been in the 5-minute window this long (the window is its hysteresis)."""
    gpu_ecc_for_s: Annotated[float, Field(ge=0)] = 0.0
    """gpu_ecc (critical): uncorrected ECC errors since the driver loaded, or a row remap / page retirement
    pending; fires once that held this long ..."""
    gpu_ecc_clear_s: Annotated[float, Field(ge=0)] = 0.0
    """... and clears once it has not held this long (a GPU reset or reboot clears the counters)."""
    gpu_throttle_for_s: Annotated[float, Field(ge=0)] = 30.0
    """gpu_throttle (warning): clocks held down by a hardware slowdown, thermal slowdown or the power brake
    (never the power cap or idle) this long ..."""
    gpu_throttle_clear_s: Annotated[float, Field(ge=0)] = 30.0
    """... and clears once no such reason has been active this long."""
    gpu_pcie_for_s: Annotated[float, Field(ge=0)] = 60.0
    """gpu_pcie (warning): the PCIe link narrower than its maximum, or below its maximum generation while the
    GPU is 30% busy or more, this long ..."""
    gpu_pcie_clear_s: Annotated[float, Field(ge=0)] = 60.0
    """... and clears once the link has been at its maximum this long."""


class Notify(Strict):
    """Where the watcher (`poolconsole watch`) sends the alerts it evaluates (`[[notify]]`, a list)."""

    kind: Literal["webhook", "alertmanager", "ntfy"]
    """webhook: a JSON POST in Alertmanager's webhook format (version "4"); alertmanager: its
    `/api/v2/alerts` API (grouping, silences and routing are then Alertmanager's); ntfy: a topic URL, the
    summary as the body with Title, Priority and Tags headers."""
    url: str
    """The receiver: the webhook's URL, Alertmanager's base URL (without /api/v2), or the ntfy topic URL."""
    min_severity: Literal["info", "warning", "critical"] = "warning"
    """Alerts below this severity are not sent here (critical: down, stalled, restart loop)."""
    token_env: str | None = None
    """Environment variable holding a bearer token, sent only in the Authorization header and read at each
    send (never written to the file, a log or the audit)."""
    repeat_s: Annotated[float, Field(gt=0)] = 14400.0
    """While an alert stays firing it is sent again this often (Alertmanager's default repeat_interval, 4
    h); an alertmanager receiver is re-sent every min(60 s, repeat_s), as Prometheus does, and repeats as
    its own route says."""
    timeout_s: Annotated[float, Field(gt=0, le=120)] = 10.0
    """Timeout of one send; a failed send is retried with backoff until it goes through."""

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("must be an http:// or https:// URL")
        return value

    @field_validator("token_env")
    @classmethod
    def _env(cls, value: str | None) -> str | None:
        return _check_env(value)


class Slo(Strict):
    """A TTFT objective (`[[slo]]`, a list) for one engine or one model (the engines that list it): the share of
    requests whose time to first token is at most `ttft_s` should be at least `objective`. The watcher's
    `slo_burn` alerts on the burn rate of its error budget (Google's multi-window alerts): 1 h and 5 min both
    above 14.4x page (critical), 6 h and 30 min both above 6x warn."""

    engine: str | None = None
    """The engine it holds for (or `model`)."""
    model: str | None = None
    """The model it holds for, over every engine that lists it (or `engine`)."""
    ttft_s: Annotated[float, Field(gt=0)]
    """The time-to-first-token threshold in seconds: a bound of the engine's TTFT histogram (vLLM and SGLang:
    0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, ...). Between two bounds the watcher counts against the
    lower one (a request not proven fast is slow); `prometheus-rules` needs a bound."""
    objective: Annotated[float, Field(gt=0, lt=1)]
    """The share of requests that must be within `ttft_s`, e.g. 0.99 (its error budget: 1 - objective)."""

    @model_validator(mode="after")
    def _one(self) -> Slo:
        if (self.engine is None) == (self.model is None):
            raise ValueError("give engine or model, one of them")
        return self

    @property
    def target(self) -> str:
        """Who its alert is about: the engine's name, or `model:NAME`."""
        return self.engine if self.engine is not None else f"model:{self.model}"
