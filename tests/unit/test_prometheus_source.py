"""Reading engines from Prometheus without a network: the config's [prometheus] table and `read` /
`selector`, the queries built from the engine specs, the query API's answers (real Prometheus 2.42
captures), discovery's engine names, and `prometheus-config`'s YAML (checked by Debian's promtool)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from poolconsole.collect.prometheus.api import parse_vector
from poolconsole.collect.prometheus.discovery import engines_from_targets
from poolconsole.collect.prometheus.queries import matchers, scrape_time, selection
from poolconsole.config import ConfigError, parse_config
from poolconsole.config.models import EngineKind
from poolconsole.ops.prometheus_config import render
from tests.conftest import REAL
from tests.helpers.prometheus import promtool

PROM = REAL / "prometheus-2.42"
BASE = '[prometheus]\nurl = "http://prom:9090/"\n'


def engine_toml(**fields: str) -> str:
    text = '[[engines]]\nname = "qwen"\nkind = "vllm"\nurl = "http://gpu-box:8000"\n'
    return text + "".join(f"{k} = {json.dumps(v) if not v.startswith('{') else repr(v)}\n" for k, v in fields.items())


def problems(text: str) -> str:
    with pytest.raises(ConfigError) as caught:
        parse_config(text)
    return caught.value.render()


def test_an_engine_reads_from_prometheus_by_its_instance_or_a_selector() -> None:
    config = parse_config(BASE + engine_toml(read="prometheus"))
    assert config.prometheus is not None and config.prometheus.url == "http://prom:9090"
    engine = config.engines[0]
    assert (engine.read, engine.instance, matchers(engine)) == ("prometheus", "gpu-box:8000", 'instance="gpu-box:8000"')
    assert parse_config(engine_toml()).engines[0].read == "direct"
    chosen = parse_config(BASE + engine_toml(read="prometheus", selector='{job="vllm", instance="gpu-box:8000",}'))
    assert matchers(chosen.engines[0]) == 'job="vllm", instance="gpu-box:8000"'
    query = selection(chosen.engines[0])
    assert query.startswith('{__name__=~"') and query.endswith('", job="vllm", instance="gpu-box:8000"}')
    names = query.split('"')[1].split("|")
    assert {"up", "vllm:num_requests_running", "vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"} <= set(names)
    assert "vllm:time_to_first_token_seconds_bucket" in names and "process_start_time_seconds" in names
    assert scrape_time(chosen.engines[0]).startswith('max(timestamp(up{job="vllm", instance="gpu-box:8000"}) or ')


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (engine_toml(read="prometheus"), "needs a [prometheus] table"),
        (BASE + engine_toml(read="prometheus").replace('"vllm"', '"ollama"'), "is for vllm, sglang and llamacpp"),
        (BASE + engine_toml(selector='{job="vllm"}'), 'selector is only read with read = "prometheus"'),
        (BASE + engine_toml(read="prometheus", selector="job=vllm"), "PromQL label matchers in braces"),
        (BASE + engine_toml(read="prometheus", selector='{__name__="x"}'), "must not match __name__"),
        (BASE + engine_toml(read="sometimes"), "engines[0:qwen].read"),
        ('[prometheus]\nurl = "http://prom:9090"\ntoken = "x"\n', "secrets are never written"),
        ('[prometheus]\nurl = "http://prom:9090"\ntimeout = 3\n', "unknown key"),
        ('[prometheus]\nurl = "http://prom:9090"\nusername = "me"\n', "needs both username and password_env"),
        ('[prometheus]\nurl = "prom:9090"\n', "http:// or https://"),
    ],
)
def test_every_problem_is_reported(text: str, says: str) -> None:
    assert says in problems(text)


def test_answers_of_a_real_prometheus_parse() -> None:
    [series] = parse_vector((PROM / "query-tokens_predicted_total.json").read_bytes())
    assert series.labels["__name__"] == "llamacpp:tokens_predicted_total" and series.value == 250.0
    assert series.labels["instance"] == "127.0.0.1:18080" and series.at == 1795992240.164
    [up] = parse_vector((PROM / "query-up.json").read_bytes())
    assert up.value == 1.0
    with pytest.raises(ValueError, match="instant vector"):
        parse_vector(b'{"status":"success","data":{"resultType":"matrix","result":[]}}')
    with pytest.raises(ValueError):
        parse_vector(b"<html>")


def test_discovery_names_engines_after_their_instance() -> None:
    engines = engines_from_targets(
        [
            (EngineKind.VLLM, "vllm", "gpu-box:8000"),
            (EngineKind.SGLANG, "sglang", "[fd7a::1]:30000"),
            (EngineKind.LLAMACPP, "a", "gpu-box:8080"),
            (EngineKind.LLAMACPP, "b", "gpu-box:8080"),
        ]
    )
    got = {e.name: (e.kind.value, e.selector, e.host, e.read) for e in engines}
    assert got == {
        "gpu-box-8000": ("vllm", '{job="vllm", instance="gpu-box:8000"}', "gpu-box", "prometheus"),
        "fd7a-1-30000": ("sglang", '{job="sglang", instance="[fd7a::1]:30000"}', "fd7a::1", "prometheus"),
        "gpu-box-8080": ("llamacpp", '{job="a", instance="gpu-box:8080"}', "gpu-box", "prometheus"),
        "gpu-box-8080-b": ("llamacpp", '{job="b", instance="gpu-box:8080"}', "gpu-box", "prometheus"),
    }


POOL = """
[[hosts]]
name = "gpu-box"
address = "gpu-box.tailnet.ts.net"

[[engines]]
name = "qwen"
kind = "vllm"
url = "http://gpu-box:8000"
host = "gpu-box"

[[engines]]
name = "coder"
kind = "sglang"
url = "http://gpu-box:30000"

[[engines]]
name = "small"
kind = "llamacpp"
url = "https://gpu-box:8443/llama"
api_key_env = "SMALL_KEY"

[[engines]]
name = "embed"
kind = "ollama"
url = "http://gpu-box:11434"
"""


def test_prometheus_config_writes_every_engine_and_exporter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SMALL_KEY", "s3cret-token")
    config = parse_config(POOL)
    written = render(config, None, tmp_path / "credentials")
    yaml = written.yaml
    assert "s3cret-token" not in yaml
    assert written.files == {tmp_path / "credentials" / "llamacpp.token": "s3cret-token"}
    assert f'credentials_file: "{tmp_path / "credentials" / "llamacpp.token"}"' in yaml
    assert "--enable-metrics" in yaml and "--metrics" in yaml
    assert '- targets: ["gpu-box:8000"]' in yaml and '"engine": "qwen"' in yaml
    assert 'metrics_path: "/llama/metrics"' in yaml and 'scheme: "https"' in yaml
    assert '- targets: ["gpu-box.tailnet.ts.net:9100"]' in yaml and '- targets: ["gpu-box.tailnet.ts.net:9400"]' in yaml
    assert "11434" not in yaml and any("Ollama has no /metrics" in n for n in written.notes)
    with_sd = render(config, tmp_path / "sd", tmp_path / "credentials")
    groups = json.loads(with_sd.files[tmp_path / "sd" / "vllm.json"])
    assert groups == [{"targets": ["gpu-box:8000"], "labels": {"engine": "qwen", "host": "gpu-box"}}]
    checker = promtool()
    for doc in (written, with_sd):
        (tmp_path / "prometheus.yml").write_text(doc.yaml)
        for path, content in doc.files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content)
        checked = subprocess.run([checker, "check", "config", str(tmp_path / "prometheus.yml")], capture_output=True)
        assert checked.returncode == 0, checked.stdout.decode() + checked.stderr.decode()


def test_an_unset_key_is_a_note_not_a_secret_in_the_yaml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SMALL_KEY", raising=False)
    written = render(parse_config(POOL), None, tmp_path / "credentials")
    assert written.files == {}
    assert any("$SMALL_KEY is not set" in n and "chmod 600" in n for n in written.notes)
