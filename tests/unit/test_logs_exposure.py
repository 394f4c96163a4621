"""The log commands (every backend, quoting, bounds, redaction) and the exposure audit's parts (a real
`ss -ltnpH` capture, address scopes, the verdicts, /slots text never kept) without a network."""

from __future__ import annotations

import asyncio
import json
import shlex
from pathlib import Path

import httpx
import pytest
from pydantic import ValidationError

from poolconsole.collect import engine_logs as logs
from poolconsole.commands import exposure as exposure_command
from poolconsole.config.models import Engine
from poolconsole.model.exposure import EngineExposure
from poolconsole.ops import exposure
from poolconsole.ops.exposure import Probe, judge
from poolconsole.ops.listening import Listener, parse_ss

FIXTURES = Path(__file__).parents[1] / "fixtures"


def engine(**extra: object) -> Engine:
    return Engine.model_validate({"name": "e", "kind": "vllm", "url": "http://gpu:8000", **extra})


@pytest.mark.parametrize(
    ("table", "since", "argv"),
    [
        ({"control": {"backend": "docker", "name": "vllm-q"}}, 600,
         ["docker", "logs", "--tail", "50", "--since", "600s", "vllm-q"]),
        ({"control": {"backend": "podman", "name": "vllm-q", "binary": "/usr/bin/podman"}}, None,
         ["/usr/bin/podman", "logs", "--tail", "50", "vllm-q"]),
        ({"control": {"backend": "compose", "name": "vllm", "compose_dir": "/srv/pool"}}, 60,
         ["docker", "compose", "--project-directory", "/srv/pool", "logs", "--no-color", "--tail", "50",
          "--since", "60s", "vllm"]),
        ({"control": {"backend": "systemd", "name": "llama.service", "user_unit": True}}, 3600,
         ["journalctl", "--user", "-u", "llama.service", "--no-pager", "-o", "short-iso", "-n", "50",
          "--since", "-3600s"]),
        ({"control": {"backend": "supervisor", "name": "llama", "supervisor_conf": "/etc/sv.conf"}}, 60,
         ["supervisorctl", "-c", "/etc/sv.conf", "tail", "-4096", "llama"]),
        ({"logs": {"source": "file", "path": "/var/log/engine@a=b.log"}}, None,
         ["tail", "-n", "50", "--", "/var/log/engine@a=b.log"]),
        ({"logs": {"source": "journald", "name": "ollama.service"},
          "control": {"backend": "command", "name": "x", "command": ["true"]}}, None,
         ["journalctl", "-u", "ollama.service", "--no-pager", "-o", "short-iso", "-n", "50"]),
    ],
)  # fmt: skip
def test_each_backend_reads_its_log_with_every_argument_quoted(
    table: dict[str, object], since: int | None, argv: list[str]
) -> None:
    plan = logs.log_plan(engine(**table), since, 50, 4096)
    assert list(plan.argv) == argv
    command = logs.read_command(plan, 4096)
    words = shlex.split(command)
    assert words[1 : 1 + len(argv)] == argv, "the argv survives the shell intact"
    assert command.endswith(f"| tail -c {4096 + 64}")


def test_a_hostile_name_that_slipped_past_validation_is_still_one_quoted_word() -> None:
    from poolconsole.config.models import LogSource

    hostile = LogSource.model_construct(source="file", path="/tmp/x; touch /tmp/pwned", name=None, binary=None)
    plan = logs.log_plan(engine().model_copy(update={"logs": hostile}), None, 5, 100)
    words = shlex.split(logs.read_command(plan, 100))
    assert "/tmp/x; touch /tmp/pwned" in words and "touch" not in words


def test_follow_and_bounds() -> None:
    plan = logs.log_plan(engine(control={"backend": "docker", "name": "c"}), None, 10**9, 4096, follow=True)
    assert plan.argv == ("docker", "logs", "--tail", str(logs.MAX_LINES), "--follow", "c")
    assert logs.follow_command(plan) == "docker logs --tail 100000 --follow c 2>&1"


def test_no_source_says_what_to_declare() -> None:
    with pytest.raises(logs.LogsUnavailable, match=r"\[engines.logs\]"):
        logs.log_plan(engine(), None, 10, 100)
    with pytest.raises(logs.LogsUnavailable, match="custom command"):
        logs.log_plan(engine(control={"backend": "command", "name": "x", "command": ["true"]}), None, 10, 100)


def test_names_and_paths_that_could_reach_a_shell_are_refused() -> None:
    for table in ({"source": "docker", "name": "c; rm -rf /"}, {"source": "file", "path": "/tmp/$(id)"},
                  {"source": "file", "path": "/var/log/../../etc/shadow"}, {"source": "docker"}):  # fmt: skip
        with pytest.raises(ValidationError):
            engine(logs=table)


def test_since() -> None:
    assert [logs.parse_since(t) for t in ("30s", "10m", "2h", "1d", "5min")] == [30, 600, 7200, 86400, 300]
    for bad in ("10", "-5m", "1w", "10m; id"):
        with pytest.raises(ValueError):
            logs.parse_since(bad)


def test_parse_read_status_truncation_and_cleaning() -> None:
    out = "one\ntwo HF_TOKEN=hf_abcdefgh\n\x1b[31mred\x1b[0m\x07\n\npoolconsole-log-exit:0\n"
    lines, status, truncated = logs.parse_read(out, 10_000)
    assert (status, truncated) == (0, False)
    assert lines == ["one", "two HF_TOKEN=<redacted>", "red"]
    unterminated = "last line without newline\npoolconsole-log-exit:1\n"
    assert logs.parse_read(unterminated, 10_000) == (["last line without newline"], 1, False)
    cut = "ial line\nwhole\n\npoolconsole-log-exit:0\n"
    lines, _, truncated = logs.parse_read(cut, len(cut.encode()) - 64)
    assert truncated and lines == ["whole"]
    assert len(logs.clean("x" * 100_000)) == logs.MAX_LINE_CHARS


def test_a_log_line_that_forges_the_exit_mark_does_not_hide_the_real_status() -> None:
    out = "poolconsole-log-exit:0\nError: No such container: vllm\n\npoolconsole-log-exit:1\n"
    lines, status, _ = logs.parse_read(out, 10_000)
    assert status == 1 and lines[-1] == "Error: No such container: vllm"


def test_ss_capture_and_scopes() -> None:
    listeners = parse_ss((FIXTURES / "exposure/ss-ltnpH-iproute2-6.1.0.txt").read_text())
    scopes = {s.port: (s.text(), s.scope(), s.process) for s in listeners}
    assert scopes == {
        8080: ("0.0.0.0:8080", "all", "llama-server"),
        8081: ("127.0.0.1:8081", "loopback", "llama-server"),
        8082: ("100.101.102.103:8082", "tailnet", "llama-server"),
        8083: ("192.168.5.7:8083", "lan", "llama-server"),
        8084: ("*:8084", "all", "llama-server"),
    }
    assert Listener("::ffff:127.0.0.1", 1, None).scope() == "loopback"
    assert Listener("8.8.8.8", 1, None).scope() == "public"
    assert Listener("fd7a:115c:a1e0::1", 1, None).scope() == "tailnet"
    assert Listener("::1", 1, None).text() == "[::1]:1"


def llama(**extra: object) -> Engine:
    return Engine.model_validate({"name": "l", "kind": "llamacpp", "url": "http://gpu:8080", "host": "h", **extra})


def test_a_keyless_engine_only_on_loopback_or_the_tailnet_is_noted_not_exposed() -> None:
    got = Probe(models_status=200, models=("m",), completion_status=200, metrics_status=200)
    contained = judge(llama(), got, [Listener("100.101.102.103", 8080, None)], None)
    assert contained.unauthenticated is True and not contained.exposed
    assert "tailnet" in contained.findings[0].found
    everywhere = judge(llama(), got, [Listener("0.0.0.0", 8080, "docker-proxy")], None)
    assert everywhere.exposed and everywhere.listen == ("0.0.0.0:8080",)
    [listen] = [f for f in everywhere.findings if f.check == "listen_all_interfaces"]
    assert "-p 127.0.0.1:8080:8080" in listen.fix
    unknown = judge(llama(), got, None, "listening addresses not read: no host")
    assert unknown.exposed and unknown.listen is None and unknown.unchecked


def test_verdicts_refused_unknown_and_litellm_master_key() -> None:
    refused = judge(llama(), Probe(models_status=401, completion_status=401, slots_status=401), [], None)
    assert refused.unauthenticated is False and not refused.exposed
    silent = judge(llama(), Probe(errors=("http://gpu:8080/v1/models: connection refused",)), None, None)
    assert silent.unauthenticated is None and not silent.findings
    gateway = Engine.model_validate({"name": "gw", "kind": "litellm", "url": "http://gw:4000"})
    open_gw = judge(gateway, Probe(models_status=200, completion_status=200), None, None)
    checks = {f.check for f in open_gw.findings if f.exposed}
    assert {"litellm_master_key", "completion_without_key"} <= checks
    assert any("accepts a caller without a key" in f.found for f in open_gw.findings)


async def test_slots_text_is_counted_never_kept() -> None:
    secret = "PROMPT-OF-A-CALLER-3141"

    def answer(request: httpx.Request) -> httpx.Response:
        cors = {"access-control-allow-origin": request.headers.get("origin", "")}
        if request.url.path == "/slots":
            return httpx.Response(200, json=[{"id": 0, "prompt": secret, "next_token": {"text": secret}}])
        if request.url.path == "/v1/models":
            return httpx.Response(200, json={"data": [{"id": "tiny"}]}, headers=cors)
        if request.url.path == "/v1/completions":
            assert "authorization" not in request.headers
            assert json.loads(request.content)["max_tokens"] == 1
            return httpx.Response(200, json={"choices": [{"text": secret}]})
        return httpx.Response(200, text=f"llamacpp:prompt_tokens_total 1\n# {secret}")

    async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as client:
        got = await exposure.probe(client, llama(), completion=True)
    result = judge(llama(), got, [Listener("127.0.0.1", 8080, None)], None)
    text = json.dumps(exposure.document([result], True))
    assert secret not in text and secret not in repr(got)
    assert got.slots_entries == 1 and "slots_open" in {f.check for f in result.findings}
    assert "cors_open" in {f.check for f in result.findings}


def test_a_refusal_answered_with_500_counts_as_a_refusal_when_the_key_is_served() -> None:
    gateway = Engine.model_validate({"name": "gw", "kind": "litellm", "url": "http://gw:4000"})
    # LiteLLM 1.108.7 without its database package: a key-less call fails with 500, the keyed one is served
    refused = judge(gateway, Probe(models_status=500, keyed_models_status=200, completion_status=500), None, None)
    assert refused.unauthenticated is False and not refused.findings
    broken = judge(gateway, Probe(models_status=500, keyed_models_status=500, completion_status=500), None, None)
    assert broken.unauthenticated is None  # failing with the key too: nothing learned about the key


def test_a_contained_engine_is_described_by_where_it_listens() -> None:
    got = Probe(models_status=200, models=("m",), completion_status=200, metrics_status=200)
    loopback = judge(llama(), got, [Listener("127.0.0.1", 8080, None)], None)
    assert "loopback only: only this host's users and processes reach it" in loopback.findings[0].found
    assert "tailnet peer" not in loopback.findings[0].found
    tailnet = judge(llama(), got, [Listener("100.101.102.103", 8080, None)], None)
    assert "tailnet only: any tailnet peer can use it" in tailnet.findings[0].found


def test_llama_cpp_models_list_without_a_key_is_told_apart_by_its_guarded_endpoints() -> None:
    """Some llama.cpp builds list their models to anyone, --api-key or not: /metrics and /slots tell."""
    keyed = judge(llama(), Probe(models_status=200, models=("m",), metrics_status=401, slots_status=401), [], None)
    assert keyed.unauthenticated is False and not keyed.findings  # no "start llama-server with --api-key"
    keyless = judge(llama(), Probe(models_status=200, models=("m",), metrics_status=200), [], None)
    assert keyless.unauthenticated is True
    unknown = judge(llama(), Probe(models_status=200, models=("m",), metrics_status=404), [], None)
    assert unknown.unauthenticated is None and any("completion would" in u for u in unknown.unchecked)
    told = judge(llama(), Probe(models_status=200, models=("m",), metrics_status=404, completion_status=401), [], None)
    assert told.unauthenticated is False and not [u for u in told.unchecked if "completion would" in u]


def test_ollama_bind_fix_names_its_own_port() -> None:
    ollama = Engine.model_validate({"name": "o", "kind": "ollama", "url": "http://gpu:41141", "host": "h"})
    result = judge(ollama, Probe(models_status=200, models=("m",)), [Listener("0.0.0.0", 41141, None)], None)
    [listen] = [f for f in result.findings if f.check == "listen_all_interfaces"]
    assert "OLLAMA_HOST=127.0.0.1:41141" in listen.fix


OPEN_LLAMA = Probe(
    models_status=200, models=("m",), completion_status=200, metrics_status=200, slots_status=200, slots_entries=2,
    cors="*",
)  # fmt: skip
"""llama-server without --api-key: everything answers, /slots included, and CORS is open."""


def test_an_engine_on_loopback_only_is_contained_for_every_finding_slots_and_cors_too() -> None:
    """Only this host's users and processes reach it: no finding is `!!` while each says why, the fix stays."""
    for address in ("127.0.0.1", "::1"):
        result = judge(llama(), OPEN_LLAMA, [Listener(address, 8080, "llama-server")], None)
        checks = {f.check: f for f in result.findings}
        assert {"completion_without_key", "models_without_key", "cors_open", "slots_open"} <= set(checks)
        assert not result.exposed and not [f.check for f in result.findings if f.exposed], address
        assert all("loopback only" in f.found for f in result.findings), [f.found for f in result.findings]
        assert "--no-slots" in checks["slots_open"].fix and result.unchecked == ()
        assert exposure.document([result], True)["exposed"] is False
    gateway = Engine.model_validate({"name": "gw", "kind": "litellm", "url": "http://gw:4000", "host": "h"})
    open_gw = judge(gateway, Probe(models_status=200, completion_status=200), [Listener("127.0.0.1", 4000, None)], None)
    [master] = [f for f in open_gw.findings if f.check == "litellm_master_key"]
    assert not master.exposed and "loopback only" in master.found


def test_a_public_or_unknown_listener_keeps_it_exposed_and_unknown_is_said() -> None:
    """Loopback and a public address, every interface, or where it listens not read: EXPOSED, /slots too;
    on the tailnet a key-less engine is contained but its /slots (any peer reads the others' prompts) and
    open CORS (a web page drives a peer's browser) are not."""
    for listeners in ([Listener("127.0.0.1", 8080, None), Listener("203.0.113.7", 8080, None)],
                      [Listener("0.0.0.0", 8080, None)]):  # fmt: skip
        result = judge(llama(), OPEN_LLAMA, listeners, None)
        exposed = {f.check for f in result.findings if f.exposed}
        assert result.exposed and {"completion_without_key", "slots_open", "cors_open"} <= exposed, exposed
        assert not [f.found for f in result.findings if "loopback only" in f.found]
    unknown = judge(llama(), OPEN_LLAMA, None, "listening addresses not read: studio has no `ss`")
    assert unknown.exposed and unknown.listen is None and "studio has no `ss`" in unknown.unchecked[0]
    [slots] = [f for f in unknown.findings if f.check == "slots_open"]
    assert slots.exposed and "where it listens was not checked" in slots.found
    nothing = judge(llama(), OPEN_LLAMA, [Listener("127.0.0.1", 9999, None)], None)  # not on its port
    assert nothing.exposed and all(f.exposed for f in nothing.findings if f.check != "metrics_without_key")
    tailnet = judge(llama(), OPEN_LLAMA, [Listener("100.101.102.103", 8080, None)], None)
    assert {f.check for f in tailnet.findings if f.exposed} == {"slots_open", "cors_open"}
    assert "any tailnet peer can read them" in next(f.found for f in tailnet.findings if f.check == "slots_open")


def test_the_cli_text_gives_each_engine_the_screens_verdict(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`poolconsole exposure` says EXPOSED, contained, ok or not checked as the exposure screen does (it said
    "ok" for an engine with contained findings)."""
    results = [
        judge(llama(), OPEN_LLAMA, [Listener("0.0.0.0", 8080, None)], None),
        judge(llama(), OPEN_LLAMA, [Listener("127.0.0.1", 8080, None)], None),
        EngineExposure("keyed", "llamacpp", "http://h:8080", False, ("127.0.0.1:8080",), ()),
        EngineExposure("quiet", "llamacpp", "http://h:8081", None, None, (), ("models list: timed out",)),
    ]

    async def audited(config: object, completion: bool) -> list[EngineExposure]:
        return results

    monkeypatch.setattr(exposure, "audit", audited)
    config = Engine.model_validate({"name": "x", "kind": "llamacpp", "url": "http://h:8080"})
    pool = type("Pool", (), {"engines": [config]})()
    args = type("Args", (), {"no_completion": False, "json": False})()
    assert exposure_command.audited(pool, args) == 1
    lines = [line for line in capsys.readouterr().out.splitlines() if not line.startswith(" ")]
    assert [line.split()[0] for line in lines[:4]] == ["EXPOSED", "contained", "ok", "not"]
    assert lines[3].startswith("not checked quiet")
    assert lines[-1] == "EXPOSED: l (1 of 4); NOT CHECKED: quiet (1 of 4 could not be reached)"


async def test_a_probe_that_gets_no_answer_says_so_and_how_long_it_waited() -> None:
    """A server that accepts and never answers: httpx's ReadTimeout has no message, and the finding read
    "…/v1/models: ReadTimeout: " with nothing after it."""
    accepted: list[asyncio.StreamWriter] = []

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(writer)  # held open, never answered

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    engine = Engine.model_validate({"name": "mute", "kind": "llamacpp", "url": f"http://127.0.0.1:{port}"})
    try:
        async with httpx.AsyncClient(timeout=httpx.Timeout(0.2)) as client:
            got = await exposure.probe(client, engine, completion=True)
    finally:
        for writer in accepted:
            writer.close()
        server.close()
    assert got.errors == (f"http://127.0.0.1:{port}/v1/models: no answer within 0.2 s",)
