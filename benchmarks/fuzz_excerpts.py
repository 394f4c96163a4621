"""Seeds cut to a maximum length for benchmarks/fuzz.py, as libFuzzer's `-max_len` cuts its corpus.

A real /metrics page is 50-260 KB, and one parse of it costs milliseconds: mutating whole pages ran the page
parsers at 66-1,300 inputs a second. An excerpt of at most `max_len` bytes keeps what a parser's rules are
about and costs a fraction of that. The cuts fall where the format allows a reader to start:

- Prometheus text: whole metric families (HELP/TYPE lines and their samples); a family longer than
  `max_len` is cut between its sample lines, its HELP/TYPE lines repeated at the head of each piece.
- logs: whole lines.
- TOML: whole tables (a `[table]` or `[[array]]` header and its keys up to the next header at column 0).

A single line longer than `max_len` is cut at `max_len` bytes: the only cut inside a line.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable

Splitter = Callable[[bytes, int], list[bytes]]

_FAMILY_LINE = re.compile(rb"#[ \t]*(?:HELP|TYPE)[ \t]+(\S+)")
_TOML_HEADER = re.compile(rb"\[")


def _lines(data: bytes) -> list[bytes]:
    """The lines of `data`, each with its newline (the last may have none)."""
    return data.splitlines(keepends=True)


def _cut(line: bytes, max_len: int) -> bytes:
    return line[:max_len]


def _pack_lines(lines: list[bytes], max_len: int, head: bytes = b"") -> list[bytes]:
    """Consecutive lines packed into pieces of at most `max_len` bytes, each piece starting with `head`."""
    room = max(max_len - len(head), 1)
    pieces: list[bytes] = []
    current: list[bytes] = []
    size = 0
    for line in lines:
        line = _cut(line, room)
        if current and size + len(line) > room:
            pieces.append(head + b"".join(current))
            current, size = [], 0
        current.append(line)
        size += len(line)
    if current:
        pieces.append(head + b"".join(current))
    return pieces


def prometheus_blocks(data: bytes, max_len: int) -> list[bytes]:
    """A page's metric families, each at most `max_len` bytes (a longer one in pieces, see the docstring)."""
    families: list[list[bytes]] = []
    name: bytes | None = None
    for line in _lines(data):
        header = _FAMILY_LINE.match(line)
        if header is not None and (header.group(1) != name or not families):
            name = header.group(1)
            families.append([])
        elif not families:
            families.append([])
        families[-1].append(line)
    blocks: list[bytes] = []
    for family in families:
        whole = b"".join(family)
        if len(whole) <= max_len:
            blocks.append(whole)
            continue
        count = next((i for i, line in enumerate(family) if not line.startswith(b"#")), len(family))
        head = b"".join(family[:count])
        if len(head) * 2 > max_len:  # headers as long as the room: no header is worth losing the samples
            head, count = b"", 0
        blocks.extend(_pack_lines(family[count:], max_len, head) if family[count:] else _pack_lines(family, max_len))
    return blocks


def line_blocks(data: bytes, max_len: int) -> list[bytes]:
    """A log's lines, each cut to `max_len` bytes."""
    return [_cut(line, max_len) for line in _lines(data)]


def toml_blocks(data: bytes, max_len: int) -> list[bytes]:
    """A TOML file's tables (the keys before the first header are one block), each at most `max_len` bytes
    (a longer table in pieces of whole lines: a piece without its header is keys of the table before)."""
    tables: list[list[bytes]] = [[]]
    for line in _lines(data):
        if _TOML_HEADER.match(line) and tables[-1]:
            tables.append([])
        tables[-1].append(line)
    blocks: list[bytes] = []
    for table in tables:
        whole = b"".join(table)
        blocks.extend([whole] if len(whole) <= max_len else _pack_lines(table, max_len))
    return [b for b in blocks if b]


SPLITTERS: dict[str, Splitter] = {"prometheus": prometheus_blocks, "lines": line_blocks, "toml": toml_blocks}


def pack(blocks: list[bytes], max_len: int) -> list[bytes]:
    """Consecutive blocks packed greedily into excerpts of at most `max_len` bytes: the seeds tried as they
    are, once each, before any mutation."""
    out: list[bytes] = []
    current = b""
    for block in blocks:
        if current and len(current) + len(block) > max_len:
            out.append(current)
            current = b""
        current += block
    if current:
        out.append(current)
    return out


class Excerpts:
    """Random excerpts of a corpus: a run of consecutive blocks of one seed from a random block on, up to a
    random length of at most `max_len` bytes (at least one block)."""

    def __init__(self, seeds: list[bytes], unit: str, max_len: int) -> None:
        split = SPLITTERS[unit]
        self.max_len = max_len
        self.blocks = [b for b in (split(seed, max_len) for seed in seeds) if b]

    def fixed(self) -> list[bytes]:
        """Every seed cut into consecutive excerpts of at most `max_len` bytes."""
        return [excerpt for blocks in self.blocks for excerpt in pack(blocks, self.max_len)]

    def __call__(self, rng: random.Random) -> bytes:
        if not self.blocks:
            return b""
        blocks = rng.choice(self.blocks)
        at = rng.randrange(len(blocks))
        budget = rng.randint(1, self.max_len)
        out = blocks[at]
        for block in blocks[at + 1 :]:
            if len(out) + len(block) > budget:
                break
            out += block
        return out


__all__ = ["SPLITTERS", "Excerpts", "line_blocks", "pack", "prometheus_blocks", "toml_blocks"]
