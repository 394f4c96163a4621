"""Control command lines (exact), hostile names refused at load, quoting, the fit check and the plan."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from poolconsole.config import ConfigError, parse_config
from poolconsole.config.models import Control, Engine, EngineKind, EnvRef, Host, Profile
from poolconsole.ops import control
from poolconsole.ops.fit import KvCapacity, LiveMemory, Verdict, fit
from poolconsole.ops.planning import config_memory, plan_lines

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


def test_profile_file_content_is_quoted_and_written_atomically_over_stdin(tmp_path: Path) -> None:
    engine = Engine(name="e", kind=EngineKind.LLAMACPP, url="http://127.0.0.1:1")
    profile = Profile(
        name="p",
        format="GGUF",
        args=["-m", "/models/a b.gguf", "--alias", "$(id)"],
        env={"HF_TOKEN": EnvRef(env="TEST_HF"), "PLAIN": "x"},
    )
    with pytest.raises(control.MissingEnv, match="TEST_HF"):
        control.profile_file(engine, profile, environ={})
    made = control.profile_file(engine, profile, environ={"TEST_HF": "secret-value"})
    assert "HF_TOKEN" in made.names and made.values == ("secret-value", "x")
    result = subprocess.run(
        ["sh", "-c", '. /dev/stdin; printf "%s\\n" "$POOL_ARGS"'], input=made.text, capture_output=True, text=True
    )
    assert shlex.split(result.stdout.strip()) == ["-m", "/models/a b.gguf", "--alias", "$(id)"]
    assert "secret-value" not in control.redact(made.text) and "HF_TOKEN=<redacted>" in control.redact(made.text)
    command = control.write_file_command(str(tmp_path / "p.env"), len(made.text.encode()))
    assert "secret" not in command and "$(id)" not in command  # the content travels over stdin only
    subprocess.run(["sh", "-c", command], input=made.text, text=True, check=True)
    assert (tmp_path / "p.env").read_text() == made.text and (tmp_path / "p.env").stat().st_mode & 0o077 == 0


def test_a_profile_file_cut_short_on_stdin_is_refused(tmp_path: Path) -> None:
    command = control.write_file_command(str(tmp_path / "p.env"), 100)
    result = subprocess.run(["sh", "-c", command], input="A=1\n", text=True, capture_output=True)
    assert result.returncode == 3 and "arrived incomplete" in result.stderr
    assert not (tmp_path / "p.env").exists() and not list(tmp_path.iterdir())  # nothing half-written left


def test_every_remote_path_is_quoted(tmp_path: Path) -> None:
    """The config refuses such a path; the command lines must still never hand one to a shell unquoted."""
    hostile = str(tmp_path / "x y;touch PWNED")
    subprocess.run(
        ["sh", "-c", control.write_file_command(hostile, 2)], input="ok", text=True, cwd=tmp_path, check=True
    )
    assert Path(hostile).read_text() == "ok"
    result = subprocess.run(["sh", "-c", control.read_file_argv(hostile)], capture_output=True, text=True, cwd=tmp_path)
    assert result.stdout == "ok"
    assert not (tmp_path / "PWNED").exists()


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
    busy = fit(engine.model_copy(update={"gpus": [0]}), gb10, spark, LiveMemory(unified_available_gib=70))
    assert busy.unified and not busy.fits and any("start-up check" in n for n in busy.notes)


def test_plan_on_the_example_pool() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "poolconsole", "plan", "--offline", "--config", str(ROOT / "hosts.toml")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert "qwen3-next-80b / awq-4bit-tp4: fits  [active]" in proc.stdout
    assert "headroom" in proc.stdout and "unified memory from the config" in proc.stdout
    assert "qwen3-next-80b / fp8-tp4" in proc.stdout and "not polled (--offline)" in proc.stdout


def test_unknown_memory_is_cannot_check_never_does_not_fit() -> None:
    engine = Engine(name="e", kind=EngineKind.VLLM, url="http://127.0.0.1:1", gpus=[0])
    profile = Profile(name="p", format="AWQ", weights_gib=10)
    report = fit(engine, profile, Host(name="h", address="h"), None)
    assert report.verdict is Verdict.CANNOT_CHECK and not report.fits
    assert report.lines()[0] == "e / p: cannot check: GPU memory unknown"


def test_other_processes_on_the_gpu_shrink_the_budget() -> None:
    """Ollama beside llama.cpp on one 24 GB card: the memory Ollama holds is not the switched engine's."""
    engine = Engine(name="llama", kind=EngineKind.LLAMACPP, url="http://127.0.0.1:1", gpus=[0])
    profile = Profile(name="q4", format="GGUF", weights_gib=18.5, gpu_memory_utilization=0.98, overhead_gib=1.0)
    alone = fit(engine, profile, Host(name="h", address="h"), LiveMemory({0: 24.0}, {}, None, True))
    shared = fit(engine, profile, Host(name="h", address="h"), LiveMemory({0: 24.0}, {0: 6.0}, None, True))
    assert alone.fits and alone.budget_gib == pytest.approx(24 * 0.98)
    assert not shared.fits and shared.budget_gib == pytest.approx(18.0)
    assert any("6.0 GiB held by other processes" in n for n in shared.notes)


def test_the_context_cliff_is_stated() -> None:
    engine = Engine(name="e", kind=EngineKind.VLLM, url="http://127.0.0.1:1", gpus=[0])
    profile = Profile(
        name="p", format="FP8", weights_gib=20, max_model_len=131072, max_num_seqs=8,
        layers=36, kv_heads=8, head_dim=64, kv_dtype="fp8", gpu_memory_utilization=0.9, overhead_gib=1.5,
    )  # fmt: skip
    report = fit(engine, profile, Host(name="h", address="h"), LiveMemory({0: 48.0}, {}, None, True))
    per_token = 36 * 8 * 64 * 2 * 1.0
    tokens = int(((48 * 0.9 - 1.5) - 20) * 2**30 / per_token)
    assert report.kv_tokens == tokens
    assert report.max_context_at_max_seqs == tokens // 8 < 131072
    assert report.concurrency_at_max_context == pytest.approx(tokens / 131072)
    assert any(n.startswith("context cliff: at 8 sequences only") for n in report.notes)


def test_offline_plan_sums_the_engines_sharing_a_gpu() -> None:
    config = parse_config(
        "[[hosts]]\nname = 'rig'\naddress = 'rig'\ngpu_memory_gib = [24]\n"
        "[[engines]]\nname = 'coder'\nkind = 'llamacpp'\nurl = 'http://127.0.0.1:1'\nhost = 'rig'\n"
        "gpus = [0]\nprofile = 'q4'\n[[engines.profiles]]\nname = 'q4'\nformat = 'GGUF'\nweights_gib = 12\n"
        "[[engines]]\nname = 'chat'\nkind = 'llamacpp'\nurl = 'http://127.0.0.1:2'\nhost = 'rig'\n"
        "gpus = [0]\nprofile = 'q8'\n[[engines.profiles]]\nname = 'q8'\nformat = 'GGUF'\nweights_gib = 9\n"
    )
    coder, _ = config.engines
    memory = config_memory(config, config.hosts[0], coder)
    assert memory is not None and memory.others_gib == {0: pytest.approx(9 + 1.5)}
    assert fit(coder, coder.profiles[0], config.hosts[0], memory).fits  # 12 + 1.5 of min(21.6, 24 - 10.5)
    bigger = coder.profiles[0].model_copy(update={"weights_gib": 13})
    assert not fit(coder, bigger, config.hosts[0], memory).fits  # alone on the card it would
    lines = plan_lines(config, {}, {}, {}, offline=True)
    # no layers / kv_heads / head_dim: the weights fit, the KV cache was not checked, and it says so
    assert (
        "coder / q4: fits the weights (KV cache not estimated: no layers, kv_heads, head_dim in the profile)  [active]"
        in "\n".join(lines)
    )


def test_fits_with_kv_unknown_says_only_the_weights_were_checked() -> None:
    """A longer-context profile with no KV geometry: the verdict stays "fits" (a demo rollover goes through),
    but its words never claim the KV cache fits."""
    engine = Engine(name="e", kind=EngineKind.VLLM, url="http://127.0.0.1:1", gpus=[0])
    long = Profile(name="awq-long", format="AWQ", weights_gib=44, max_model_len=131072, max_num_seqs=16)
    report = fit(engine, long, Host(name="h", address="h"), LiveMemory({0: 60.0}, {}, None, True))
    assert report.verdict is Verdict.FITS and report.kv_gib is None
    head = report.lines()[0]
    assert (
        head == "e / awq-long: fits the weights (KV cache not estimated: no layers, kv_heads, head_dim in the profile)"
    )
    known = long.model_copy(update={"layers": 2, "kv_heads": 1, "head_dim": 8})
    assert fit(engine, known, Host(name="h", address="h"), LiveMemory({0: 60.0}, {}, None, True)).lines()[0] == (
        "e / awq-long: fits"
    )


def test_the_engines_own_kv_figure_is_said_as_its_own() -> None:
    """An active profile with no KV geometry on an engine that reports its KV capacity (SGLang's
    max_total_num_tokens): the KV size is "not estimated" and the tokens are the engine's own, in words that
    do not read as a contradiction ("KV n/a" beside "KV holds 120,000 tokens" did)."""
    engine = Engine(name="e", kind=EngineKind.SGLANG, url="http://127.0.0.1:1", gpus=[0])
    profile = Profile(name="nvfp4", format="NVFP4", weights_gib=16, max_model_len=32768, max_num_seqs=4)
    live = LiveMemory({0: 32.0}, {}, None, True)
    own = KvCapacity(120_000, "sglang max_total_num_tokens 120000")
    report = fit(engine, profile, Host(name="h", address="h"), live, own, active=True)
    assert report.kv_from_engine and report.kv_tokens == 120_000
    rows = report.rows()
    assert rows[1] == ("weights 16.0 GiB", "+ KV not estimated", "+ overhead 1.5 GiB per GPU")
    assert rows[3][0] == "the engine's own KV cache holds 120,000 tokens,"
    assert "KV n/a" not in "\n".join(report.lines())
    assert report.lines()[1] == "  weights 16.0 GiB + KV not estimated + overhead 1.5 GiB per GPU"
    # the same profile when not active: the engine's figure describes what runs now, so it is not used
    other = fit(engine, profile, Host(name="h", address="h"), live, own, active=False)
    assert not other.kv_from_engine and other.kv_tokens is None


def test_the_confirmation_says_what_the_engine_serves_now_and_what_the_action_does_with_it() -> None:
    from poolconsole.ops.lifecycle import in_flight_words

    engine = Engine(
        name="e",
        kind=EngineKind.VLLM,
        url="http://127.0.0.1:1",
        control=Control(backend="docker", name="e", drain_timeout_s=45),
    )
    assert in_flight_words(engine, 8, 2, drains=False) == (
        "now: 8 running, 2 waiting; the restart drops them (their clients get errors)"
    )
    assert in_flight_words(engine, 8, 2, drains=True) == (
        "now: 8 running, 2 waiting; it first waits up to 45 s (drain_timeout_s) for them to finish, then switches"
    )
    assert in_flight_words(engine, 0, 0, drains=False) == "now: idle (no request running or waiting)"
    unknown = in_flight_words(engine, None, 3, drains=False)
    assert unknown.startswith("requests in flight: unknown") and "0 running" not in unknown  # never 0 for unknown
    no_drain = engine.model_copy(update={"control": Control(backend="docker", name="e", drain_timeout_s=0)})
    assert in_flight_words(no_drain, 1, 0, drains=True).endswith("the restart drops them (their clients get errors)")
