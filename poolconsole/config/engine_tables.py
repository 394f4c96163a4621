"""An engine's tables in hosts.toml: `control` (how it is restarted), `logs` (where its log is read), and its
`[[engines.profiles]]` (the quantization profiles a rollover switches between, their env references).
Split from config/models.py by size; config.models imports them back as the one schema module."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from poolconsole.config.strict import Strict, _check_env, _check_name

SAFE_PATH = re.compile(r"^[A-Za-z0-9_./~@%+=:,-]+$")


def _check_path(value: str | None) -> str | None:
    if value is not None and (not SAFE_PATH.match(value) or ".." in value.split("/")):
        raise ValueError("must be a plain path (letters, digits and ._/~@%+=:,- only, no '..')")
    return value


class Control(Strict):
    """How the engine is restarted and how a profile is applied, over SSH on its host (`[engines.control]`).
    Every name and path is checked against a safe pattern here, and every remote argument is shell-quoted."""

    backend: Literal["docker", "podman", "compose", "systemd", "supervisor", "command"]
    """docker / podman (`restart NAME`), compose (project directory + service), systemd (unit),
    supervisor (supervisorctl program), or command (a custom template)."""
    name: str
    """Container, compose service, systemd unit or supervisord program."""
    binary: str | None = None
    """Path of docker / podman / systemctl / supervisorctl when not on PATH."""
    compose_dir: str | None = None
    """docker compose project directory (backend compose)."""
    user_unit: bool = False
    """systemd: a --user unit."""
    supervisor_conf: str | None = None
    """supervisorctl -c FILE."""
    command: list[str] | None = None
    """backend command: argv template; "{name}" in an argument is replaced by `name`, then every argument is quoted."""
    profile_file: str | None = None
    """Host file holding the active profile (an env file the engine's launcher sources), written atomically."""
    health_timeout_s: Annotated[float, Field(gt=0, le=3600)] = 300.0
    """How long a restarted engine may take to answer healthy."""
    drain_timeout_s: Annotated[float, Field(ge=0, le=3600)] = 60.0
    """Rollover: wait at most this long for running and waiting to reach 0 (0 = do not drain)."""

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return _check_name(value)

    @field_validator("binary", "compose_dir", "supervisor_conf", "profile_file")
    @classmethod
    def _path(cls, value: str | None) -> str | None:
        return _check_path(value)

    @model_validator(mode="after")
    def _complete(self) -> Control:
        if self.backend == "compose" and not self.compose_dir:
            raise ValueError("backend compose needs compose_dir")
        if self.backend == "command" and not self.command:
            raise ValueError("backend command needs command = [argv...]")
        return self


class LogSource(Strict):
    """Where the engine's log is read over SSH (`[engines.logs]`), when not through `[engines.control]`
    (docker / podman / compose logs, journalctl for a systemd unit, supervisorctl tail). Names and paths are
    checked against a safe pattern, and every remote argument is shell-quoted."""

    source: Literal["docker", "podman", "journald", "supervisor", "file"]
    """docker / podman (`logs --since`), journald (`journalctl -u`), supervisor (`supervisorctl tail`), or a
    file on the host (`tail`)."""
    name: str | None = None
    """Container, systemd unit or supervisord program (not for `file`)."""
    path: str | None = None
    """The log file on the host (source `file`)."""
    binary: str | None = None
    """Path of docker / podman / journalctl / supervisorctl when not on PATH."""
    user_unit: bool = False
    """journald: a --user unit."""
    supervisor_conf: str | None = None
    """supervisorctl -c FILE."""

    @field_validator("name")
    @classmethod
    def _name(cls, value: str | None) -> str | None:
        return None if value is None else _check_name(value)

    @field_validator("path", "binary", "supervisor_conf")
    @classmethod
    def _path(cls, value: str | None) -> str | None:
        return _check_path(value)

    @model_validator(mode="after")
    def _complete(self) -> LogSource:
        if self.source == "file" and not self.path:
            raise ValueError("source file needs path")
        if self.source != "file" and not self.name:
            raise ValueError(f"source {self.source} needs name")
        return self


class EnvRef(Strict):
    """A value taken from the operator's environment when the profile is applied (`{ env = "HF_TOKEN" }`),
    so that it is never written into hosts.toml."""

    env: str
    """Name of the environment variable."""

    @field_validator("env")
    @classmethod
    def _name(cls, value: str) -> str:
        checked = _check_env(value)
        assert checked is not None
        return checked


class Profile(Strict):
    """One quantization profile of an engine (`[[engines.profiles]]`)."""

    name: str
    format: str
    """AWQ, GPTQ, FP8, NVFP4, GGUF Q4_K_M, ..."""
    params_b: Annotated[float, Field(gt=0)] | None = None
    """Total parameters, billions."""
    active_params_b: Annotated[float, Field(gt=0)] | None = None
    """Active parameters per token for a MoE, billions (speed, not memory: every expert is loaded)."""
    bits: Annotated[float, Field(gt=0, le=32)] | None = None
    """Bits per weight."""
    weights_gib: Annotated[float, Field(gt=0)] | None = None
    """Declared size of the weights (wins over params_b x bits / 8)."""
    kv_dtype: Literal["fp32", "fp16", "bf16", "fp8", "q8_0", "q4_0"] = "fp16"
    max_model_len: Annotated[int, Field(ge=1)] = 8192
    max_num_seqs: Annotated[int, Field(ge=1)] = 16
    tp_size: Annotated[int, Field(ge=1, le=64)] = 1
    gpu_memory_utilization: Annotated[float, Field(gt=0, le=1)] = 0.90
    layers: Annotated[int, Field(ge=1)] | None = None
    """Model numbers for the KV cache: layers, KV heads, head dimension."""
    kv_heads: Annotated[int, Field(ge=1)] | None = None
    head_dim: Annotated[int, Field(ge=1)] | None = None
    overhead_gib: Annotated[float, Field(ge=0)] = 1.5
    """Runtime overhead per GPU (CUDA context, activations, graphs)."""
    args: list[str] = []
    """Extra engine arguments."""
    env: dict[str, str | EnvRef] = {}
    """Extra environment of the engine: a value, or `{ env = "NAME" }` to take it from the operator's
    environment when the profile is applied. Values travel to the host over the SSH channel's stdin, never
    in a command line, and the audit log and progress output name the variables, never their values."""

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return _check_name(value)

    @field_validator("env")
    @classmethod
    def _env_keys(cls, value: dict[str, str | EnvRef]) -> dict[str, str | EnvRef]:
        for key in value:
            _check_env(key)
        return value
