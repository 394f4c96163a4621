"""benchmarks/fuzz_excerpts.py: seeds cut to at most max_len bytes where a reader may start (whole metric
families, whole lines, whole TOML tables), and the fuzz driver's inputs within their stated caps."""

from __future__ import annotations

import itertools
import random
import tomllib

from benchmarks.fuzz_excerpts import Excerpts, line_blocks, pack, prometheus_blocks, toml_blocks
from tests.conftest import REAL
from tests.unit.test_fuzz_budget import FUZZ, ROOT, TARGETS

PAGE = (REAL / "vllm-0.32.0-cpu" / "metrics.load.txt").read_bytes()


def _family(line: bytes) -> bytes:
    """The family a HELP/TYPE line opens."""
    return line.split()[2]


def test_a_page_is_cut_between_whole_families() -> None:
    blocks = prometheus_blocks(PAGE, 8192)
    assert b"".join(blocks) == PAGE  # no family of this page is longer than 8 KiB: nothing lost, nothing cut
    assert len(blocks) > 20
    for block in blocks:
        lines = block.splitlines()
        headers = {_family(line) for line in lines if line.startswith((b"# HELP ", b"# TYPE "))}
        assert len(headers) <= 1, block[:200]  # one family per block
        if any(line and not line.startswith(b"#") for line in lines):  # with the header of its samples
            assert any(line.startswith(b"# TYPE ") for line in lines), block[:200]
        if headers:  # its header first, then its samples
            assert lines[0].startswith(b"# "), block[:200]
            (name,) = headers
            assert all(line.startswith((b"#", name)) for line in lines if line), block[:200]


def test_a_family_longer_than_max_len_keeps_its_header_in_every_piece() -> None:
    head = b"# HELP x_seconds A histogram.\n# TYPE x_seconds histogram\n"
    samples = [b'x_seconds_bucket{le="%d",pod="p%d"} %d\n' % (i, i, i) for i in range(400)]
    pieces = prometheus_blocks(head + b"".join(samples), 1024)
    assert len(pieces) > 10
    assert all(len(p) <= 1024 and p.startswith(head) for p in pieces)
    assert b"".join(p.removeprefix(head) for p in pieces) == b"".join(samples)


def test_every_excerpt_is_at_most_max_len_and_a_line_longer_is_cut() -> None:
    log = b"INFO a line\n" + b"-" * 5000 + b"\nERROR the end\n"
    assert line_blocks(log, 1024) == [b"INFO a line\n", b"-" * 1024, b"ERROR the end\n"]
    for max_len in (64, 1024, 8192):
        excerpts = Excerpts([PAGE, log], "prometheus", max_len)
        assert all(len(e) <= max_len for e in excerpts.fixed())
        rng = random.Random(3)
        assert all(len(excerpts(rng)) <= max_len for _ in range(200))


def test_a_toml_file_is_cut_between_whole_tables() -> None:
    text = (ROOT / "hosts.toml").read_bytes()
    blocks = toml_blocks(text, 8192)
    assert b"".join(blocks) == text
    assert len(blocks) > 5
    for block in blocks:
        tomllib.loads(block.decode())  # each table reads alone
    assert sum(block.lstrip().startswith(b"[") for block in blocks) >= len(blocks) - 1


def test_pack_keeps_blocks_whole_and_in_order() -> None:
    assert pack([b"aa", b"bbb", b"c", b"dddd", b"ee"], 5) == [b"aabbb", b"cdddd", b"ee"]


def test_the_page_targets_read_excerpts_within_their_caps() -> None:
    cuts = FUZZ.Cuts(max_len=4096, max_grow=16384, whole=0.0)
    target = TARGETS["vllm"]
    seeds = target.seeds()
    first = list(itertools.islice(FUZZ.inputs(target, 5, cuts), len(seeds) + 2000))
    assert first[: len(seeds)] == seeds  # the whole seeds once, as they are
    assert max(len(data) for data in first[len(seeds) :]) <= 16384
    assert sum(len(data) <= 4096 for data in first) > 1500  # most inputs are an excerpt with few mutations
    whole = list(itertools.islice(FUZZ.inputs(target, 5, FUZZ.Cuts(max_len=0)), len(seeds) + 2000))
    assert max(len(data) for data in whole[len(seeds) :]) > 16384  # --max-len 0: whole pages, as before


def test_the_small_targets_keep_whole_seeds() -> None:
    assert TARGETS["slots"].unit is None
    assert {TARGETS[n].unit for n in ("prom", "prom_diff", "vllm", "litellm_metrics")} == {"prometheus"}
    assert (TARGETS["logs"].unit, TARGETS["config"].unit) == ("lines", "toml")
