"""Speculative decoding per workload (`poolconsole smoke ENGINE --workload code,chat,...`).

A draft model's acceptance depends on what is asked ("the draft only pays off when acceptances outweigh
draft cost"): each workload runs on its own, the engine's speculative-decoding counters read right before
and right after, so each gets its own acceptance rate, mean accepted length and tok/s. Other traffic in the
same window (the engine finished more requests than the run sent) is said, since its tokens are counted
too. The verdict names the workloads where speculative decoding pays and where it does not.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from poolconsole.collect.engines.spec_window import read_window, shared_window, spec_figures
from poolconsole.model.smoke import CheckResult
from poolconsole.model.units import NA
from poolconsole.ops.smoke.checks import Checker, Prompts
from poolconsole.ops.smoke.stream import level_stats

BUILTIN = ("code", "chat", "summarize", "json")
MAX_TOKENS = 128
"""Output tokens per request of a built-in workload: enough draft steps for a steady acceptance."""
KEEP_ACCEPTANCE = 0.5
"""Without an A/B measurement, the acceptance from which a workload is judged to gain (a rule of thumb:
with 3 draft tokens at 0.5 a step yields 2.5 tokens, more than drafting and verifying cost)."""


class WorkloadError(ValueError):
    """--workload names something that is neither built in nor a readable JSONL prompt set: every problem
    in words."""


@dataclass(frozen=True)
class Workload:
    name: str
    source: str
    """"built-in", or the JSONL file's path."""
    prompts: tuple[dict[str, Any], ...] = ()
    """A user's set: each line's request fields (messages, and max_tokens where given)."""


def load_jsonl(path: Path) -> Workload:
    """A prompt set: one JSON object a line with "prompt" (a string) or "messages" (chat messages), and
    optionally "max_tokens". Blank lines are skipped; every bad line is reported."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise WorkloadError(f"{path}: cannot read the prompt set: {exc}") from None
    prompts: list[dict[str, Any]] = []
    problems: list[str] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except ValueError as exc:
            problems.append(f"{path}:{number}: not JSON: {exc}")
            continue
        if not isinstance(item, dict):
            problems.append(f"{path}:{number}: not a JSON object")
            continue
        if isinstance(item.get("messages"), list) and item["messages"]:
            body: dict[str, Any] = {"messages": item["messages"]}
        elif isinstance(item.get("prompt"), str) and item["prompt"]:
            body = {"messages": [{"role": "user", "content": item["prompt"]}]}
        else:
            problems.append(f'{path}:{number}: needs "prompt" (a string) or "messages" (a list)')
            continue
        if "max_tokens" in item:
            if not isinstance(item["max_tokens"], int) or not 1 <= item["max_tokens"] <= 8192:
                problems.append(f"{path}:{number}: max_tokens must be a whole number from 1 to 8192")
                continue
            body["max_tokens"] = item["max_tokens"]
        prompts.append(body)
    if not prompts and not problems:
        problems.append(f"{path}: no prompt in the file")
    if problems:
        raise WorkloadError("\n".join(problems))
    return Workload(path.stem, str(path), tuple(prompts))


def parse_workloads(text: str) -> tuple[Workload, ...]:
    """NAME[,NAME...]: built-in names or paths of JSONL prompt sets."""
    out: list[Workload] = []
    problems: list[str] = []
    for name in (n.strip() for n in text.split(",")):
        if not name:
            continue
        if name in BUILTIN:
            out.append(Workload(name, "built-in"))
            continue
        path = Path(name).expanduser()
        if not path.is_file():
            problems.append(f"{name!r} is neither a built-in workload ({', '.join(BUILTIN)}) nor a JSONL file")
            continue
        try:
            out.append(load_jsonl(path))
        except WorkloadError as exc:
            problems.append(str(exc))
    if not out and not problems:
        problems.append(f"--workload names no workload (built in: {', '.join(BUILTIN)})")
    if problems:
        raise WorkloadError("\n".join(problems))
    return tuple(out)


# -- the built-in prompts, varied by the run's seed (a repeat run cannot ride the prefix cache) --------
_FUNCTIONS = (
    ("merge_intervals", "intervals", "Merge overlapping [start, end] intervals and return them sorted."),
    ("parse_duration", "text", "Parse durations such as '1h30m' or '45s' into seconds."),
    ("top_k_words", "text, k", "Return the k most frequent words, ties in alphabetical order."),
    ("flatten", "nested", "Flatten arbitrarily nested lists into one list."),
    ("chunked", "items, size", "Yield lists of at most size items, in order."),
    ("rolling_mean", "values, window", "Return the mean of each full window of values."),
)
_CHAT = (
    "I just got back from a week by the sea and I feel strangely tired.",
    "My neighbour's dog barks every morning at six.",
    "I am thinking about learning to play the cello at forty.",
    "We are planning a picnic but the forecast keeps changing.",
    "A friend asked me to be the best man at his wedding.",
)
_ASK = (
    "What would you do in my place?",
    "Any thoughts?",
    "How should I feel about it?",
    "What would you say to them?",
)
_FACTS = (
    "The harbor town grew around a fish market that opened before dawn.",
    "Its merchants traded salt, amber and timber with ports across the northern sea.",
    "A storm in the spring of that year flooded the lower streets and closed the market for a month.",
    "The council borrowed money to build a stone sea wall along the old quay.",
    "Work on the wall took three summers and employed most of the town's young men.",
    "When it was finished, ships could unload in any weather and trade doubled within a decade.",
    "The debt was repaid early, and the surplus paid for a school and a lighthouse.",
    "Today the wall is a promenade, and the market still opens before dawn.",
)
_PEOPLE = ("Ada Lind", "Tomas Berg", "Mira Kovac", "Jon Ellis", "Sara Holm")
_CITIES = ("Bergen", "Lyon", "Porto", "Gdansk", "Turku")


def builtin_prompt(name: str, prompts: Prompts) -> str:
    rng = prompts.rng
    nonce = f"[run {prompts.seed}-{rng.randrange(10**6)}]"
    if name == "code":
        fn, args, doc = rng.choice(_FUNCTIONS)
        return (
            f"{nonce} Complete this Python function. Reply with the code only.\n"
            f'```python\ndef {fn}({args}):\n    """{doc}"""\n```'
        )
    if name == "summarize":
        passage = " ".join(rng.sample(_FACTS, len(_FACTS)))
        return f"{nonce} Summarize the following passage in three sentences.\n\n{passage}"
    if name == "json":
        person, city, year = rng.choice(_PEOPLE), rng.choice(_CITIES), rng.randrange(1950, 2024)
        return (
            f"{nonce} Extract the person's name, city and year as JSON with the keys name, city, year. "
            f"Text: {person} moved to {city} in {year} and opened a bakery there."
        )
    return f"{nonce} {rng.choice(_CHAT)} {rng.choice(_ASK)}"


def bodies(workload: Workload, model: str, prompts: Prompts, requests: int) -> list[dict[str, Any]]:
    """`requests` streaming chat bodies of the workload (a user's set in order, repeated as needed)."""
    out = []
    for i in range(requests):
        if workload.prompts:
            fields = dict(workload.prompts[i % len(workload.prompts)])
        else:
            fields = {"messages": [{"role": "user", "content": builtin_prompt(workload.name, prompts)}]}
        out.append(
            {
                "model": model,
                "max_tokens": MAX_TOKENS,
                **fields,
                "temperature": 0,
                "stream": True,
                "stream_options": {"include_usage": True},
            }
        )
    return out


async def run_workload(
    checker: Checker, model: str, workload: Workload, concurrency: int, requests: int
) -> CheckResult:
    """One workload at one concurrency: counters, the timed requests, counters again."""
    target = checker.target
    kind = target.engine.kind.value
    async with httpx.AsyncClient(timeout=10.0, trust_env=False) as client:
        before = await read_window(client, target.base_url, kind, checker.headers)
        results, wall = await checker.timed(bodies(workload, model, checker.prompts, requests), concurrency)
        after = await read_window(client, target.base_url, kind, checker.headers)
    stats = level_stats(results, wall)
    figures = spec_figures(before, after) if not target.gateway else _through_gateway()
    shared = None if target.gateway else shared_window(before, after, requests, stats.output_tokens)
    failures = [r.reason for r in results if not r.ok]
    rate, length = figures["acceptance_rate"], figures["mean_accepted_length"]
    speed = (stats.tokens_per_s or {}).get("per_stream")
    words = [
        f"acceptance {rate:.2f}" if rate is not None else f"acceptance n/a ({figures['reason']})",
        *([f"mean accepted length {length:.2f}"] if length is not None else []),
        f"{speed:.1f} tok/s per stream" if speed is not None else "tok/s n/a",
    ]
    words += stats.resent_words()
    if failures:
        words.insert(0, f"{len(failures)}/{requests} requests failed: {failures[0]}")
    if shared:
        words.append(f"warning: {shared}")
    return CheckResult(
        target.name,
        model,
        f"workload:{workload.name}",
        not failures,
        "; ".join(words),
        concurrency=concurrency,
        requests=requests,
        **stats.figures(),
        details={"spec_decode": figures, "shared_window": shared, "source": workload.source, "wall_s": wall},
        workload=workload.name,
        spec_decode_acceptance_rate=rate,
    )


def _through_gateway() -> dict[str, Any]:
    return {
        "acceptance_rate": None,
        "mean_accepted_length": None,
        "source": None,
        "reason": "a gateway has no speculative-decoding counters: run the workload against the engine",
    }


# -- the verdict ----------------------------------------------------------------------------------------
def _speed(result: CheckResult) -> float | None:
    tps = result.output_tokens_per_s or {}
    return tps.get("per_stream") or tps.get("aggregate")


def verdict(results: list[CheckResult], without: dict[str, CheckResult] | None = None) -> dict[str, Any]:
    """Per workload (its first concurrency level) keep or not, in words: with `without` (the same workloads
    measured on a profile without speculative decoding, --ab) by the tok/s change, else by the acceptance
    against KEEP_ACCEPTANCE."""
    first: dict[str, CheckResult] = {}
    for r in results:
        if r.workload is not None and r.passed:
            first.setdefault(r.workload, r)
    keep: list[str] = []
    drop: list[str] = []
    unknown: list[str] = []
    rows = []
    for name, r in first.items():
        rate = r.spec_decode_acceptance_rate
        speed = _speed(r)
        base = without.get(name) if without else None
        base_speed = _speed(base) if base is not None else None
        change = (speed / base_speed - 1) * 100 if speed and base_speed else None
        if rate is None and change is None:
            unknown.append(name)
            reason = (r.details.get("spec_decode") or {}).get("reason")
            rows.append({"workload": name, "acceptance_rate": None, "keep": None, "reason": reason})
            continue
        gains = change > 0 if change is not None else rate is not None and rate >= KEEP_ACCEPTANCE
        figures = ", ".join(
            [f"{rate:.2f}" if rate is not None else NA] + ([f"{change:+.0f} %"] if change is not None else [])
        )
        (keep if gains else drop).append(f"{name} ({figures})")
        rows.append(
            {
                "workload": name,
                "acceptance_rate": rate,
                "mean_accepted_length": (r.details.get("spec_decode") or {}).get("mean_accepted_length"),
                "tokens_per_s": speed,
                "tokens_per_s_without": base_speed,
                "change_pct": round(change, 1) if change is not None else None,
                "keep": gains,
            }
        )
    # the first figure named says what it is: "code (acceptance 0.71, +38 % tok/s), json (0.66, ...)"
    named = keep or drop
    if named:
        named[0] = named[0].replace("(", "(acceptance ", 1).replace(" %)", " % tok/s)")
    parts = []
    if keep:
        parts.append("keep speculative decoding for: " + ", ".join(keep))
    if drop:
        parts.append("not for: " + ", ".join(drop))
    if unknown and not keep and not drop:
        reasons = {row["reason"] for row in rows if row.get("reason")}
        parts.append("; ".join(sorted(r for r in reasons if r)) or "speculative decoding not measured")
    elif unknown:
        parts.append("not measured: " + ", ".join(unknown))
    words = "; ".join(parts) or "no workload finished"
    if keep or drop:
        words += (
            " (tok/s against the profile without speculative decoding)"
            if without
            else f" (judged by acceptance against {KEEP_ACCEPTANCE:g}; --ab PROFILE measures tok/s without)"
        )
    return {"verdict": words, "workloads": rows, "ab": without is not None}
