"""What every hosts.toml table shares: the strict base model and the checks of names and environment
variable names."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict

SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class Strict(BaseModel):
    """The models' common settings. Field docstrings: config/schema.py reads them. `defer_build`: a model's
    validator is built when it first validates, not at import. The seven whose instances are defaults
    (Settings, AlertSettings, StoreSettings, LedgerSettings, SmokeSettings, Remediation, EngineRemediation)
    are still built at import; the others (Engine, Host, Profile, ...) are built once, inside PoolConfig's,
    when a hosts.toml is loaded:
    import and load of the peers harness's 32-engine config 141 against 164 ms of CPU (means of eight on the
    2-core build machine)."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


def _check_name(value: str) -> str:
    if not SAFE_NAME.match(value):
        raise ValueError(
            "must start with a letter or digit and contain only letters, digits, '.', '_' or '-' "
            "(at most 63 characters)"
        )
    return value


def _check_env(value: str | None) -> str | None:
    if value is not None and not ENV_NAME.match(value):
        raise ValueError("must be the NAME of an environment variable (letters, digits, '_'), not a secret")
    return value
