"""The mutation engine of benchmarks/fuzz.py: random mutations of a seed corpus, stacked one to four deep (its own:
atheris needs clang to build)."""

from __future__ import annotations

import random
import re

from benchmarks.fuzz_excerpts import Excerpts

MAX_INPUT = 256 * 1024
"""The largest mutated input of a target fuzzed from whole seeds: a real /metrics page is ~60 KB; repeats may
grow one up to this."""

NUMBERS = [
    b"-1", b"0", b"-0", b"1", b"-5", b"1e308", b"-1e308", b"1.7976931348623157e308", b"5e-324", b"1e-320",
    b"NaN", b"nan", b"+Inf", b"-Inf", b"inf", b"Infinity", b"-Infinity", b"1e999", b"9" * 400, b"1" + b"0" * 5000,
    b"18446744073709551616", b"-9223372036854775809", b"4294967296", b"1_000", b"0x10", b"1e", b".", b"-",
    b"+1", b"00012", b"1.5e+3", b"2.5", b"true", b"null",
]  # fmt: skip
TOKENS = [
    b"", b'"', b"\\", b'\\"', b"\\n", b"{", b"}", b"[", b"]", b"#", b"# TYPE ", b"# HELP ", b"\n", b"\r\n", b"\r",
    b"\x00", b"\xff", b"\xc3", b"\t", b",", b"=", b" ", b":", b"_total", b"_bucket", b'le="', b"\xe2\x80\xa8",
    b"\x1b[2J", b"\x1b]0;x\x07", b"[N/A]", b"N/A", b"Not Supported", b"{}", b"[]", b'{"', b'":', b"\xf0\x9f\x98\x80",
    b"[[engines]]", b"[[hosts]]", b' = "', b"Bearer ", b"token=", b"--api-key ",
]  # fmt: skip
NUMBER = re.compile(rb"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|NaN|[-+]?Inf")


class Mutator:
    """Random mutations of a seed corpus, stacked one to four deep."""

    def __init__(
        self,
        seeds: list[bytes],
        rng: random.Random,
        excerpts: Excerpts | None = None,
        whole: float = 0.0,
        grow_to: int = MAX_INPUT,
    ) -> None:
        self.seeds = [s for s in seeds if s] or [b"x"]
        self.rng = rng
        self.excerpts = excerpts
        self.whole = whole
        """With excerpts: the share of inputs that start from a whole seed."""
        self.grow_to = grow_to
        """With excerpts: the longest an excerpt may grow (an input from a whole seed: MAX_INPUT)."""

    def _start(self) -> tuple[bytes, int]:
        """An input before mutation and how far it may grow: an excerpt of a seed where the target has them,
        else a seed (a large one mostly as a window of a few lines)."""
        rng = self.rng
        if self.excerpts is not None:
            if rng.random() < self.whole:
                return rng.choice(self.seeds), MAX_INPUT
            return self.excerpts(rng), self.grow_to
        data = rng.choice(self.seeds)
        if len(data) > 4096 and rng.random() < 0.7:
            data = self._window(data)
        return data, MAX_INPUT

    def _window(self, data: bytes) -> bytes:
        """A few consecutive lines of a large input (fast to parse: most inputs are small)."""
        lines = data.split(b"\n")
        start = self.rng.randrange(len(lines))
        return b"\n".join(lines[start : start + self.rng.randint(1, 40)]) + b"\n"

    def mutate_once(self, data: bytes) -> bytes:
        rng = self.rng
        n = len(data)
        op = rng.randrange(13)
        pos = rng.randint(0, n)
        if op == 0 and n:  # flip a bit
            i = rng.randrange(n)
            return data[:i] + bytes([data[i] ^ (1 << rng.randrange(8))]) + data[i + 1 :]
        if op == 1 and n:  # a random byte
            i = rng.randrange(n)
            return data[:i] + bytes([rng.randrange(256)]) + data[i + 1 :]
        if op == 2:  # insert random bytes
            return data[:pos] + rng.randbytes(rng.randint(1, 8)) + data[pos:]
        if op == 3 and n:  # delete a range
            end = min(n, pos + rng.randint(1, 64))
            return data[:pos] + data[end:]
        if op == 4:  # truncate
            return data[:pos]
        if op == 5 and n:  # duplicate a range
            start = rng.randrange(n)
            chunk = data[start : start + rng.randint(1, 256)]
            return data[:pos] + chunk + data[pos:]
        if op == 6:  # splice with another seed
            other = self.excerpts(rng) if self.excerpts is not None else rng.choice(self.seeds)
            return data[:pos] + other[rng.randint(0, len(other)) :]
        if op == 7:  # replace a number
            found = NUMBER.search(data, pos) or NUMBER.search(data)
            if found:
                return data[: found.start()] + rng.choice(NUMBERS) + data[found.end() :]
            return data[:pos] + rng.choice(NUMBERS) + data[pos:]
        if op == 8:  # a hostile token
            return data[:pos] + rng.choice(TOKENS) + data[pos:]
        if op == 9 and n:  # a run repeated many times (quadratic behaviour shows up here)
            start = rng.randrange(n)
            chunk = data[start : start + rng.randint(1, 8)] or b"-"
            return data[:pos] + chunk * rng.choice((64, 512, 4096, 20000)) + data[pos:]
        if op == 10 and n:  # swap two lines
            lines = data.split(b"\n")
            i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
            return b"\n".join(lines)
        if op == 11 and n:  # delete a line
            lines = data.split(b"\n")
            del lines[rng.randrange(len(lines))]
            return b"\n".join(lines)
        if op == 12 and n:  # duplicate a line (a repeated series, a second rank)
            lines = data.split(b"\n")
            i = rng.randrange(len(lines))
            lines.insert(rng.randrange(len(lines) + 1), lines[i])
            return b"\n".join(lines)
        return data + rng.choice(TOKENS)

    def __call__(self) -> bytes:
        rng = self.rng
        roll = rng.random()
        if roll < 0.04:
            return rng.randbytes(rng.randint(0, 512))
        if roll < 0.06:
            return bytes(rng.choice(b'{}[]",:#=\n \\0123456789.eE-+naif') for _ in range(rng.randint(0, 256)))
        data, limit = self._start()
        for _ in range(rng.randint(1, 4)):
            data = self.mutate_once(data)
            if len(data) > limit:
                data = data[:limit]
        return data
