"""check-config's words for a bad hosts.toml. A secret written into it is refused with the key that should
hold the variable's name instead, and only where the schema has that key: a misspelt key named like a secret is
an unknown key, not a pointer to a second unknown one. The whole file's checks (a duplicate name, a degrade_to
naming no engine) name the table and its line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from poolconsole.config import ConfigError, parse_config

ENGINE = '[[engines]]\nname = "qwen"\nkind = "vllm"\nurl = "http://127.0.0.1:8000"\n'


def problems(text: str) -> list[str]:
    with pytest.raises(ConfigError) as err:
        parse_config(text)
    return [f"{p.path}: {p.message}" for p in err.value.problems]


def test_a_secret_under_a_key_the_schema_has_an_env_twin_for_names_the_twin() -> None:
    [said] = problems(ENGINE + 'api_key = "sk-live-123"\n')
    assert said == 'engines[0:qwen].api_key: secrets are never written in hosts.toml: use api_key_env = "ENV_VAR_NAME"'


def test_a_misspelt_secret_like_key_is_unknown_and_no_twin_is_invented() -> None:
    [said] = problems(ENGINE + 'apikey_key = "sk-live-123"\n')
    assert said.startswith("engines[0:qwen].apikey_key: unknown key (check the spelling")
    assert "secrets are never written in hosts.toml" in said and "apikey_key_env" not in said


def test_a_secret_in_an_env_table_is_pointed_at_an_env_reference() -> None:
    text = ENGINE + '[[engines.profiles]]\nname = "p"\nformat = "AWQ"\n[engines.profiles.env]\nHF_TOKEN = "hf_x"\n'
    said = [p for p in problems(text) if "HF_TOKEN" in p]
    hint = 'secrets are never written in hosts.toml: use HF_TOKEN = { env = "ENV_VAR_NAME" }'
    assert said == [f"engines[0:qwen].profiles[0:p].env.HF_TOKEN: {hint}"]


def test_both_kinds_in_one_file_each_get_their_own_words_and_no_value_is_echoed() -> None:
    said = problems(ENGINE + 'api_key = "sk-live-123"\nbogus_token = "tok-456"\n')
    assert len(said) == 2 and "api_key_env" in said[0]
    assert said[1].startswith("engines[0:qwen].bogus_token: unknown key")
    assert not any("sk-live" in s or "tok-456" in s for s in said)


def test_the_whole_files_checks_name_the_table_and_its_line() -> None:
    """A duplicate engine name read "(top level): Value error, duplicate engine name 'a'", with no line."""
    text = ENGINE + "\n" + ENGINE + 'degrade_to = "nowhere"\n'
    assert problems(text) == [  # in the file's order
        "engines[0:qwen]: engine 'qwen': degrade_to names no engine ('nowhere')",
        "engines[1:qwen]: duplicate engine name 'qwen'",
    ]
    with pytest.raises(ConfigError) as err:
        parse_config(text)
    lines = {p.message: p.line for p in err.value.problems}
    assert lines["duplicate engine name 'qwen'"] == 6  # the second [[engines]]
    assert not [p for p in err.value.problems if p.message.startswith("Value error")]


def test_a_key_in_a_table_nested_in_an_array_of_tables_is_found_on_its_own_line() -> None:
    """[engines.control] and [[engines.profiles]] belong to the last [[engines]]: their keys were all put
    at that engine's first line."""
    text = (
        ENGINE.replace("qwen", "a")
        + "\n"
        + ENGINE.replace("qwen", "b")  # lines 6-9
        + '\n[engines.control]\nbackend = "docker"\nname = "b"\nhelth_timeout_s = 5\n'  # line 14
        + '\n[[engines.profiles]]\nname = "p1"\nformat = "awq"\n'
        + '\n[[engines.profiles]]\nname = "p2"\nformat = "fp8"\nweight_gib = 3\n'  # line 23
        + '\n[engines.profiles.env]\nHF_TOKEN = "hf_x"\n'  # line 26
    )
    with pytest.raises(ConfigError) as err:
        parse_config(text)
    placed = [(p.line, p.path) for p in err.value.problems]
    assert placed == [
        (14, "engines[1:b].control.helth_timeout_s"),
        (23, "engines[1:b].profiles[1:p2].weight_gib"),
        (26, "engines[1:b].profiles[1:p2].env.HF_TOKEN"),
    ]


def test_a_secret_flag_with_its_value_in_args_or_an_env_value_is_refused_and_look_alikes_are_not() -> None:
    """`args = ["--api-key", "sk-..."]` or `EXTRA_ARGS = "--hf-token hf_..."` passed check-config: the secret
    sat in hosts.toml and reached a command line. Flags that merely contain the words do not count."""
    text = (
        ENGINE + '[[engines.profiles]]\nname = "p"\nformat = "awq"\n'
        'args = ["--max-num-batched-tokens", "4096", "--tokenizer-mode", "auto", "--api-key", "sk-live-9"]\n'
        '[engines.profiles.env]\nEXTRA_ARGS = "--hf-token hf_live_7"\nMAX_TOKENS = "4096"\n'
        'KEY_REF = "--api-key $API_KEY"\n'
    )
    said = problems(text)
    assert [s.split(": ", 1)[0] for s in said] == [
        "engines[0:qwen].profiles[0:p].args",
        "engines[0:qwen].profiles[0:p].env.EXTRA_ARGS",
    ], said
    assert "(--api-key with its value here)" in said[0] and "(--hf-token with its value here)" in said[1]
    assert not any("sk-live" in s or "hf_live" in s for s in said)
    clean = ENGINE + '[[engines.profiles]]\nname = "p"\nformat = "awq"\nargs = ["--max-num-batched-tokens", "4096"]\n'
    assert parse_config(clean).engines[0].profiles[0].args == ["--max-num-batched-tokens", "4096"]


def test_every_problem_is_said_in_one_run_the_whole_files_and_keys_with_the_fields(tmp_path: Path) -> None:
    """A bad kind, a duplicate engine name and two [keys] problems: check-config names all four at once, each
    with its line. It had said the field's, then (that fixed) the duplicate, then (that fixed) the keys."""
    text = (
        ENGINE
        + '[[engines]]\nname = "qwen"\nkind = "vllm"\nurl = "http://127.0.0.1:8001"\n'  # lines 5-8
        + '[[engines]]\nname = "coder"\nkind = "vlm"\nurl = "http://127.0.0.1:8002"\n'  # line 11: kind
        + '[keys]\nfilter = "s"\nnonsense = "x"\n'  # lines 13-15
    )
    path = tmp_path / "hosts.toml"
    path.write_text(text)
    proc = subprocess.run(
        [sys.executable, "-m", "poolconsole", "check-config", str(path)], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2, proc
    said = proc.stderr + proc.stdout
    assert "4 problem(s)" in said, said
    assert "line 5: engines[1:qwen]: duplicate engine name 'qwen'" in said
    assert "line 11: engines[2:coder].kind: " in said
    assert "line 14: keys: 's' is the key of both filter and sort" in said  # filter's line: sort keeps its default
    assert "line 15: keys.nonsense: no action has this id" in said
    lines = [line for line in said.splitlines() if line.startswith("  line ")]
    assert lines == sorted(lines, key=lambda line: int(line.split()[1].rstrip(":"))), lines  # in the file's order
