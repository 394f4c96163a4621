"""Whatever hosts.toml holds, the loader answers with a config or a ConfigError naming the file and the key:
never another exception (`gpus = [0, "a"]` died with AttributeError in the code that words pydantic's errors,
and check-config, status, record and the console with it). Mutations of the repository's hosts.toml, plus
hand-made hostile files."""

from __future__ import annotations

import copy
import json
import math
import tomllib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from poolconsole.config.load import ConfigError, load_config, parse_config
from poolconsole.config.models import PoolConfig

ROOT = Path(__file__).resolve().parents[2]
TEXT = (ROOT / "hosts.toml").read_text(encoding="utf-8")
DATA = tomllib.loads(TEXT)


def _keys(schema: Any) -> set[str]:
    """Every key the schema knows, at any depth: a mutation that adds one reaches its validator."""
    if isinstance(schema, list):
        return set().union(*(_keys(v) for v in schema))
    if not isinstance(schema, dict):
        return set()
    properties = schema.get("properties")
    return set(properties if isinstance(properties, dict) else ()).union(*(_keys(v) for v in schema.values()))


KEYS = sorted(_keys(PoolConfig.model_json_schema()))


def _paths(node: Any, at: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    out = [at]
    if isinstance(node, dict):
        for key, value in node.items():
            out += _paths(value, (*at, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            out += _paths(value, (*at, index))
    return out


def _dig(node: Any, path: tuple[str | int, ...]) -> Any:
    for part in path:
        node = node[part]
    return node


PATHS = _paths(DATA)[1:]
TABLES = [p for p in [(), *PATHS] if isinstance(_dig(DATA, p), dict)]


def _value(value: Any) -> str:
    """One TOML value, inline."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf") if math.isinf(value) else repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # JSON's escapes are TOML basic-string escapes
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    assert isinstance(value, dict)
    return "{" + ", ".join(f"{json.dumps(str(k), ensure_ascii=False)} = {_value(v)}" for k, v in value.items()) + "}"


def _toml(data: dict[str, Any]) -> str:
    return "".join(f"{json.dumps(key, ensure_ascii=False)} = {_value(value)}\n" for key, value in data.items())


WORDS = [
    "tp4",
    "vllm",
    "docker",
    "systemd",
    "ops",
    "$HF_TOKEN",
    "(",
    "http://x:99999",
    "http://[x",
    "http://x:8000",
    "~/../etc",
]
"""Values some key takes, or almost: each reaches a validator's own check."""
text = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)  # a file read as UTF-8 has no surrogates
scalars = st.one_of(
    st.booleans(),
    st.integers(),
    st.sampled_from([2**63, -(2**63) - 1, 10**40, -1, 0, 65536]),
    st.floats(),
    text,
    st.sampled_from([*WORDS, "a\x00b", "\x1b[2J", "-" * 300, "a-" * 200, "--api-key sk-1", '{instance=~"("}']),
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from([*KEYS, "\x1b[2J"]) | text, inner, max_size=3)
    ),
    max_leaves=12,
)


@st.composite
def mutated(draw: st.DrawFn) -> dict[str, Any]:
    """hosts.toml's tables with one to three values replaced, keys added or removed."""
    data = copy.deepcopy(DATA)
    for _ in range(draw(st.integers(1, 3))):
        how = draw(st.sampled_from(["replace", "add", "remove"]))
        path = draw(st.sampled_from(TABLES if how == "add" else PATHS))
        try:
            node = _dig(data, path if how == "add" else path[:-1])
        except (KeyError, IndexError, TypeError):
            continue  # an earlier mutation took that place away
        if how == "add" and isinstance(node, dict):
            node[draw(st.sampled_from(KEYS))] = draw(values)
        elif how == "remove" and isinstance(node, dict):
            node.pop(path[-1], None)
        elif how == "replace":
            try:
                node[path[-1]]  # still there, and of the same kind
            except (KeyError, IndexError, TypeError):
                continue
            node[path[-1]] = draw(values)
    return data


def loads_or_config_error(text: str, source: str = "<fuzz>") -> None:
    try:
        parse_config(text, source)
    except ConfigError as exc:
        assert exc.source == source and exc.problems
        assert all(p.path for p in exc.problems), exc.render()  # each names its key, "(syntax)" or "(top level)"
        assert "\x1b" not in exc.render()  # what the file holds never drives the terminal that shows it


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=mutated())
def test_a_mutated_config_loads_or_says_what_is_wrong(data: dict[str, Any]) -> None:
    loads_or_config_error(_toml(data))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(at=st.integers(0, len(TEXT)), junk=st.binary(min_size=1, max_size=6))
def test_bytes_spliced_into_the_file_are_a_config_error_too(at: int, junk: bytes, tmp_path_factory: Any) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "hosts.toml"
    raw = TEXT.encode()
    path.write_bytes(raw[:at] + junk + raw[at:])  # non-UTF-8, NUL, a cut escape, a stray bracket
    try:
        load_config(path)
    except ConfigError as exc:
        assert exc.source == str(path) and all(p.path for p in exc.problems)


ENGINE = '[[engines]]\nname = "a"\nkind = "vllm"\nurl = "http://x:8000"\n'
"""One engine alone, for a key hosts.toml's engines already set."""


HOSTILE = {
    "a string in a list of ints": (TEXT.replace("gpus = [0, 1, 2, 3]", 'gpus = [0, "a"]'), "gpus[1]"),
    "a table in a list of ints": (TEXT.replace("gpus = [0, 1, 2, 3]", "gpus = [0, {a = [1]}]"), "gpus[1]"),
    "a list where a table goes": (ENGINE + "smoke = [[1], {b = 2}]\n", "smoke"),
    "a string list in a list of floats": (
        TEXT.replace("gpu_memory_gib = [24, 24, 24, 24]", 'gpu_memory_gib = [24, ["x", {}]]'),
        "gpu_memory_gib[1]",
    ),
    "a huge int": (TEXT.replace("ssh_concurrency = 32", "ssh_concurrency = 1" + "0" * 400), "ssh_concurrency"),
    "a huge int in a list of floats": (
        TEXT.replace("gpu_memory_gib = [24, 24, 24, 24]", "gpu_memory_gib = [1" + "0" * 400 + "]"),
        "gpu_memory_gib[0]",
    ),
    "tables 40 deep": ("[" + ".".join(["a"] * 40) + "]\nx = 1\n", "a.a"),
    "arrays 5000 deep": ("x = " + "[" * 5000 + "]" * 5000 + "\n", "(syntax)"),
    "inline tables 3000 deep": ("x = " + "{a = " * 3000 + "1" + "}" * 3000 + "\n", "(syntax)"),
    "a NUL in a name": (TEXT.replace('name = "tp4"', 'name = "tp\\u00004"', 1), "name"),
    "an escape in a name": (TEXT.replace('name = "tp4"', 'name = "\\u001b[2J"', 1), "hosts[0].name"),
    "an escape as a key": (TEXT.replace("ssh_concurrency", '"\\u001b]0;title\\u0007"', 1), "'\\x1b]0;title\\x07'"),
    "a raw NUL": (TEXT + "\x00", "(syntax)"),
    "a regex that is none": (ENGINE + '[engines.smoke]\nprobe_expect = "("\n', "probe_expect"),
    "a port out of range": (TEXT.replace(":8000", ":99999", 1), "url"),
    "an unclosed IPv6 address": (TEXT.replace("http://tp4-3090", "http://[tp4-3090", 1), "url"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hand_made_hostile_files_are_a_config_error_naming_the_key(case: str) -> None:
    text, key = HOSTILE[case]
    with pytest.raises(ConfigError) as raised:
        parse_config(text, "hosts.toml")
    assert raised.value.source == "hosts.toml"
    assert any(key in p.path for p in raised.value.problems), raised.value.render()
    assert "\x1b" not in raised.value.render()


def test_non_utf8_bytes_are_a_config_error_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "hosts.toml"
    path.write_bytes(TEXT.encode().replace(b"tp4", b"tp\xff4", 1))
    with pytest.raises(ConfigError) as raised:
        load_config(path)
    assert raised.value.source == str(path) and raised.value.problems[0].path == "(file)"


def test_a_wrong_type_in_a_list_is_said_at_its_line() -> None:
    """The finding's own case: the key, the engine's name and the line, as for any other problem."""
    with pytest.raises(ConfigError) as raised:
        parse_config(TEXT.replace("gpus = [0, 1, 2, 3]", 'gpus = [0, "a"]'), "hosts.toml")
    (problem,) = raised.value.problems
    assert problem.path == "engines[0:qwen3-next-80b].gpus[1]"
    assert problem.line == TEXT[: TEXT.index("gpus = [0, 1, 2, 3]")].count("\n") + 1
