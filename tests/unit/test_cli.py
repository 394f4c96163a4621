"""The command line as a new user meets it: --help, the first run with nothing configured, and no
traceback anywhere (a closed pipe, a file that is not SQLite, a directory as the config, an empty
config, an unknown profile)."""

from __future__ import annotations

import json
import os
import pkgutil
import signal
import subprocess
import sys
import time
from importlib import import_module
from pathlib import Path

import pytest

from poolconsole import cli, commands
from poolconsole.ops import audit

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "poolconsole", *args], capture_output=True, text=True, timeout=120, cwd=cwd, env=env
    )


def clean_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "POOLCONSOLE_CONFIG"}
    env.update(HOME=str(tmp_path / "home"), XDG_CONFIG_HOME=str(tmp_path / "home" / ".config"), COLUMNS="80")
    env["PYTHONPATH"] = str(ROOT)
    return env


def test_help_lists_every_command_on_one_line(tmp_path: Path) -> None:
    proc = run("--help", env=clean_env(tmp_path))
    assert proc.returncode == 0
    commands = choices(cli.build_parser())
    lines = proc.stdout.splitlines()
    for name in commands:
        mine = [line for line in lines if line.strip().startswith(name + " ")]
        assert len(mine) == 1 and len(mine[0].split(None, 1)) == 2, f"{name}: {mine}"  # name and help, one line
        assert len(mine[0]) <= 80
    assert "the working directory is not searched" in proc.stdout.replace("\n", " ")


def choices(parser: object) -> list[str]:
    return list(parser._subparsers._group_actions[0].choices)  # type: ignore[attr-defined]


def test_the_command_table_names_each_command_by_the_module_that_adds_it() -> None:
    """cli.COMMANDS (what a run imports) is the parsers the modules add: in --help's order, each command added
    by the module the table names, and a parser built for one command's module parses that command."""
    assert choices(cli.build_parser()) == list(cli.COMMANDS)
    adding = {
        m.name
        for m in pkgutil.iter_modules(commands.__path__)
        if hasattr(import_module(f"poolconsole.commands.{m.name}"), "add_parser")
    }
    assert set(cli.COMMANDS.values()) == adding  # a module that adds a parser is in the table
    for name, module in cli.COMMANDS.items():
        assert name in choices(cli.build_parser([module]))
        assert cli.modules_for(["--config", "x.toml", name, "--help"]) == [module]


def test_the_console_imports_no_commands_module_and_help_every_one() -> None:
    every = list(dict.fromkeys(cli.COMMANDS.values()))
    assert cli.modules_for([]) == cli.modules_for(["--read-only", "--prometheus", "status"]) == []
    assert cli.modules_for(["--help"]) == cli.modules_for(["--he"]) == cli.modules_for(["-h"]) == every
    assert cli.modules_for(["no-such-command"]) == every  # argparse lists the choices
    code = "import sys; from poolconsole import cli; cli.build_parser(cli.modules_for([])).parse_args([]); " + (
        "print(sorted(m for m in sys.modules if m.startswith('poolconsole.commands.')))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    loaded = json.loads(proc.stdout.replace("'", '"'))
    # the console's own, and the demo's, which it opens when nothing is configured
    assert loaded == [f"poolconsole.commands.{m}" for m in ("common", "console", "demo", "launch")]


def test_first_run_in_a_clone_opens_the_demo_not_the_example(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The checkout's hosts.toml documents an example pool: it must not greet a new user as 8 engines down."""
    monkeypatch.chdir(ROOT)
    monkeypatch.delenv("POOLCONSOLE_CONFIG", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("HOME", str(tmp_path))
    assert (ROOT / "hosts.toml").is_file()
    assert cli.default_config_path() is None  # so plain `poolconsole` runs the demo
    mine = tmp_path / "config" / "poolconsole" / "hosts.toml"
    mine.parent.mkdir(parents=True)
    mine.write_text("")
    assert cli.default_config_path() == mine
    monkeypatch.setenv("POOLCONSOLE_CONFIG", str(tmp_path / "other.toml"))
    assert cli.default_config_path() == tmp_path / "other.toml"


def test_audit_json_into_a_closed_pipe(tmp_path: Path) -> None:
    db = tmp_path / "audit.db"
    for i in range(400):
        audit.record(db, "restart", f"engine-{i}", ["docker restart x" * 20], "ok", "serving after 2.0 s", 2.0)
    env = clean_env(tmp_path)
    proc = subprocess.run(
        f"set -o pipefail; {sys.executable} -m poolconsole audit --json --limit 400 --db {db} | head -n 2",
        shell=True,
        executable="/bin/bash",
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert proc.stdout.splitlines()[0] == "["
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, proc.stderr
    assert proc.returncode == 141  # as `cat` would: the reader left (1 is a pool with problems)


def test_an_empty_audit_log_points_at_the_demo_consoles_own(tmp_path: Path) -> None:
    """A user who tried the demo's restart found `poolconsole audit` saying nothing was recorded: the demo
    console keeps its actions apart, in its own log beside its hosts.toml."""
    env = clean_env(tmp_path)
    env.update(XDG_DATA_HOME=str(tmp_path / "data"), XDG_RUNTIME_DIR=str(tmp_path / "run"))
    proc = run("audit", env=env)
    assert proc.returncode == 0 and "no actions recorded in" in proc.stdout
    assert "demo" not in proc.stdout  # no demo run yet: nothing to point at
    demo = tmp_path / "run" / "poolconsole" / "demo-4242.audit.sqlite3"
    demo.parent.mkdir(parents=True, exist_ok=True)
    audit.record(demo, "restart", "qwen", ["docker restart qwen"], "ok", "serving after 2.0 s", 2.0)
    proc = run("audit", env=env)
    assert f"the demo console records its own: poolconsole audit --db {demo}" in proc.stdout
    assert "restart qwen" in run("audit", "--db", str(demo), env=env).stdout


def test_bad_files_get_a_sentence_not_a_traceback(tmp_path: Path) -> None:
    env = clean_env(tmp_path)
    garbage = tmp_path / "notes.txt"
    garbage.write_text("this is not a database\n" * 200)
    proc = run("audit", "--db", str(garbage), env=env)
    assert proc.returncode == 2 and str(garbage) in proc.stderr and "not a usable audit database" in proc.stderr
    for args in (["status", "--config", str(tmp_path)], ["--config", str(tmp_path), "plan"]):
        proc = run(*args, env=env)
        assert proc.returncode == 2 and str(tmp_path) in proc.stderr and "Is a directory" in proc.stderr, args
        assert "Traceback" not in proc.stderr
    empty = tmp_path / "empty.toml"
    empty.write_text("# nothing yet\n")
    proc = run("status", "--config", str(empty), env=env)
    assert proc.returncode == 2 and "nothing to poll" in proc.stderr and str(empty) in proc.stderr


def test_rollover_to_an_unknown_profile_exits_2_before_any_plan(tmp_path: Path) -> None:
    proc = run("rollover", "qwen3-next-80b", "no-such-profile", "--config", str(ROOT / "hosts.toml"))
    assert proc.returncode == 2 and "no profile 'no-such-profile'" in proc.stderr
    assert "will run" not in proc.stdout and proc.stdout == ""


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGHUP], ids=["SIGINT", "SIGHUP"])
def test_serve_only_says_where_its_config_is(tmp_path: Path, stop: signal.Signals) -> None:
    """Ctrl-C, or its terminal closed (SIGHUP), stops it cleanly: its throwaway config and SSH keys go."""
    env = clean_env(tmp_path)
    env["XDG_RUNTIME_DIR"] = str(tmp_path / "run")
    proc = subprocess.Popen(
        [sys.executable, "-m", "poolconsole", "demo", "--serve-only"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        path = Path(line.split("its config is ", 1)[1].split(";", 1)[0])
        assert path.is_file() and "[[engines]]" in path.read_text()
        assert path.with_name(path.name + ".ssh").is_dir()  # the simulated hosts' keys
    finally:
        proc.send_signal(stop)
        deadline = time.monotonic() + 30
        while proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0
    # its own config and keys name ports that are gone: removed, not left to pile up in the runtime dir
    assert not path.exists() and not path.with_name(path.name + ".ssh").exists()


def test_check_config_takes_the_config_where_every_command_does(tmp_path: Path) -> None:
    """`poolconsole check-config --config FILE` as `status --config FILE` does (a user tries both forms)."""
    config = tmp_path / "pool.toml"
    config.write_text('[[engines]]\nname = "e"\nkind = "vllm"\nurl = "http://127.0.0.1:9"\n')
    for args in (["check-config", "--config", str(config)], ["--config", str(config), "check-config"]):
        proc = run(*args, env=clean_env(tmp_path))
        assert proc.returncode == 0, proc.stderr
        assert "ok: 0 host(s), 1 engine(s)" in proc.stdout
    # an engine naming a host with no [[hosts]] entry (a typo): a warning, and the "ok" line says there is one
    config.write_text(
        '[[hosts]]\nname = "gpu-box"\naddress = "127.0.0.1"\n'
        '[[engines]]\nname = "e"\nkind = "vllm"\nurl = "http://127.0.0.1:9"\nhost = "gpu-bxo"\n'
    )
    proc = run("check-config", str(config), env=clean_env(tmp_path))
    assert proc.returncode == 0 and "host 'gpu-bxo' has no [[hosts]] entry" in proc.stderr, proc
    assert "ok: 1 host(s), 1 engine(s), 1 warning(s) above (the console starts anyway)" in proc.stdout


def demo_written_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str = "demo-77.toml") -> Path:
    """A hosts.toml as `poolconsole demo --serve-only --config-out FILE` writes it (its first line the mark),
    with the user's directories in tmp_path."""
    from poolconsole.sim.demo_files import CONFIG_HEADER

    monkeypatch.delenv("POOLCONSOLE_CONFIG", raising=False)
    for var, sub in (("HOME", "home"), ("XDG_CONFIG_HOME", "config"), ("XDG_DATA_HOME", "data")):
        monkeypatch.setenv(var, str(tmp_path / sub))
    (tmp_path / "run").mkdir(mode=0o700, exist_ok=True)  # platformdirs takes no other as the runtime directory
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    config = tmp_path / name
    engine = '[[engines]]\nname = "gemma3-27b-nvfp4"\nkind = "vllm"\nurl = "http://127.0.0.1:9"\n'
    config.write_text(f"{CONFIG_HEADER} (pid 77)\n{engine}")
    return config


def test_audit_takes_the_config_and_reads_the_log_its_actions_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`restart ENGINE --config demo.toml --yes` logs to the demo's own audit log beside demo.toml: `audit`
    with that config, after the command as every other command takes it or before it, lists that entry."""
    config = demo_written_config(tmp_path, monkeypatch)
    stores = cli.demo_stores_of(str(config), say=False)  # where restart / rollover with --config write
    assert stores is not None and stores[0] == tmp_path / "demo-77.audit.sqlite3"
    audit.record(stores[0], "restart", "gemma3-27b-nvfp4", ["docker restart gemma"], "ok", "serving after 2.0 s", 2.0)
    stale = tmp_path / "run" / "poolconsole" / "demo-4242.audit.sqlite3"  # an older, exited demo console's
    audit.record(stale, "restart", "qwen", ["docker restart qwen"], "ok", "serving after 2.0 s", 2.0)
    for argv in (["audit", "--config", str(config), "--json"], ["--config", str(config), "audit", "--json"]):
        capsys.readouterr()
        assert cli.main(argv) == 0, argv
        captured = capsys.readouterr()
        entries = json.loads(captured.out)
        assert [(e["action"], e["target"], e["outcome"]) for e in entries] == [("restart", "gemma3-27b-nvfp4", "ok")], (
            argv
        )
        assert stores[0].name in captured.err  # said, as the other commands on the demo's hosts.toml say it
    assert cli.main(["audit", "--config", str(config)]) == 0
    out = capsys.readouterr().out
    assert "restart gemma3-27b-nvfp4: ok" in out and "$ docker restart gemma" in out
    assert "no actions recorded" not in out and "demo-4242" not in out
    fresh = demo_written_config(tmp_path, monkeypatch, "demo-78.toml")  # a demo with no action yet
    assert cli.main(["audit", "--config", str(fresh)]) == 0
    out = capsys.readouterr().out
    assert f"no actions recorded in {tmp_path / 'demo-78.audit.sqlite3'}" in out
    assert "demo-4242" not in out  # its own log is the one read: no pointer to another demo's
    other = tmp_path / "other.audit.sqlite3"
    # --db still wins; a missing file named on the command line is a typo, not an empty log (exit 2)
    assert cli.main(["audit", "--config", str(config), "--db", str(other)]) == 2
    assert f"no audit log at {other}" in capsys.readouterr().err


def test_runs_takes_the_config_and_reads_the_store_its_smoke_runs_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from poolconsole.ops.smoke import runs as smoke_runs

    config = demo_written_config(tmp_path, monkeypatch)
    stores = cli.demo_stores_of(str(config), say=False)  # where smoke with --config stores its runs
    assert stores is not None and stores[1] == tmp_path / "demo-77.smoke.sqlite3"
    run_id = smoke_runs.save_run(stores[1], 4242, True, f"smoke --config {config}", [], {})
    for argv in (["runs", "--config", str(config), "--json"], ["--config", str(config), "runs", "--json"]):
        capsys.readouterr()
        assert cli.main(argv) == 0, argv
        assert [(r["run_id"], r["seed"]) for r in json.loads(capsys.readouterr().out)] == [(run_id, 4242)], argv
    assert cli.main(["runs", "--config", str(config), "--compare", str(run_id), str(run_id)]) == 0
    assert "same conditions, same results" in capsys.readouterr().out
    fresh = demo_written_config(tmp_path, monkeypatch, "demo-78.toml")  # a demo with no smoke run yet
    assert cli.main(["runs", "--config", str(fresh)]) == 0
    assert f"no smoke runs stored in {tmp_path / 'demo-78.smoke.sqlite3'}" in capsys.readouterr().out
    other = tmp_path / "other.smoke.sqlite3"
    # --db still wins; a missing file named on the command line is a typo, not 'no runs' (exit 2)
    assert cli.main(["runs", "--config", str(config), "--db", str(other)]) == 2
    assert f"no smoke-run store at {other}" in capsys.readouterr().err


def test_audit_and_runs_name_a_config_they_cannot_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A --config that is a directory, missing or not TOML: a sentence naming it and exit 2, not the user's
    stores read as if it were fine, and no traceback."""
    demo_written_config(tmp_path, monkeypatch)
    broken = tmp_path / "broken.toml"
    broken.write_text("[[engines]\nname =")
    for bad in (tmp_path, tmp_path / "missing.toml", broken):
        for argv in (["audit", "--config", str(bad)], ["--config", str(bad), "runs", "--json"]):
            capsys.readouterr()
            assert cli.main(argv) == 2, argv
            out = capsys.readouterr()
            assert str(bad) in out.err and "Traceback" not in out.err and out.out == "", argv
