"""The failure-mode library on verbatim engine lines: every pattern on the lines posted in public issues
(tests/fixtures/log-lines/issue-lines.txt names each line's source), a real llama-server's own log of a
context it could not hold, and healthy logs where nothing may be found."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from poolconsole.model import failure_modes
from poolconsole.model.failure_modes import MODES, diagnose, match_line

LINES = Path(__file__).parents[1] / "fixtures" / "log-lines"


def issue_lines() -> list[tuple[str, str, str]]:
    """(pattern id, source URL, line) for each verbatim line of issue-lines.txt."""
    out: list[tuple[str, str, str]] = []
    label: tuple[str, str] | None = None
    for line in (LINES / "issue-lines.txt").read_text().splitlines():
        if line.startswith("# "):
            pattern, url = line[2:].split()
            label = (pattern, url)
        elif line.strip():
            assert label is not None
            out.append((*label, line))
            label = None
    return out


@pytest.mark.parametrize(("pattern", "source", "line"), issue_lines(), ids=lambda v: str(v)[:40])
def test_each_issue_line_is_diagnosed_as_its_failure_mode(pattern: str, source: str, line: str) -> None:
    hit = match_line(line)
    assert hit is not None, f"no pattern matches the line from {source}"
    assert hit[0].id == pattern, f"{source}: matched {hit[0].id}, expected {pattern}"


def test_every_pattern_has_verbatim_lines_and_its_own_example_matches() -> None:
    covered = {pattern for pattern, _, _ in issue_lines()}
    for mode in MODES:
        assert mode.id in covered, f"{mode.id} has no verbatim line in issue-lines.txt"
        hit = match_line(mode.example)
        assert hit is not None and hit[0].id == mode.id, mode.id
        assert mode.source.startswith("https://github.com/")
        assert mode.diagnosis and mode.adjustment


def test_numbers_of_the_message_go_into_the_advice() -> None:
    [kv] = diagnose(["ValueError: The model's max seq len (32768) is larger than the maximum number of tokens "
                     "that can be stored in KV cache (7344). Try increasing `gpu_memory_utilization`"])  # fmt: skip
    assert kv.pattern == "vllm_kv_cache_too_small"
    assert "at most 7344" in kv.adjustment and "32768 tokens" in kv.diagnosis
    [quant] = diagnose(["ValueError: The quantization method fp8 is not supported for the current GPU. "
                        "Minimum capability: 90. Current capability: 86."])  # fmt: skip
    assert "capability 90" in quant.diagnosis and "has 86" in quant.diagnosis
    assert "{" not in quant.adjustment


def test_a_real_llama_server_that_cannot_hold_its_context_is_diagnosed_from_its_own_log() -> None:
    log = (LINES / "llama-server-0c1e570-ctx2000000-ulimit-v1500000.log").read_text().splitlines()
    findings = diagnose(log)
    assert [f.pattern for f in findings] == ["llamacpp_buffer_alloc"]
    finding = findings[0]
    assert finding.line in [line.strip() for line in log]
    assert finding.count >= 3  # aligned malloc, the CPU buffer, compute buffers
    assert "-c" in finding.adjustment
    assert finding.to_json().keys() >= {"pattern", "diagnosis", "adjustment", "line"}


def test_healthy_logs_have_no_findings() -> None:
    healthy = (LINES / "llama-server-0c1e570-ctx4000000-capped-healthy.log").read_text().splitlines()
    gb10 = Path(__file__).parents[1] / "fixtures/real/issue-samples/gpud-gb10-nvml-fallback-log-pr1170.txt"
    assert diagnose(healthy) == []
    assert diagnose(gb10.read_text().splitlines()) == []


def test_one_finding_per_mode_with_the_latest_line_and_a_count() -> None:
    lines = [
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0",
        "INFO: 200 OK",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 40.00 MiB. GPU 0",
    ]
    [oom] = diagnose(lines)
    assert (oom.count, oom.line_no) == (2, 3) and "40.00 MiB" in oom.line


def test_a_huge_line_is_matched_on_its_start_and_kept_bounded() -> None:
    line = "CUDA error: out of memory " + "x" * 1_000_000
    [oom] = diagnose([line])
    assert len(oom.line) <= failure_modes.MAX_LINE


def test_the_library_is_pure() -> None:
    tree = ast.parse(Path(failure_modes.__file__).read_text())
    imported = {
        alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names
    } | {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    assert imported <= {"__future__", "re", "collections", "dataclasses", "typing"}
