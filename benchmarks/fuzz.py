"""Fuzz every parser poolconsole reads the outside world with (issue 35, deliverable 2), run by hand:

    .venv/bin/python benchmarks/fuzz.py --count 1000000            # every target, a million inputs each
    .venv/bin/python benchmarks/fuzz.py --seconds 20 --target prom  # one target for 20 s

Inputs are mutated real captures (tests/fixtures/real/ and the project's own fixtures) and random bytes: bit
flips, splices of two captures, truncations, duplications, windows of a few lines, numbers replaced by -1,
1e308, NaN, Inf, huge ints and the like, hostile tokens, runs repeated thousands of times. A crash is an
exception other than the parser's documented error (ParseError, ConfigError), an input slower than
--hang-seconds, or a broken invariant of the target (a negative or non-finite value in the model, a terminal
escape in a cleaned log line, a webhook body that is not JSON with Alertmanager's keys, a fast-path parse
that disagrees with prometheus_client's). Per target it prints the inputs run, the crashes and the slowest
input (its time and size). Exit status 1 when any target crashed.

Seeds have a maximum length, as libFuzzer's `-max_len` (`--max-len`, 8 KiB by default) for the targets that
read a format a cut can keep whole (fuzz_excerpts.py): Prometheus pages (prom, prom_diff, vllm, sglang,
llamacpp, litellm_metrics) are cut between whole metric families, logs between lines, hosts.toml between
tables. Mutations may grow an excerpt to `--max-grow` (16 KiB). Whole seeds stay: each is tried once as it is
before any mutation, and one input in a thousand (`--whole-seeds 0.001`) mutates a whole seed, which may grow
to 256 KiB (so a parse quadratic in its input still shows). `--max-len 0` mutates whole seeds only, as
before (a 260 KB page costs milliseconds: the page targets ran at 66-1,300 inputs/s that way). The small
targets (JSON, CSV, meminfo, notify) keep whole seeds: their seeds are small, and no cut keeps JSON whole.

No engine, host or network is touched. The parts: fuzz_seeds.py (which captures), fuzz_excerpts.py (seeds cut to
--max-len), fuzz_mutate.py (the mutation engine, this project's own: atheris needs clang to build),
fuzz_targets.py (each parser and its invariants), fuzz_diff.py (the differential against prometheus_client);
this file drives them.
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import sys
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.fuzz_diff import differences  # noqa: E402
from benchmarks.fuzz_excerpts import Excerpts  # noqa: E402
from benchmarks.fuzz_mutate import NUMBER, Mutator  # noqa: E402
from benchmarks.fuzz_targets import Target, Violation, targets  # noqa: E402

MAX_LEN = 8 * 1024
"""The longest excerpt of a seed for a target that declares its unit (`--max-len`; 0 mutates whole seeds)."""
MAX_GROWN = 16 * 1024
"""How far mutations may grow an excerpt (`--max-grow`). The page parsers read a line that does not parse
through prometheus_client, at ~40 us a line: a 64 KiB cap spent 60 % of the time on the 6 % of inputs past
16 KiB. Quadratic parsing still shows on a run repeated to 16 KiB, and on the whole seeds below."""
WHOLE_SEEDS = 0.001
"""The share of inputs mutated from a whole seed rather than an excerpt (`--whole-seeds`); these may grow up
to the target's max_input. At 1 % the whole pages (to 260 KB) took a third of the page targets' time; at
0.1 % a million inputs still mutate a thousand whole pages, for ~4 % of the time."""


class Hang(BaseException):
    """An input ran past --hang-seconds. A BaseException: a parser's `except Exception` does not swallow it."""


# -- the driver -----------------------------------------------------------------------------------------------------


@dataclass
class Result:
    target: str
    inputs: int = 0
    crashes: int = 0
    seconds: float = 0.0
    slowest_s: float = 0.0
    slowest_size: int = 0
    examples: list[str] = field(default_factory=list)
    crash_inputs: list[bytes] = field(default_factory=list)


def _alarm(signum: int, frame: FrameType | None) -> None:
    raise Hang()


@dataclass(frozen=True)
class Cuts:
    """How a target's seeds are cut and how far mutations may grow them (libFuzzer's `-max_len`)."""

    max_len: int = MAX_LEN
    """The longest excerpt of a seed; 0: whole seeds, as before excerpts (and for a target without a unit)."""
    max_grow: int = MAX_GROWN
    """The longest mutated excerpt (never more than the target's max_input)."""
    whole: float = WHOLE_SEEDS
    """The share of inputs mutated from a whole seed."""


def inputs(target: Target, seed: int, cuts: Cuts = Cuts()) -> Iterator[bytes]:
    seeds = target.seeds()
    if target.unit is None or cuts.max_len <= 0:
        mutator = Mutator(seeds, random.Random(seed))
        cap = target.max_input
        fixed: list[bytes] = []
    else:
        excerpts = Excerpts(seeds, target.unit, cuts.max_len)
        grow_to = max(cuts.max_grow, cuts.max_len)
        mutator = Mutator(seeds, random.Random(seed), excerpts, cuts.whole, grow_to)
        cap = target.max_input  # an input from a whole seed may grow up to it; an excerpt up to grow_to
        fixed = excerpts.fixed()
    yield from seeds  # every seed once, as it is
    yield from fixed  # and every seed in excerpts, once
    while True:
        yield mutator()[:cap]


def run_target(
    target: Target,
    count: int | None = None,
    seconds: float | None = None,
    seed: int = 0,
    hang_s: float = 10.0,
    keep: int = 5,
    cuts: Cuts = Cuts(),
) -> Result:
    """Fuzz one target until `count` inputs or `seconds` have passed (whichever comes first)."""
    result = Result(target.name)
    use_alarm = hang_s > 0 and hasattr(signal, "setitimer")
    if use_alarm:
        previous = signal.signal(signal.SIGALRM, _alarm)
    started = time.perf_counter()
    target.reset()
    try:
        for data in inputs(target, seed, cuts):
            if count is not None and result.inputs >= count:
                break
            if seconds is not None and time.perf_counter() - started >= seconds:
                break
            if result.inputs % 500 == 499:
                target.reset()
            result.inputs += 1
            t0 = time.perf_counter()
            failure: str | None = None
            if use_alarm:
                signal.setitimer(signal.ITIMER_REAL, hang_s)
            try:
                target.run(data)
            except Hang:
                failure = f"Hang: more than {hang_s} s"
            except target.documented:
                pass
            except Exception as exc:  # what the fuzzer is here to find
                where = traceback.extract_tb(exc.__traceback__)[-1]
                failure = f"{type(exc).__name__}: {exc} (at {Path(where.filename).name}:{where.lineno})"
            finally:
                if use_alarm:
                    signal.setitimer(signal.ITIMER_REAL, 0)
            took = time.perf_counter() - t0
            if took > result.slowest_s:
                result.slowest_s, result.slowest_size = took, len(data)
            if failure is not None:
                result.crashes += 1
                if len(result.examples) < keep:
                    result.examples.append(f"{failure[:300]} <- {data[:200]!r} ({len(data)} bytes)")
                    result.crash_inputs.append(data)
    finally:
        if use_alarm:
            signal.signal(signal.SIGALRM, previous)
    result.seconds = time.perf_counter() - started
    return result


def main(argv: list[str] | None = None) -> int:
    every = targets()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--target", action="append", choices=sorted(every), help="one target (repeatable); default all")
    parser.add_argument("--count", type=int, help="inputs per target")
    parser.add_argument("--seconds", type=float, help="seconds per target")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--hang-seconds", type=float, default=10.0, help="an input slower than this is a crash")
    parser.add_argument(
        "--max-len", type=int, default=MAX_LEN, help="longest seed excerpt in bytes (0: whole seeds, no excerpts)"
    )
    parser.add_argument("--max-grow", type=int, default=MAX_GROWN, help="longest mutated excerpt in bytes")
    parser.add_argument("--whole-seeds", type=float, default=WHOLE_SEEDS, help="share of inputs from whole seeds")
    parser.add_argument("--crash-dir", type=Path, help="write each crashing input there")
    parser.add_argument("--json", type=Path, help="write the results there as JSON")
    parser.add_argument("--list", action="store_true", help="list the targets")
    args = parser.parse_args(argv)
    if args.list:
        for t in every.values():
            print(f"{t.name:16} {t.what}")
        return 0
    if args.count is None and args.seconds is None:
        args.seconds = 10.0
    chosen = [every[n] for n in (args.target or every)]
    print(f"{'target':16} {'inputs':>10} {'crashes':>8} {'slowest':>10} {'its size':>10} {'inputs/s':>9}", flush=True)
    results: list[Result] = []
    for target in chosen:
        cuts = Cuts(args.max_len, args.max_grow, args.whole_seeds)
        result = run_target(target, args.count, args.seconds, args.seed, args.hang_seconds, cuts=cuts)
        results.append(result)
        rate = result.inputs / result.seconds if result.seconds else 0.0
        print(
            f"{result.target:16} {result.inputs:>10,} {result.crashes:>8,} {result.slowest_s * 1000:>8.1f}ms "
            f"{result.slowest_size:>10,} {rate:>9,.0f}",
            flush=True,
        )
        for example in result.examples:
            print(f"    crash: {example}", flush=True)
        if args.crash_dir is not None:
            args.crash_dir.mkdir(parents=True, exist_ok=True)
            for i, data in enumerate(result.crash_inputs):
                (args.crash_dir / f"{result.target}-{args.seed}-{i}.bin").write_bytes(data)
    if args.json is not None:
        rows = [
            {k: v for k, v in vars(r).items() if k != "crash_inputs"}
            | {"seed": args.seed, "count": args.count, "max_len": args.max_len}
            for r in results
        ]
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 1 if any(r.crashes for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["NUMBER", "Cuts", "Mutator", "Target", "Violation", "differences", "inputs", "main", "run_target", "targets"]
