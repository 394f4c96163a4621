"""Load hosts.toml with tomllib and validate it, reporting every problem at once with its key path and line."""

from __future__ import annotations

import copy
import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from poolconsole.config.models import PoolConfig
from poolconsole.config.secret_text import secret_in

SECRET_KEYS = re.compile(r"(^|_)(api_key|key|token|password|secret)$", re.IGNORECASE)  # HF_TOKEN in an env table too


@dataclass(frozen=True)
class Problem:
    path: str
    message: str
    line: int | None = None

    def __str__(self) -> str:
        where = f"line {self.line}: " if self.line else ""
        return f"{where}{self.path}: {self.message}"


class ConfigError(Exception):
    """hosts.toml could not be read or is invalid; `problems` lists every one."""

    def __init__(self, source: str, problems: list[Problem]) -> None:
        self.source = source
        self.problems = problems
        super().__init__(self.render())

    def render(self) -> str:
        if len(self.problems) == 1 and self.problems[0].path == "(file)":  # unreadable: one sentence
            return f"{self.source}: {self.problems[0].message}"
        lines = [f"{self.source}: {len(self.problems)} problem(s)"]
        lines += [f"  {p}" for p in self.problems]
        return "\n".join(lines)


MAX_DEPTH = 32
"""Tables and arrays nested deeper than this are refused before anything walks them (the deepest key hosts.toml
has, an env reference in a profile, is 7 down): the checks below recurse."""


def _too_deep(data: Any) -> tuple[str | int, ...] | None:
    """The key path of the first value nested deeper than MAX_DEPTH, if any (walked without recursion)."""
    stack: list[tuple[tuple[str | int, ...], Any]] = [((), data)]
    while stack:
        loc, node = stack.pop()
        if len(loc) > MAX_DEPTH:
            return loc
        if isinstance(node, dict):
            stack += [((*loc, key), value) for key, value in node.items()]
        elif isinstance(node, list):
            stack += [((*loc, index), value) for index, value in enumerate(node)]
    return None


class _LineIndex:
    """Finds the line of a key path like ('engines', 2, 'kind') in TOML text.

    tomllib keeps no positions, so this tracks `[table]` / `[[array]]` headers and `key =` lines;
    it is good for the hand-written shape of hosts.toml, and returns None where it cannot tell.
    """

    HEADER = re.compile(r"^\s*(\[\[?)\s*([A-Za-z0-9_.\-\"' ]++)\s*+\]\]?\s*(#.*)?$")
    """The name taken whole (no backtracking over a long one), its trailing spaces stripped after."""
    KEY = re.compile(r"^\s*([A-Za-z0-9_\-]+|\"[^\"]*\")\s*=")

    def __init__(self, text: str) -> None:
        self.tables: dict[tuple[str | int, ...], int] = {}
        self.keys: dict[tuple[str | int, ...], int] = {}
        counters: dict[tuple[str | int, ...], int] = {}
        """Each array of tables by its full path (its parents' indexes in it), with how many it has so far."""
        current: tuple[str | int, ...] = ()
        for number, line in enumerate(text.splitlines(), start=1):
            header = self.HEADER.match(line)
            if header:
                name = header.group(2).rstrip(" ").replace('"', "").replace("'", "")
                names = name.split(".")
                if len(names) > MAX_DEPTH:
                    continue  # refused as too deep (or a quoted name full of dots): not worth a line
                parts: tuple[str | int, ...] = ()
                for depth, part in enumerate(names, start=1):  # [engines.control] is in the last [[engines]]
                    parts = (*parts, part)
                    appended = depth == len(names) and header.group(1) == "[["  # the array this header adds to
                    if parts in counters and not appended:
                        parts = (*parts, counters[parts] - 1)
                if header.group(1) == "[[":
                    index = counters.get(parts, 0)
                    counters[parts] = index + 1
                    parts = (*parts, index)
                current = parts
                self.tables.setdefault(current, number)
                continue
            key = self.KEY.match(line)
            if key:
                self.keys.setdefault((*current, key.group(1).strip('"')), number)

    def line(self, loc: tuple[str | int, ...]) -> int | None:
        for end in range(len(loc), 0, -1):
            prefix = loc[:end]
            if prefix in self.keys:
                return self.keys[prefix]
            if prefix in self.tables:
                return self.tables[prefix]
        return None


def _loc_text(loc: tuple[str | int, ...], data: dict[str, Any]) -> str:
    out: list[str] = []
    node: Any = data
    for part in loc:
        if isinstance(part, int):
            node = node[part] if isinstance(node, list) and 0 <= part < len(node) else None
            name = node.get("name") if isinstance(node, dict) else None  # gpus = [0, "a"]: the 1 is no table
            shown = isinstance(name, str) and name.isprintable() and len(name) <= 64  # no escapes to the terminal
            label = f"[{part}:{name}]" if shown else f"[{part}]"
            out[-1] = out[-1] + label if out else label
        else:
            out.append(part if part.isprintable() else repr(part))  # a key of escapes is said, not obeyed
            node = node.get(part) if isinstance(node, dict) else None
    return ".".join(out) or "(top level)"


WRITTEN_IN = "secrets are never written in hosts.toml"
CARRIED = ("args", "command")
"""Lists whose words reach an engine's command line: a secret flag's value written there is refused too."""


def _written(text: str, loc: tuple[str | int, ...]) -> list[tuple[tuple[str | int, ...], str]]:
    """A secret flag or assignment with its value inside a string (`--api-key sk-...`, `HF_TOKEN=...`)."""
    name = secret_in(text)
    if name is None:
        return []
    how = 'an env table\'s NAME = { env = "ENV_VAR_NAME" }, which the engine reads'
    return [(loc, f"{WRITTEN_IN} ({name} with its value here): give it through {how}")]


def _secret_problems(data: Any, loc: tuple[str | int, ...] = ()) -> list[tuple[tuple[str | int, ...], str]]:
    found: list[tuple[tuple[str | int, ...], str]] = []
    if isinstance(data, dict):
        for key, value in data.items():
            reference = isinstance(value, dict) and list(value) == ["env"]  # HF_TOKEN = { env = "HF_TOKEN" }
            if isinstance(key, str) and SECRET_KEYS.search(key) and not key.endswith("_env") and not reference:
                hint = f'{key} = {{ env = "ENV_VAR_NAME" }}' if loc[-1:] == ("env",) else f'{key}_env = "ENV_VAR_NAME"'
                found.append(((*loc, key), f"{WRITTEN_IN}: use {hint}"))
            elif loc[-1:] == ("env",) and isinstance(value, str):
                found += _written(value, (*loc, key))  # EXTRA_ARGS = "--api-key sk-..."
            elif key in CARRIED and isinstance(value, list) and all(isinstance(v, str) for v in value):
                found += _written(" ".join(value), (*loc, key))  # args = ["--api-key", "sk-..."]
            else:
                found += _secret_problems(value, (*loc, key))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            found += _secret_problems(value, (*loc, index))
    return found


UNKNOWN_KEY = "unknown key (check the spelling; `poolconsole schema` lists every key)"


def _no_env_twin(data: Any, locs: list[tuple[str | int, ...]]) -> set[tuple[str | int, ...]]:
    """Of the secret-named keys at `locs`, those whose `_env` twin the schema does not know either (`bogus_key`:
    "use bogus_key_env" would send the operator to a second unknown key). Checked by validating a copy with
    each renamed; only when the file has such keys."""
    renamed = copy.deepcopy(data)
    twins = {}
    for loc in locs:
        parent = renamed
        for part in loc[:-1]:
            parent = parent[part]
        key = str(loc[-1])
        parent[f"{key}_env"] = "ENV_VAR_NAME"
        del parent[key]
        twins[(*loc[:-1], f"{key}_env")] = loc
    try:
        PoolConfig.model_validate(renamed)
    except ValidationError as exc:
        unknown = (tuple(e["loc"]) for e in exc.errors() if e["type"] == "extra_forbidden")
        return {twins[loc] for loc in unknown if loc in twins}
    return set()


NAMED = re.compile(r"^(?:duplicate )?(engine|host)(?: name)? '([^']+)'")


def _placed(message: str, data: dict[str, Any], index: _LineIndex) -> Problem:
    """One of PoolConfig's own problems ("duplicate engine name 'x'", "engine 'x': ...") at the table it names
    (a duplicate at its second), with that table's line; "(top level)" only where none is named."""
    found = NAMED.match(message)
    entries = data.get(f"{found.group(1)}s") if found is not None else None
    if found is not None and isinstance(entries, list):
        places = [i for i, e in enumerate(entries) if isinstance(e, dict) and e.get("name") == found.group(2)]
        if places:
            second = message.startswith("duplicate") and len(places) > 1
            loc: tuple[str | int, ...] = (f"{found.group(1)}s", places[1] if second else places[0])
            return Problem(_loc_text(loc, data), message, index.line(loc))
    return Problem("(top level)", message)


def _whole_file(data: dict[str, Any]) -> list[str]:
    """PoolConfig's whole-file checks that need no valid field (a duplicate name, a degrade_to that names no
    engine), read from the raw tables: pydantic runs the model's own only once every field is valid, so a
    file with both kinds of problem said these only after the others were fixed."""
    out: list[str] = []
    tables: dict[str, list[Any]] = {}
    for label in ("host", "engine"):
        entries = data.get(f"{label}s")
        tables[label] = [e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []
    names = {label: [e["name"] for e in entries if isinstance(e.get("name"), str)] for label, entries in tables.items()}
    for label in tables:
        seen: set[str] = set()
        for name in names[label]:
            if name in seen:
                out.append(f"duplicate {label} name {name!r}")
            seen.add(name)
    for entry in tables["engine"]:
        target = entry.get("degrade_to")
        if isinstance(target, str) and isinstance(entry.get("name"), str) and target not in names["engine"]:
            out.append(f"engine {entry['name']!r}: degrade_to names no engine ({target!r})")
    return out


KEY_PAIR = re.compile(r"^keys: '.*' is the key of both (\S+) and (\S+)$")


def key_problems(path: Path, problems_of: Callable[[dict[str, str]], list[str]]) -> list[Problem]:
    """The `[keys]` table's problems as `problems_of` words them (the UI's action registry), each at its key's
    line: read from the file itself, so they are said with the file's other problems, not after them."""
    try:
        text = path.read_text(encoding="utf-8")
        keys = tomllib.loads(text).get("keys")
    except (OSError, ValueError, RecursionError):  # TOMLDecodeError and UnicodeDecodeError are ValueErrors
        return []  # said as the file's own problem
    if not isinstance(keys, dict):
        return []
    index = _LineIndex(text)
    out = []
    for problem in problems_of({k: v for k, v in keys.items() if isinstance(v, str)}):
        pair = KEY_PAIR.match(problem)  # at the one the file binds (the other may keep its default key)
        written = [a for a in pair.groups() if a in keys] if pair is not None else []
        action = written[-1] if written else problem.removeprefix("keys.").split(":", 1)[0]
        where, message = problem.split(": ", 1)
        out.append(Problem(where, message, index.line(("keys", action))))
    return out


def parse_config(text: str, source: str = "<config>") -> PoolConfig:
    """Parse and validate TOML text; raises ConfigError listing every problem."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        match = re.search(r"line (\d+)", str(exc))
        raise ConfigError(source, [Problem("(syntax)", str(exc), int(match.group(1)) if match else None)]) from None
    except RecursionError:  # tomllib reads nested arrays and inline tables recursively
        raise ConfigError(source, [Problem("(syntax)", "arrays or inline tables nested too deeply to read")]) from None
    except ValueError as exc:  # int() past Python's 4300 digits, raised by tomllib as a plain ValueError
        raise ConfigError(source, [Problem("(syntax)", f"a value tomllib cannot read: {exc}")]) from None
    index = _LineIndex(text)
    deep = _too_deep(data)
    if deep is not None:
        message = f"nested more than {MAX_DEPTH} tables or arrays deep"
        raise ConfigError(source, [Problem(_loc_text(deep, data), message, index.line(deep))])
    problems: list[Problem] = []
    secret_locs = set()
    secrets = _secret_problems(data)
    unknown = _no_env_twin(data, [loc for loc, message in secrets if "_env = " in message]) if secrets else set()
    for loc, message in secrets:
        secret_locs.add(loc)
        if loc in unknown:
            message = f"{UNKNOWN_KEY}; secrets are never written in hosts.toml, only the variable holding one"
        problems.append(Problem(_loc_text(loc, data), message, index.line(loc)))
    try:
        config = PoolConfig.model_validate(data)
    except ValidationError as exc:
        if not any(not e["loc"] for e in exc.errors()):  # the model's own checks did not run: these did not
            problems += [_placed(part, data, index) for part in _whole_file(data)]
        for error in exc.errors():
            loc = tuple(error["loc"])
            if loc in secret_locs:
                continue
            message = error["msg"].removeprefix("Value error, ")  # pydantic's words for a ValueError raised
            if not loc and error["type"] == "value_error":  # the whole file's checks: each at its table
                problems += [_placed(part, data, index) for part in message.split("; ")]
                continue
            if error["type"] == "extra_forbidden":
                message = UNKNOWN_KEY
            elif error["type"] == "missing":
                message = "required key is missing"
            problems.append(Problem(_loc_text(loc, data), message, index.line(loc)))
        problems.sort(key=lambda p: (p.line is None, p.line or 0))
        raise ConfigError(source, problems) from None
    if problems:
        raise ConfigError(source, problems)
    return config


def load_config(path: str | Path) -> PoolConfig:
    """Read and validate a hosts.toml file; raises ConfigError (also for a missing or unreadable file)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        why = f"cannot read the config: not UTF-8 text (byte {exc.start})"
        raise ConfigError(str(path), [Problem("(file)", why)]) from None
    except OSError as exc:  # the errno's words without the path repeated: "Is a directory", "No such file..."
        raise ConfigError(str(path), [Problem("(file)", f"cannot read the config: {exc.strerror or exc}")]) from None
    return parse_config(text, str(path))
