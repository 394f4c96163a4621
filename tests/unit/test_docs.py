"""The documentation against the code: the generated config reference is current and holds every key of the
schema, every command of the CLI's parser is in the README's commands table and on a docs page, the README
stays a short page, and no relative link points at nothing."""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from poolconsole.cli import build_parser
from poolconsole.config.schema import json_schema

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
REFERENCE = DOCS / "config-reference.md"


def generator() -> ModuleType:
    """scripts/gen-config-docs.py, imported from its path (its name is not a module name)."""
    spec = importlib.util.spec_from_file_location("gen_config_docs", ROOT / "scripts" / "gen-config-docs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def subcommands() -> list[str]:
    """The commands of the real parser, as `poolconsole --help` lists them."""
    parser = build_parser()
    found = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert len(found) == 1, "the parser has one set of subcommands"
    names = list(found[0].choices)
    assert names, "the parser has subcommands"
    return names


def cells(line: str) -> list[str]:
    """A markdown table row's cells (a `\\|` inside a cell is not a separator)."""
    return [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]


def section(text: str, heading: str) -> str:
    """The text under a `## heading`, up to the next heading of that level."""
    match = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert match, f"no '## {heading}' section"
    return match.group(1)


def mentions(text: str, command: str) -> bool:
    """`poolconsole COMMAND` as a whole word: `export` is not found in `exporter`, nor `prometheus` in
    `prometheus-config`."""
    return re.search(rf"poolconsole {re.escape(command)}(?![\w-])", text) is not None


def doc_pages() -> list[Path]:
    pages = sorted(DOCS.glob("*.md"))
    assert pages, "docs/ has pages"
    return pages


def test_the_config_reference_is_what_the_generator_writes_now() -> None:
    assert REFERENCE.read_text(encoding="utf-8") == generator().generate(), (
        "docs/config-reference.md is stale: run .venv/bin/python scripts/gen-config-docs.py"
    )


def test_the_generator_is_deterministic() -> None:
    gen = generator()
    schema = json.loads(json_schema())
    assert gen.render(schema) == gen.render(json.loads(json_schema()))


def test_every_command_is_in_the_readme_table_and_on_a_docs_page() -> None:
    table = section(README.read_text(encoding="utf-8"), "Commands")
    first_cells = [cells(line)[0] for line in table.splitlines() if line.startswith("|")]
    pages = {page.name: page.read_text(encoding="utf-8") for page in doc_pages()}
    for command in subcommands():
        assert any(mentions(cell, command) for cell in first_cells), f"`poolconsole {command}` is not in README's table"
        assert any(mentions(text, command) for text in pages.values()), (
            f"no docs/ page mentions `poolconsole {command}`"
        )


def schema_tables(schema: dict[str, Any]) -> dict[str, set[str]]:
    """Each table of the schema (the top level and every $defs entry with properties) -> its keys."""
    tables = {"(top level)": set(schema["properties"])}
    for name, body in schema.get("$defs", {}).items():
        if "properties" in body:
            tables[name] = set(body["properties"])
    return tables


def reference_sections(text: str) -> list[set[str]]:
    """The keys of each section's table in docs/config-reference.md (the first cell of each row)."""
    found = []
    for part in re.split(r"^## ", text, flags=re.M)[1:]:
        keys = {m.group(1) for m in re.finditer(r"^\| `([^`]+)` \|", part, re.M)}
        found.append(keys)
    return found


def test_every_config_key_of_the_schema_is_in_the_reference() -> None:
    """Walked apart from the generator: each table's keys all in one section of the page."""
    sections = reference_sections(REFERENCE.read_text(encoding="utf-8"))
    for table, keys in schema_tables(json.loads(json_schema())).items():
        assert any(keys <= found for found in sections), (
            f"{table}: keys missing from docs/config-reference.md: "
            f"{sorted(keys - max(sections, key=lambda s: len(keys & s)))}"
        )


def test_the_readme_is_short() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) < 250, f"README.md has {len(lines)} lines: move the detail to docs/"


LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def links(text: str) -> list[str]:
    """The targets of the markdown links and images outside code (fenced blocks and `spans`)."""
    prose = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
    prose = re.sub(r"`[^`\n]*`", "", prose)
    return LINK.findall(prose)


def test_every_relative_link_points_at_a_file_that_exists() -> None:
    broken = []
    for page in [README, ROOT / "BENCHMARKS.md", *doc_pages()]:
        for target in links(page.read_text(encoding="utf-8")):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
                continue  # a URL with a scheme, or an anchor on the same page
            path = target.split("#", 1)[0]
            if not (page.parent / path).exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert not broken, "links to nothing: " + ", ".join(broken)
