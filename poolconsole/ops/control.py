"""Remote command lines for restarting an engine and applying a profile: pure functions from config to
argv lists, rendered with every argument shell-quoted. Nothing from config reaches a shell unquoted."""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass

from poolconsole.config.models import Control, Engine, EnvRef, Profile
from poolconsole.model.redaction import redact as redact  # re-exported: audit and lifecycle use it from here


def restart_argv(control: Control) -> list[str]:
    binary = control.binary
    match control.backend:
        case "docker" | "podman":
            return [binary or control.backend, "restart", control.name]
        case "compose":
            assert control.compose_dir is not None
            return [binary or "docker", "compose", "--project-directory", control.compose_dir, "restart", control.name]
        case "systemd":
            return [binary or "systemctl", *(["--user"] if control.user_unit else []), "restart", control.name]
        case "supervisor":
            conf = ["-c", control.supervisor_conf] if control.supervisor_conf else []
            return [binary or "supervisorctl", *conf, "restart", control.name]
        case "command":
            assert control.command is not None
            return [arg.replace("{name}", control.name) for arg in control.command]
    raise ValueError(f"unknown backend {control.backend}")


def render(argv: list[str]) -> str:
    """One shell command line, every argument quoted (shlex.join)."""
    return shlex.join(argv)


class MissingEnv(Exception):
    """A profile value references an environment variable the operator has not set."""


@dataclass(frozen=True)
class ProfileFile:
    """A profile file's text (it may hold secrets: it is written over stdin and never logged), the names
    of its variables (what progress and the audit log show) and its values, to scrub from any text that
    is logged."""

    text: str
    names: tuple[str, ...]
    values: tuple[str, ...]


def profile_file(engine: Engine, profile: Profile, environ: Mapping[str, str] | None = None) -> ProfileFile:
    """The profile file's text: shell-quoted assignments an engine launcher sources. A `{ env = "NAME" }`
    value is read from the operator's environment now; MissingEnv when it is not set."""
    env = os.environ if environ is None else environ
    extra: dict[str, str] = {}
    for key, value in profile.env.items():
        if isinstance(value, EnvRef):
            if value.env not in env:
                raise MissingEnv(
                    f"profile {profile.name} of {engine.name}: {key} takes its value from ${value.env}, "
                    f"which is not set in this environment"
                )
            extra[key] = env[value.env]
        else:
            extra[key] = value
    values = {
        "POOL_PROFILE": profile.name,
        "POOL_FORMAT": profile.format,
        "POOL_MAX_MODEL_LEN": str(profile.max_model_len),
        "POOL_MAX_NUM_SEQS": str(profile.max_num_seqs),
        "POOL_TP_SIZE": str(profile.tp_size),
        "POOL_GPU_MEMORY_UTILIZATION": str(profile.gpu_memory_utilization),
        "POOL_KV_DTYPE": profile.kv_dtype,
        "POOL_ARGS": shlex.join(profile.args),
        **extra,
    }
    lines = [f"# written by poolconsole: profile {profile.name} of engine {engine.name}"]
    lines += [f"{key}={shlex.quote(value)}" for key, value in values.items()]
    return ProfileFile("\n".join(lines) + "\n", tuple(values), tuple(v for v in extra.values() if v))


def write_file_command(path: str, size: int) -> str:
    """Atomic write of `size` bytes read from stdin to `path`: a temporary file beside it (mode 0600), its
    length checked, then a rename. The content never appears in the command line (so not in `ps`, the
    audit log or the progress output). A login shell's rc file that reads stdin would eat part of it: the
    length check then refuses the file instead of installing a truncated one."""
    tmp = path + ".poolconsole-tmp"
    q = shlex.quote
    complaint = q(f"poolconsole: {path} arrived incomplete over stdin (does a shell rc file read stdin?)")
    return (
        f"umask 077 && head -c {size} > {q(tmp)} && [ $(($(wc -c < {q(tmp)}))) -eq {size} ] && "
        f"mv -f {q(tmp)} {q(path)} || {{ rm -f {q(tmp)}; echo {complaint} >&2; exit 3; }}"
    )


def read_file_argv(path: str) -> str:
    return f"cat {shlex.quote(path)}"
