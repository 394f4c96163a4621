"""`poolconsole prometheus-rules` (issue 37): the rule file for vLLM, llama.cpp and SGLang engines passes
`promtool check rules` (Debian's prometheus package): down and stalled, one rule each with every kind in it,
with the thresholds of [alerts]."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.helpers.prometheus import promtool

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


def rules_of(tmp_path: Path, config: str) -> str:
    """`poolconsole prometheus-rules` on this hosts.toml: the rule file, written as tmp_path/rules.yml."""
    hosts = tmp_path / "hosts.toml"
    hosts.write_text(config)
    argv = [sys.executable, "-m", "poolconsole", "prometheus-rules", "--config", str(hosts)]
    out = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    (tmp_path / "rules.yml").write_text(out.stdout)
    return out.stdout


def promtool_checks(tmp_path: Path, rules: int) -> None:
    """promtool check rules on tmp_path/rules.yml: valid, and this many rules."""
    checked = subprocess.run([promtool(), "check", "rules", str(tmp_path / "rules.yml")], capture_output=True,
                             text=True, timeout=60)  # fmt: skip
    assert checked.returncode == 0 and f"SUCCESS: {rules} rules found" in checked.stdout, (
        checked.stdout + checked.stderr
    )


def promtool_tests(tmp_path: Path, test_yaml: str) -> None:
    """promtool test rules: the unit test file given, over tmp_path/rules.yml."""
    (tmp_path / "test.yml").write_text(test_yaml)
    tested = subprocess.run([promtool(), "test", "rules", "test.yml"], cwd=tmp_path, capture_output=True, text=True,
                            timeout=120)  # fmt: skip
    assert tested.returncode == 0, tested.stdout + tested.stderr


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
    assert all(name in out.stdout for name in ("llamacpp:n_decode_total", "sglang:num_queue_reqs"))
    assert "increase(vllm:prompt_tokens_total" in out.stdout  # a long prefill is progress, not a wedge


SLO_CONFIG = """
[[slo]]
engine = "a"
ttft_s = 1
objective = 0.99

[[slo]]
model = "qwen"
ttft_s = 2.5
objective = 0.995

[[slo]]
engine = "b"
ttft_s = 1
objective = 0.99

[[engines]]
name = "a"
kind = "vllm"
url = "http://127.0.0.1:8000"
host = "box"

[[engines]]
name = "b"
kind = "llamacpp"
url = "http://127.0.0.1:8001"
"""

SLO_TEST = """
rule_files: [rules.yml]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      # engine a: 100 requests a minute, 30 of them over 1 s (30x its 1% budget)
      - series: 'vllm:time_to_first_token_seconds_bucket{engine="a",le="1.0",model_name="m"}'
        values: '0+70x480'
      - series: 'vllm:time_to_first_token_seconds_count{engine="a",model_name="m"}'
        values: '0+100x480'
      # model qwen on SGLang: 1000 a minute, 2 over 2.5 s (0.4x its 0.5% budget)
      - series: 'sglang:time_to_first_token_seconds_bucket{engine="c",le="2.5",model_name="qwen"}'
        values: '0+998x480'
      - series: 'sglang:time_to_first_token_seconds_count{engine="c",model_name="qwen"}'
        values: '0+1000x480'
    alert_rule_test:
      - eval_time: 70m
        alertname: slo_burn
        exp_alerts:
          - exp_labels: {severity: critical, engine: a, host: box}
            exp_annotations:
              summary: "a: slo burn: TTFT over 1 s for more than 14.4x the 1% error budget over 1h and 5m"
          - exp_labels: {severity: warning, engine: a, host: box}
            exp_annotations:
              summary: "a: slo burn: TTFT over 1 s for more than 6x the 1% error budget over 6h and 30m"
    promql_expr_test:
      - expr: 'round(poolconsole:slo_ttft_errors:ratio_rate5m{model="qwen"}, 0.0001)'
        eval_time: 70m
        exp_samples:
          - labels: '{model="qwen"}'
            value: 0.002
"""


def test_slo_burn_rules_pass_promtool_and_page_on_synthetic_histograms(tmp_path: Path) -> None:
    """Recording rules per objective and window, the multi-window alerts over them: promtool checks the file
    and runs it over histogram series as vLLM and SGLang expose them, 70 simulated minutes: engine a burning
    30x pages and warns, the SGLang model within its budget does not; a llama.cpp engine has no histogram."""
    out = rules_of(tmp_path, SLO_CONFIG)
    promtool_checks(tmp_path, 14)
    assert "# slo b: its engine kind exposes no TTFT histogram" in out
    promtool_tests(tmp_path, SLO_TEST)


DCGM_TEST = """
rule_files: [rules.yml]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      # the DCGM exporter's series as prometheus-config scrapes them (labelled host); GPU 1 raises Xid 79 at 10 min
      - series: 'DCGM_FI_DEV_XID_ERRORS{host="box",gpu="0",instance="box:9400",job="dcgm",modelName="NVIDIA H200"}'
        values: '0x40'
      - series: 'DCGM_FI_DEV_XID_ERRORS{host="box",gpu="1",instance="box:9400",job="dcgm",modelName="NVIDIA H200"}'
        values: '0x10 79x30'
      - series: 'DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{host="box",gpu="0",instance="box:9400",job="dcgm"}'
        values: '0x20 2x20'
      - series: 'DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{host="box",gpu="1",instance="box:9400",job="dcgm"}'
        values: '0x40'
    alert_rule_test:
      - eval_time: 12m
        alertname: gpu_xid
        exp_alerts:
          - exp_labels: {severity: critical, host: box, gpu: "1"}
            exp_annotations: {summary: "box: GPU 1: Xid 79 in the last 5 min (DCGM exporter)"}
      - eval_time: 20m
        alertname: gpu_xid
        exp_alerts: []
      - eval_time: 19m
        alertname: gpu_ecc
        exp_alerts: []
      - eval_time: 25m
        alertname: gpu_ecc
        exp_alerts:
          - exp_labels: {severity: critical, host: box, gpu: "0"}
            exp_annotations:
              summary: "box: GPU 0: uncorrected ECC errors, or a row remap or page retirement pending (DCGM exporter)"
"""


def test_dcgm_rules_where_hosts_are_configured_fire_on_a_new_xid_and_ecc_errors(tmp_path: Path) -> None:
    """gpu_xid and gpu_ecc over the DCGM exporter: an Xid whose value changed in the last 5 minutes (the
    exporter keeps the last one's value), uncorrected ECC errors; promtool runs them over exporter series."""
    rules_of(tmp_path, CONFIG + '\n[[hosts]]\nname = "box"\naddress = "127.0.0.1"\n')
    promtool_checks(tmp_path, 4)
    promtool_tests(tmp_path, DCGM_TEST)


LLAMA_STALL_TEST = """
rule_files: [rules.yml]
evaluation_interval: 15s
tests:
  - interval: 15s
    input_series:
      # engine b (llama.cpp): one long answer, tokens_predicted_total still until it ends, llama_decode calling on
      - series: 'llamacpp:requests_processing{engine="b"}'
        values: '1x40'
      - series: 'llamacpp:requests_deferred{engine="b"}'
        values: '0x40'
      - series: 'llamacpp:tokens_predicted_total{engine="b"}'
        values: '0x40'
      - series: 'llamacpp:prompt_tokens_total{engine="b"}'
        values: '100x40'
      - series: 'llamacpp:n_decode_total{engine="b"}'
        values: '0+150x20 3000x20'
    alert_rule_test:
      - eval_time: 4m
        alertname: stalled
        exp_alerts: []
      - eval_time: 9m
        alertname: stalled
        exp_alerts:
          - exp_labels: {severity: critical, engine: b}
            exp_annotations:
              summary: "b: stalled: requests running or waiting, no token generated or prompt token processed for 45s"
"""


def test_a_long_llamacpp_answer_is_progress_and_a_still_decoder_is_a_wedge(tmp_path: Path) -> None:
    """llama.cpp counts a request's tokens when it ends: over 5 minutes of one answer its tokens_predicted_total
    stays still while llama_decode runs every step. No stall then; once n_decode_total stops too, stalled."""
    rules_of(tmp_path, CONFIG)
    promtool_tests(tmp_path, LLAMA_STALL_TEST)
