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

[[engines]]
name = "coder"
kind = "llamacpp"
url = "http://127.0.0.1:8080"
"""


def test_conditions_name_the_active_profile_and_its_quantization() -> None:
    config = parse_config(CONFIG)
    got = conditions(config, {"qwen": "0.11.2"})
    assert got["qwen"] == {"kind": "vllm", "profile": "awq", "quantization": "awq 4-bit", "version": "0.11.2"}
    assert got["coder"] == {"kind": "llamacpp", "profile": None, "quantization": None, "version": None}
