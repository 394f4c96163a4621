"""Which lines of a Prometheus page a collector reads, picked before any parser runs (collect.prom): a vLLM
page holds ~90 families and a collector needs ~15."""

from __future__ import annotations

import bisect
import functools
import re
from dataclasses import dataclass

ENGINE_PREFIXES = ("vllm", "sglang", "llamacpp")


def normalise_name(name: str) -> str:
    """A re-exporter's `vllm_x` back to the engine's `vllm:x`."""
    for prefix in ENGINE_PREFIXES:
        if name.startswith(prefix + "_") and not name.startswith(prefix + ":"):
            return prefix + ":" + name[len(prefix) + 1 :]
    return name


@dataclass(frozen=True)
class Selected:
    text: str
    lines: int
    """Sample lines on the whole page."""
    prefixed: int
    """Sample lines whose (normalised) name starts with the engine prefix."""
    bad_lines: int
    first_bad: str | None
    bad: tuple[str, ...] = ()
    """The lines that cannot be samples, whole."""


_SAMPLE_LINE = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*(?=[{\s])")


@functools.lru_cache(maxsize=64)
def exposed(names: frozenset[str]) -> frozenset[str]:
    """Every exposed spelling of these normalised names (`vllm:x` is also served as `vllm_x`)."""
    out = set(names)
    for name in names:
        for engine in ENGINE_PREFIXES:
            if name.startswith(engine + ":"):
                out.add(engine + "_" + name[len(engine) + 1 :])
    return frozenset(out)


@dataclass(frozen=True, slots=True)
class _Family:
    """What a HELP/TYPE line decides for the sample lines after it."""

    wanted: bool
    stem: str | None
    """The name every sample of the family starts with (None: not a HELP/TYPE line)."""
    prefixed: bool
    shadows: bool = False
    """An unwanted family whose stem begins a wanted name (`# TYPE x_se` before `x_seconds 0` on a broken
    page): its block cannot be dropped whole, since a line in it may be a wanted sample."""
    heads: tuple[str, ...] = ()
    """A wanted family's sample names as a line starts with them (`x_total{`, `x_total `, `x_bucket{`...): its
    block is kept whole only when every line starts with one (`x_totax{...}` is another family's sample for
    prometheus_client, and its labels must not reach the mapping, a fuzz finding)."""


class _Selection:
    def __init__(self, wanted: frozenset[str], prefix: str) -> None:
        self.wanted = wanted
        self.exposed = exposed(wanted)
        self.in_order = tuple(sorted(self.exposed))
        engine = prefix.rstrip(":")
        self.prefixes = (engine + ":", engine + "_") if engine in ENGINE_PREFIXES else (prefix,) if prefix else ()
        self.families: dict[str, _Family] = {}
        """Header line -> decision: the same page comes back every poll, so each header is read once."""

    def family(self, header: str) -> _Family:
        parts = header.split(None, 2)
        if len(parts) < 2 or parts[0] not in ("HELP", "TYPE"):
            return _Family(False, None, False)
        name = parts[1]
        wanted = name in self.exposed
        stem = name.removesuffix("_total") or None
        shadows = not wanted and stem is not None and _begins_one(self.in_order, stem)
        heads: tuple[str, ...] = ()
        if wanted and stem is not None:
            heads = tuple(  # `x_total` too: prometheus_client reads it in a gauge's block (as its own family)
                sorted(
                    {  # a set: `x` + `_total` is also `x_total` itself, and a line must be counted once
                        w + total + end
                        for w in self.exposed
                        if w.startswith(stem)
                        for total in ("", "_total")
                        for end in ("{", " ")
                    }
                )
            )
        return _Family(wanted, stem, name.startswith(self.prefixes), shadows, heads)


def _begins_one(names: tuple[str, ...], stem: str) -> bool:
    """Whether one of the sorted `names` starts with `stem`: those that do follow `stem` itself in order, so
    the first name at or after it says (a search, not a scan of every wanted name for each of a page's ~180
    HELP/TYPE lines: 15,000 generator steps in a 32-engine console's launch)."""
    at = bisect.bisect_left(names, stem)
    return at < len(names) and names[at].startswith(stem)


@functools.lru_cache(maxsize=64)
def _selection(wanted: frozenset[str], prefix: str) -> _Selection:
    return _Selection(wanted, prefix)


def _each_line(selection: _Selection, text: str, keep: list[str], counts: list[int], bad: list[str]) -> None:
    """The careful path, a line at a time: counts[0] sample lines, counts[1] with the engine's prefix."""
    for raw in text.split("\n"):  # as prometheus_client splits a page (see prom._fast)
        line = raw.strip()
        if not line:
            continue
        if line[0] == "#":
            parts = line.split(None, 3)
            if len(parts) >= 3 and parts[1] in ("HELP", "TYPE") and normalise_name(parts[2]) in selection.wanted:
                keep.append(line)
            continue
        match = _SAMPLE_LINE.match(line)
        if match is None:
            bad.append(line)
            continue
        counts[0] += 1
        name = match.group(0)
        if selection.prefixes and name.startswith(selection.prefixes):
            counts[1] += 1
        if normalise_name(name) in selection.wanted:
            keep.append(line)


def _all_wanted(body: str, count: int, family: _Family) -> bool:
    """Every one of a wanted block's `count` lines starts with one of its sample names (C-level counts)."""
    lines = "\n" + body
    return sum(lines.count("\n" + head) for head in family.heads) == count


def select_lines(text: str, wanted: frozenset[str], prefix: str = "") -> Selected:
    """Keep only the samples (and their HELP/TYPE lines) a collector reads, before the real parser runs.

    A vLLM page holds ~90 families and a collector needs ~15: selecting first makes parsing several
    times cheaper, which matters when one console polls many engines. The page is cut at its comment
    lines and handled a family at a time: when every line after a HELP/TYPE line starts with the
    family's name, the block is counted and kept or dropped whole (str.count and a slice, in C), and
    only a block that does not is read line by line (measured on a 58 KB vLLM page: ~6x cheaper than
    a Python loop over its 637 lines, benchmarks/collect_bench.py). Lines that cannot be samples at
    all are counted, so a page of garbage is still reported as garbage.
    """
    if "\r" in text:
        text = text.replace("\r\n", "\n")
    selection = _selection(wanted, prefix)
    families = selection.families
    if len(families) > 20_000:
        families.clear()
    keep: list[str] = []
    counts = [0, 0]
    bad: list[str] = []
    pieces = text.rstrip("\n").split("\n#")
    if pieces[0].startswith("#"):
        pieces[0] = pieces[0][1:]
    else:
        _each_line(selection, pieces.pop(0), keep, counts, bad)
    in_wanted = False
    for piece in pieces:
        cut = piece.find("\n")
        header, body = (piece, "") if cut < 0 else (piece[:cut], piece[cut + 1 :])
        family = families.get(header)
        if family is None:
            family = families[header] = selection.family(header)
        if family.wanted:
            keep.append("#" + header)
        elif in_wanted and family.stem is not None:
            # Another family's HELP/TYPE line ends the wanted family before it for prometheus_client (a family
            # opened again later is then a new one, typed anew): keep that one header, its samples still dropped.
            keep.append("#" + header)
        if family.stem is not None:  # a plain comment ends no family
            in_wanted = family.wanted
        if not body:
            continue
        stem = family.stem
        if stem is not None and not family.shadows and body.startswith(stem):
            count = body.count("\n") + 1
            if body.count("\n" + stem) == count - 1 and (not family.wanted or _all_wanted(body, count, family)):
                counts[0] += count
                if family.prefixed:
                    counts[1] += count
                if family.wanted:
                    keep.append(body)
                continue
        _each_line(selection, body, keep, counts, bad)
    return Selected("\n".join(keep) + "\n", counts[0], counts[1], len(bad), bad[0][:120] if bad else None, tuple(bad))
