"""`poolconsole prometheus-rules` (issue 37): the rule file for vLLM, llama.cpp and SGLang engines passes
`promtool check rules` (Debian's prometheus package): down and stalled, one rule each with every kind in it,
with the thresholds of [alerts]."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CONFIG = """
[alerts]
down_for_s = 20
stall_s = 45

[[engines]]
name = "a"
kind = "vllm"
url = "http://127.0.0.1:8000"
host = "box"

[[engines]]
name = "b"
kind = "llamacpp"
url = "http://127.0.0.1:8001"

[[engines]]
name = "c"
kind = "sglang"
url = "http://127.0.0.1:8002"
"""


def promtool() -> str:
    found = shutil.which("promtool") or "/usr/bin/promtool"
    if not Path(found).exists():
        pytest.fail("no promtool: install Debian's prometheus package (scripts/test.sh does it as root)")
    return found


def test_the_rule_file_passes_promtool(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts.toml"
    hosts.write_text(CONFIG)
    argv = [sys.executable, "-m", "poolconsole", "prometheus-rules", "--config", str(hosts)]
    out = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    rules = tmp_path / "rules.yml"
    rules.write_text(out.stdout)
    checked = subprocess.run([promtool(), "check", "rules", str(rules)], capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS: 2 rules found" in checked.stdout, checked.stdout
    assert "for: 20s" in out.stdout and 'increase(vllm:generation_tokens_total{engine!=\\"\\"}[45s])' in out.stdout
    assert out.stdout.count("alert: stalled") == 1 and out.stdout.count("alert: down") == 1
    assert all(name in out.stdout for name in ("llamacpp:tokens_predicted_total", "sglang:num_queue_reqs"))
    assert "increase(vllm:prompt_tokens_total" in out.stdout  # a long prefill is progress, not a wedge
