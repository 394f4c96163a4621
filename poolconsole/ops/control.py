"""Remote command lines for restarting an engine and applying a profile: pure functions from config to
argv lists, rendered with every argument shell-quoted. Nothing from config reaches a shell unquoted."""

from __future__ import annotations

import base64
import re
import shlex

from poolconsole.config.models import Control, Engine, Profile

SECRETISH = re.compile(r"(key|token|secret|password)", re.I)


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


def profile_env(engine: Engine, profile: Profile) -> str:
    """The profile file's text: shell-quoted assignments an engine launcher sources."""
    values = {
        "POOL_PROFILE": profile.name,
        "POOL_FORMAT": profile.format,
        "POOL_MAX_MODEL_LEN": str(profile.max_model_len),
        "POOL_MAX_NUM_SEQS": str(profile.max_num_seqs),
        "POOL_TP_SIZE": str(profile.tp_size),
        "POOL_GPU_MEMORY_UTILIZATION": str(profile.gpu_memory_utilization),
        "POOL_KV_DTYPE": profile.kv_dtype,
        "POOL_ARGS": shlex.join(profile.args),
        **profile.env,
    }
    lines = [f"# written by poolconsole: profile {profile.name} of engine {engine.name}"]
    lines += [f"{key}={shlex.quote(value)}" for key, value in values.items()]
    return "\n".join(lines) + "\n"


def write_file_argv(path: str, content: str) -> str:
    """Atomic write of `content` to `path`: a temporary file beside it, then a rename. The content travels
    base64-encoded (only [A-Za-z0-9+/=], quoted anyway), so no byte of it is ever read by a shell; stdin is
    not used because a login shell's rc files may read it (seen here: a pyenv init that hangs the session)."""
    tmp = path + ".poolconsole-tmp"
    encoded = base64.b64encode(content.encode()).decode()
    return (
        f"umask 077 && printf %s {shlex.quote(encoded)} | base64 -d > {shlex.quote(tmp)} && "
        f"mv -f {shlex.quote(tmp)} {shlex.quote(path)}"
    )


def read_file_argv(path: str) -> str:
    return f"cat {shlex.quote(path)}"


def redact(text: str) -> str:
    """For the audit log: values of secret-looking variables never land on disk."""
    return re.sub(r"(?m)^([A-Za-z_]*(?:KEY|TOKEN|SECRET|PASSWORD)[A-Za-z_]*)=.*$", r"\1=<redacted>", text, flags=re.I)
