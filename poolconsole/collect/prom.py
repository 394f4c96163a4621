"""Prometheus text exposition -> flat samples, on prometheus_client's parser.

Two surprises of that parser are normalised here (shared/reference/telemetry-formats.md section 0):
counter families lose or gain `_total`, so callers match on *sample* names; `_created` samples are
timestamps, dropped. Re-exporters that rewrite `vllm:` to `vllm_` are mapped back to the colon form.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

from poolconsole.collect.prom_select import Selected, normalise_name, select_lines


class ParseError(ValueError):
    """The body is not Prometheus text (HTML, JSON, garbage, a line cut in half)."""


@dataclass(frozen=True, slots=True)
class Sample:
    name: str
    labels: tuple[tuple[str, str], ...]
    value: float

    def label(self, key: str) -> str | None:
        return label_value(self.labels, key)


def label_value(labels: tuple[tuple[str, str], ...], key: str) -> str | None:
    for k, v in labels:
        if k == key:
            return v
    return None


def decode(body: bytes | str) -> str:
    """The page as text; ParseError when it is plainly not Prometheus text (HTML, JSON, binary)."""
    text = body.decode("utf-8", errors="replace") if isinstance(body, bytes) else body
    stripped = text.lstrip()
    if stripped.startswith("<"):
        raise ParseError("got an HTML/XML page where Prometheus text was expected (a proxy or error page?)")
    if stripped.startswith("{") or stripped.startswith("["):
        raise ParseError("got JSON where Prometheus text was expected")
    if stripped.startswith('"'):
        # llama.cpp builds around b7010-b7100 served /metrics JSON-escaped inside quotes (llama.cpp #17384).
        try:
            decoded = json.loads(stripped)
        except ValueError:
            raise ParseError("body starts with a quote but is not a JSON string") from None
        if not isinstance(decoded, str):
            raise ParseError("got JSON where Prometheus text was expected")
        text = decoded
    if "\x00" in text:
        raise ParseError("body contains NUL bytes: not Prometheus text")
    return text


def check_whole(text: str) -> None:
    """ParseError when a page ends mid-line. Prometheus text ends every line, the last one included, with
    a line feed: a page that does not was cut short in a way its HTTP framing did not tell (read to the
    connection's close, or a proxy's cut buffer). Its last line may still parse (a value cut from 1234 to
    12), and the samples missing after it read as a counter reset: a phantom restart and rate."""
    if text and text[-1] != "\n":
        raise ParseError("page cut mid-line: its last line has no line break (a truncated response)")


@dataclass(frozen=True)
class Exposition:
    samples: list[Sample]
    bad_lines: int = 0
    first_bad: str | None = None
    total_lines: int | None = None
    """Sample lines on the page before selection (None when nothing was selected)."""
    prefixed_lines: int | None = None
    """Sample lines carrying the engine's prefix (vllm:, sglang:, llamacpp:) before selection."""


def _strict(text: str) -> list[Sample]:
    from prometheus_client.parser import text_string_to_metric_families  # the fallback: not at start-up

    samples: list[Sample] = []
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name.endswith("_created"):
                continue
            samples.append(Sample(normalise_name(s.name), tuple(sorted(s.labels.items())), _float(s.value)))
    return samples


def _float(value: float) -> float:
    """prometheus_client's int past a float's range (float() raised OverflowError, a fuzz finding) reads as
    the infinity float() of its text gives, as on the fast path."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


_FAST_SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?[ \t]+(\S+)(?:[ \t]+-?\d+)?$")
_FAMILY_SAMPLES = {"summary": ("_count", "_sum", ""), "histogram": ("_count", "_sum", "_bucket")}
"""The sample names of a family by its type, after its name (any other type: the name alone)."""
_FAST_LABEL = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*(?:,|$)')


def _unescape(value: str) -> str:
    if "\\" not in value:
        return value
    return value.replace("\\\\", "\x00").replace('\\"', '"').replace("\\n", "\n").replace("\x00", "\\")


@functools.lru_cache(maxsize=16384)
def _labels(raw: str) -> tuple[tuple[str, str], ...] | None:
    """One label set, sorted; None when it is not well formed. Cached: an engine's pages repeat the same
    label sets poll after poll, so each is read once."""
    labels: list[tuple[str, str]] = []
    end = 0
    while end < len(raw):
        # Each label anchored where the last one ended: a search (finditer) retried the pattern from every
        # position of a label set that is not one, quadratic (80 KB of `a=QwenQwen...` took over 10 s).
        label = _FAST_LABEL.match(raw, end)
        if label is None:
            return None
        labels.append((label.group(1), _unescape(label.group(2))))
        end = label.end()
    labels.sort()
    return tuple(labels)


Head = tuple[str, tuple[tuple[str, str], ...]]
"""(normalised name, or "" for a `_created` sample; sorted labels)."""
_HEADS: dict[str, Head] = {}
"""Sample line up to its value -> its Head: an engine's pages repeat their series poll after poll."""
HEADS_KEPT = 50_000
_HEAD = re.compile(r"([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?")


def _known(name: str, raw_labels: str | None) -> Head | None:
    labels = _labels(raw_labels) if raw_labels else ()
    if labels is None:
        return None
    return ("" if name.endswith("_created") else normalise_name(name), labels)


def _head(head: str) -> Head | None:
    """A sample line up to its value (`name{labels}`), read once and then looked up; None when it is
    not a well-formed sample head."""
    known = _HEADS.get(head)
    if known is None:
        match = _HEAD.fullmatch(head)
        known = _known(match[1], match[2]) if match else None
        if known is not None:
            if len(_HEADS) > HEADS_KEPT:
                _HEADS.clear()
            _HEADS[head] = known
    return known


class _Comment(NamedTuple):
    """What a `#` line tells the fast path: the family a HELP or TYPE line opens (None: a plain comment), and
    for a TYPE line whether it says counter and the sample names its type gives the family."""

    family: str | None
    counter: bool = False
    samples: tuple[str, ...] | None = None


_COMMENTS: dict[str, _Comment | None] = {}
"""A `#` line -> what it tells, None for one the fast path leaves to prometheus_client: a page repeats its HELP
and TYPE lines poll after poll, so each is read once (a page's first read spent half its time on them)."""
_PLAIN = _Comment(None)
_UNREAD = _Comment(None)
"""Not in _COMMENTS yet (None there is a line the fast path refuses)."""


def _read_comment(line: str) -> _Comment | None:
    parts = line.split(None, 3)
    if len(parts) <= 2 or parts[1] not in ("HELP", "TYPE"):
        return _PLAIN
    if '"' in line[: len(line) - len(parts[3])] if len(parts) > 3 else '"' in line:
        return None  # a quote before the help text: prometheus_client splits such a line otherwise
    if line != line.strip() or (parts[1] == "TYPE" and len(parts) < 4):
        return None  # spaces around the line, a TYPE without its type
    if parts[1] == "HELP":
        return _Comment(parts[2])
    samples = tuple(parts[2] + end for end in _FAMILY_SAMPLES.get(parts[3], ("",)))
    return _Comment(parts[2], parts[3] == "counter", samples)


def _comment(line: str) -> _Comment | None:
    known = _COMMENTS.get(line, _UNREAD)
    if known is _UNREAD:
        if len(_COMMENTS) > HEADS_KEPT:
            _COMMENTS.clear()
        known = _COMMENTS[line] = _read_comment(line)
    return known


def _fast(text: str) -> list[Sample] | None:
    """The selected lines of a well-formed page, read with two regular expressions; None as soon as a
    line is anything unusual, and prometheus_client's parser reads the page instead. Measured: the
    library spends ~150 us per sample in its character-by-character label scanner, which made parsing
    most of a 72-engine console's CPU (benchmarks/collect_bench.py prints both side by side)."""
    samples: list[Sample] = []
    family, counter = "", False
    allowed: tuple[str, ...] = ("",)
    named: list[int] = []
    """The family a HELP or TYPE line opened, whether its last TYPE says counter (prometheus_client types a
    family when it ends, so a later TYPE line of the same name decides), the sample names it holds, and its
    samples: when it ends a counter whose name lacks `_total`, every one of them gains it (prometheus_client's
    OpenMetrics form, `_bucket_total` too for a histogram retyped counter). A sample of another name ends the
    family (it is a family of its own, untyped)."""

    def close() -> None:
        if counter and not family.endswith("_total"):
            for i in named:
                samples[i] = Sample(samples[i].name + "_total", samples[i].labels, samples[i].value)
        named.clear()

    for line in text.split("\n"):  # lines end at \n alone, as prometheus_client reads them (splitlines() also
        # ends one at \x0b, \x0c, \x1c-\x1e, \x85, \u2028: a fuzz finding, such a byte in a label or HELP text)
        if not line:
            continue
        if line[0] == "#":
            comment = _comment(line)
            if comment is None:
                return None
            if comment.family is not None:
                if comment.family != family:
                    close()
                    family, counter, allowed = comment.family, False, (comment.family,)
                if comment.samples is not None:
                    counter, allowed = comment.counter, comment.samples
            continue
        head, _, raw_value = line.rpartition(" ")
        known = _head(head)
        if known is None:  # tabs, a timestamp after the value
            match = _FAST_SAMPLE.match(line)
            known = _known(match[1], match[2]) if match else None
            if match is None or known is None:
                return None
            head, raw_value = match[1], match[3]
        try:
            value = float(raw_value)
        except ValueError:
            return None
        if family:
            # The name as the line spells it: a well-formed head's all before its `{` (a name has no `{`);
            # a str method, not a regular expression per sample line (the first poll of a page parses every line)
            if head.partition("{")[0] not in allowed:
                close()
                family, counter, allowed = "", False, ("",)
            elif known[0]:
                named.append(len(samples))
        if known[0]:
            samples.append(Sample(known[0], known[1], value))
    close()
    return samples


def sample_heads(heads: Iterable[str]) -> list[Head] | None:
    """Sample lines up to their value -> their Heads; None when one of them is not well formed."""
    out = []
    for head in heads:
        known = _head(head)
        if known is None:
            return None
        out.append(known)
    return out


def _lenient(text: str) -> Exposition:
    """Line by line: keep every sample that parses, count the lines that do not."""
    samples: list[Sample] = []
    bad = 0
    first_bad: str | None = None
    for raw in text.split("\n"):  # as prometheus_client splits a page (see _fast)
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        try:
            samples.extend(_strict(line + "\n"))
        except Exception:
            bad += 1
            first_bad = first_bad or line[:120]
    return Exposition(samples, bad, first_bad)


def _unread(selected: Selected) -> bool:
    """More lines that cannot be samples are read by no parser than there are sample lines (garbage). A fuzz
    finding: prometheus_client does not check a name before `{`, so `\\ufffd{k=""} 0` is a sample to it (still a
    bad line here). Only such lines are asked (~40 us each), until the answer is known."""
    sample_lines, unread, left = selected.lines, 0, len(selected.bad)
    for line in selected.bad:
        left -= 1
        if "{" in line and _read(line):
            sample_lines += 1
        else:
            unread += 1
        if unread > sample_lines + left or unread + left <= sample_lines:
            break  # the answer is known
    return unread > sample_lines + left


def _read(line: str) -> bool:
    try:
        return _strict(line + "\n") is not None
    except Exception:  # the third-party parser raises ValueError, IndexError, KeyError...
        return False


def parse_exposition(body: bytes | str, wanted: frozenset[str] | None = None, prefix: str = "") -> Exposition:
    """Every sample in a Prometheus text page (only the `wanted` names when given).

    A page with a few broken lines (a truncated last line, a stray log line) keeps its good samples
    and reports how many lines were dropped. Raises ParseError, and only ParseError, when nothing
    usable is left.
    """
    text = decode(body)
    bad, first_bad, total, prefixed = 0, None, None, None
    if wanted is not None:
        selected = select_lines(text, wanted, prefix)
        text, bad, first_bad = selected.text, selected.bad_lines, selected.first_bad
        total, prefixed = selected.lines, selected.prefixed
        if bad and bad > selected.lines and _unread(selected):
            raise ParseError(f"not Prometheus text: {bad} lines cannot be samples (first: {first_bad!r})")
    fast = _fast(text) if wanted is not None else None
    if fast is not None:
        return Exposition(fast, bad, first_bad, total, prefixed)
    try:
        result = Exposition(_strict(text), bad, first_bad)
    except Exception:  # the third-party parser raises ValueError, IndexError, KeyError...
        lenient = _lenient(text)
        result = Exposition(lenient.samples, lenient.bad_lines + bad, first_bad or lenient.first_bad)
        if wanted is None and not result.samples:
            raise ParseError(f"not valid Prometheus text (first bad line: {result.first_bad!r})") from None
        if result.bad_lines > max(len(result.samples), total or 0):
            raise ParseError(
                f"not Prometheus text: {result.bad_lines} lines do not parse, {len(result.samples)} do "
                f"(first bad line: {result.first_bad!r})"
            ) from None
    if total is not None:
        return Exposition(_asked(result.samples, wanted), result.bad_lines, result.first_bad, total, prefixed)
    return result


def _asked(samples: list[Sample], wanted: frozenset[str] | None) -> list[Sample]:
    """prometheus_client names a sample by all before its `{`, unchecked: `vllm:x\\x1fd{model_name="y"} 1` is no
    wanted sample (a fuzz finding: its label read as a served model). The fast path's names are checked."""
    if wanted is None:
        return samples
    return [s for s in samples if s.name in wanted or s.name.removesuffix("_total") in wanted]


def by_name(samples: Iterable[Sample]) -> dict[str, list[Sample]]:
    index: dict[str, list[Sample]] = {}
    for s in samples:
        index.setdefault(s.name, []).append(s)
    return index
