"""Control command lines (exact), hostile names refused at load, quoting, the fit check and the plan."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from poolconsole.config import ConfigError, parse_config
from poolconsole.config.models import Control, Engine, EngineKind, Host, Profile
from poolconsole.ops import control
from poolconsole.ops.fit import fit

ROOT = Path(__file__).resolve().parents[2]


def ctl(**kw: object) -> Control:
    return Control.model_validate(kw)


@pytest.mark.parametrize(("kw", "expected"), [
    ({"backend": "docker", "name": "vllm-qwen"}, "docker restart vllm-qwen"),
    ({"backend": "podman", "name": "vllm-qwen"}, "podman restart vllm-qwen"),
    ({"backend": "docker", "name": "x", "binary": "/usr/local/bin/podman"}, "/usr/local/bin/podman restart x"),
    ({"backend": "compose", "name": "vllm", "compose_dir": "/srv/spark"},
     "docker compose --project-directory /srv/spark restart vllm"),
    ({"backend": "systemd", "name": "llama.service"}, "systemctl restart llama.service"),
    ({"backend": "systemd", "name": "llama.service", "user_unit": True}, "systemctl --user restart llama.service"),
    ({"backend": "supervisor", "name": "llama", "supervisor_conf": "/etc/sv.conf"},
     "supervisorctl -c /etc/sv.conf restart llama"),
    ({"backend": "command", "name": "llama", "command": ["/opt/bin/bounce", "--engine={name}", "now please"]},
     "/opt/bin/bounce --engine=llama 'now please'"),
])  # fmt: skip
def test_exact_command_lines(kw: dict[str, object], expected: str) -> None:
    assert control.render(control.restart_argv(ctl(**kw))) == expected


@pytest.mark.parametrize(
    "hostile", ["llama; rm -rf /", "$(reboot)", "a`id`", "name with space", "-rf", "x|y", "../../etc", "a&b", "a\nb"]
)
def test_hostile_names_are_refused_when_the_config_loads(hostile: str) -> None:
    text = (
        '[[engines]]\nname = "e"\nkind = "vllm"\nurl = "http://127.0.0.1:1"\n[engines.control]\n'
        f'backend = "docker"\nname = {hostile!r}\n'
    ).replace("'", '"')
    with pytest.raises(ConfigError) as err:
        parse_config(text)
    assert "control.name" in str(err.value)


@pytest.mark.parametrize("path", ["/srv/x;rm -rf /", "/tmp/$(id)", "/srv/../etc/passwd", "a b"])
def test_hostile_paths_are_refused(path: str) -> None:
    with pytest.raises(ValueError):
        ctl(backend="docker", name="ok", profile_file=path)


def test_custom_template_quotes_whatever_the_name_becomes() -> None:
    argv = control.restart_argv(ctl(backend="command", name="ok", command=["sh", "-c", "echo {name}; reboot"]))
    assert shlex.split(control.render(argv)) == ["sh", "-c", "echo ok; reboot"]  # one argument, as written


def test_profile_file_content_is_quoted_and_written_atomically(tmp_path: Path) -> None:
    engine = Engine(name="e", kind=EngineKind.LLAMACPP, url="http://127.0.0.1:1")
    profile = Profile(
        name="p", format="GGUF", args=["-m", "/models/a b.gguf", "--alias", "$(id)"], env={"HF_TOKEN": "secret-value"}
    )
    text = control.profile_env(engine, profile)
    result = subprocess.run(
        ["sh", "-c", '. /dev/stdin; printf "%s\\n" "$POOL_ARGS"'], input=text, capture_output=True, text=True
    )
    assert shlex.split(result.stdout.strip()) == ["-m", "/models/a b.gguf", "--alias", "$(id)"]
    assert "secret-value" not in control.redact(text) and "HF_TOKEN=<redacted>" in control.redact(text)
    command = control.write_file_argv(str(tmp_path / "p.env"), text)
    assert "$(id)" not in command and "secret" not in command  # the content is encoded, never shell text
    subprocess.run(["sh", "-c", command], check=True)
    assert (tmp_path / "p.env").read_text() == text and (tmp_path / "p.env").stat().st_mode & 0o077 == 0


def test_fit_per_shard_and_unified() -> None:
    engine = Engine(name="e", kind=EngineKind.VLLM, url="http://127.0.0.1:1", gpus=[0, 1, 2, 3])
    profile = Profile(
        name="awq",
        format="AWQ",
        params_b=80,
        bits=4,
        tp_size=4,
        gpu_memory_utilization=0.9,
        layers=12,
        kv_heads=2,
        head_dim=256,
        max_model_len=65536,
        max_num_seqs=16,
        kv_dtype="fp16",
    )
    host = Host(name="tp4", address="tp4", gpu_memory_gib=[24, 24, 24, 24])
    report = fit(engine, profile, host)
    weights = 80e9 * 4 / 8 / 2**30
    kv = 12 * 2 * 256 * 2 * 2 * 65536 * 16 / 2**30
    assert report.weights_gib == pytest.approx(weights) and report.kv_gib == pytest.approx(kv)
    assert report.per_shard_gib == pytest.approx((weights + kv) / 4 + 1.5)
    assert report.budget_gib == pytest.approx(24 * 0.9) and report.fits
    too_big = profile.model_copy(update={"tp_size": 2})
    assert not fit(engine, too_big, Host(name="h", address="h", gpu_memory_gib=[24, 24])).fits
    spark = Host(name="spark", address="spark", memory_kind="unified", memory_gib=128)
    gb10 = Profile(name="fp8", format="FP8", weights_gib=63, gpu_memory_utilization=0.85)
    busy = fit(engine.model_copy(update={"gpus": [0]}), gb10, spark, unified_available_gib=70)
    assert busy.unified and not busy.fits and any("start-up check" in n for n in busy.notes)


def test_plan_on_the_example_pool() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "poolconsole", "plan", "--config", str(ROOT / "hosts.toml")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert "qwen3-next-80b / awq-4bit-tp4: fits" in proc.stdout
    assert "headroom" in proc.stdout and "unified memory available now" in proc.stdout
