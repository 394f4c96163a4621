"""What a stored smoke run records as its conditions: kind, version, active profile, its quantization."""

from __future__ import annotations

from poolconsole.config import parse_config
from poolconsole.ops.smoke.runner import conditions

CONFIG = """
[[engines]]
name = "qwen"
kind = "vllm"
url = "http://127.0.0.1:8000"
profile = "awq"

[[engines.profiles]]
name = "awq"
format = "awq"
bits = 4
weights_gib = 40
env = { HF_HUB_OFFLINE = "value-never-shown", HF_TOKEN = { env = "HF_TOKEN" } }

[[engines.profiles]]
name = "fp8-long"
format = "fp8"
weights_gib = 80
max_model_len = 65536
args = ["--max-model-len", "65536"]

[[engines]]
name = "coder"
kind = "llamacpp"
url = "http://127.0.0.1:8080"
"""


def test_conditions_name_the_active_profile_and_its_quantization() -> None:
    config = parse_config(CONFIG)
    got = conditions(config, {"qwen": "0.11.2"})
    assert got["qwen"] | {"args": None} == {
        "kind": "vllm",
        "profile": "awq",
        "quantization": "awq 4-bit",
        "version": "0.11.2",
        "profile_source": "hosts.toml",
        "host": None,
        "kv_dtype": "fp16",
        "max_model_len": 8192,
        "max_num_seqs": 16,
        "tp_size": 1,
        "args": None,
        "env_names": ["HF_HUB_OFFLINE", "HF_TOKEN"],
        "gpu_model": None,
        "gpu_driver": None,
    }
    assert "value-never-shown" not in str(got)  # the environment's names, never its values
    coder = got["coder"]
    assert (coder["kind"], coder["profile"], coder["quantization"], coder["version"]) == ("llamacpp", None, None, None)


def test_the_profile_promoted_by_a_rollover_wins_over_the_one_hosts_toml_names() -> None:
    config = parse_config(CONFIG)
    got = conditions(config, {}, {"qwen": "fp8-long", "coder": None})
    assert got["qwen"]["profile"] == "fp8-long" and got["qwen"]["profile_source"] == "audit log"
    assert got["qwen"]["quantization"] == "fp8" and got["qwen"]["max_model_len"] == 65536
    assert got["qwen"]["args"] == ["--max-model-len", "65536"]
