"""Where the console's time goes, from a py-spy raw (collapsed) profile, in shares of the samples.

usage: python benchmarks/pyspy_shares.py PROFILE.txt [--top 15]

Reads `py-spy record -f raw` output (one line a stack: "frame;frame;... COUNT", root first, each frame
"function (path:line)") and prints three markdown tables:
- by poolconsole function: each sample goes to the innermost poolconsole frame of its stack (what the
  console was doing, library time under it included), or to "(outside poolconsole) <library of the leaf>";
- by library, self time: the library of each sample's leaf frame;
- by poolconsole function, inclusive: the share of samples with that function anywhere on the stack.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

FRAME = re.compile(r"^(?P<func>.*) \((?P<path>[^():]+)(?::(?P<line>\d+))?\)$")

LIBRARIES = [  # (label, substring of "/" + the frame's path), first match wins
    ("poolconsole", "/poolconsole/"),
    ("textual", "/textual/"),
    ("rich", "/rich/"),
    ("json", "/json/"),
    ("gc", "gc"),
    ("json", "orjson"),
    ("json", "msgspec"),
    ("aiohttp", "/aiohttp/"),
    ("aiohttp", "/yarl/"),
    ("aiohttp", "/multidict/"),
    ("httpx", "/httpx/"),
    ("httpx", "/httpcore/"),
    ("httpx", "/h11/"),
    ("httpx", "/anyio/"),
    ("sqlite", "sqlite3"),
    ("asyncio", "/asyncio/"),
    ("ssl/socket", "/ssl.py"),
    ("ssl/socket", "/socket.py"),
    ("selectors", "/selectors.py"),
    ("threading", "/threading.py"),
    ("concurrent.futures", "/concurrent/"),
    ("logging", "/logging/"),
    ("re", "/re/"),
    ("typing/dataclasses", "/typing.py"),
    ("typing/dataclasses", "/dataclasses.py"),
    ("weakref", "/weakref.py"),
    ("tomllib", "/tomllib/"),
    ("email/http", "/http/"),
    ("email/http", "/email/"),
]


def library(path: str) -> str:
    if not path:
        return "(no file: native)"
    if path.startswith("<"):
        return path  # "<string>": code made by exec, e.g. dataclasses' __init__ and __eq__
    path = "/" + path  # py-spy names frames relative to sys.path: "textual/app.py", "threading.py"
    for label, key in LIBRARIES:
        if key == "gc":
            continue
        if key in path:
            return label
    return path.strip("/").split("/", 1)[0].removesuffix(".py")


IDLE = re.compile(  # leaf frames that wait rather than run (py-spy's own idle test lets these through)
    r"^(_worker \(concurrent/futures/thread\.py:81\)|Condition\.wait \(threading\.py|Event\.wait \(threading\.py"
    r"|\w*Selector\.select \(selectors\.py|Queue\.get \(queue\.py)"
)


def idle(frames: list[tuple[str, str]], raw_leaf: str) -> bool:
    return bool(IDLE.match(raw_leaf))


def parse(text: str) -> list[tuple[list[tuple[str, str]], int, str]]:
    stacks = []
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        body, _, count = line.rpartition(" ")
        frames = []
        for part in body.split(";"):
            m = FRAME.match(part.strip())
            frames.append((m["func"], m["path"]) if m else (part.strip(), ""))
        stacks.append((frames, int(count), body.split(";")[-1].strip()))
    return stacks


def pc_name(func: str, path: str) -> str:
    module = ("/" + path).split("/poolconsole/", 1)[1].removesuffix(".py").replace("/", ".")
    return f"{module}.{func.split('.<locals>', 1)[0]}"  # comprehensions and closures count to their function


def table(title: str, counts: Counter[str], total: int, top: int) -> str:
    rows = [f"| {title} | share of samples |", "|---|---|"]
    rows += [f"| {name} | {100 * n / total:.1f} % |" for name, n in counts.most_common(top)]
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("profile", type=Path)
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()
    stacks = parse(args.profile.read_text())
    everything = sum(n for _, n, _ in stacks)
    busy = [(frames, n) for frames, n, raw in stacks if not idle(frames, raw)]
    total = sum(n for _, n in busy)
    owner: Counter[str] = Counter()
    leaf: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    modules: Counter[str] = Counter()
    for frames, n in busy:
        gc = any(f.startswith("<gc>") or "garbage collection" in f.lower() for f, _ in frames)
        leaf["gc" if gc else library(frames[-1][1])] += n
        pcs = [(f, p) for f, p in frames if "/poolconsole/" in "/" + p]
        if pcs:
            owner[pc_name(*pcs[-1]) + f" (→ {library(frames[-1][1])})"] += n
            modules[("/" + pcs[-1][1]).split("/poolconsole/", 1)[1].removesuffix(".py").replace("/", ".")] += n
        else:
            owner[f"(outside poolconsole) {library(frames[-1][1])}"] += n
        for name in {pc_name(f, p) for f, p in pcs}:
            inclusive[name] += n
    print(
        f"{args.profile}: {everything} samples, {total} on CPU (the rest waits: idle pool workers, the store's"
        f" and the writer's threads, select()); shares below are of the {total}\n"
    )
    print(table("innermost poolconsole function (→ library of the leaf)", owner, total, args.top), "\n")
    print(table("library of the leaf frame (self time)", leaf, total, args.top), "\n")
    print(table("innermost poolconsole module", modules, total, args.top), "\n")
    roots = {name for name, k in inclusive.items() if k > 0.75 * total}  # main(), run(): every stack has them
    print(
        table(
            "poolconsole function, inclusive",
            Counter({k: v for k, v in inclusive.items() if k not in roots}),
            total,
            args.top,
        )
    )


if __name__ == "__main__":
    main()
