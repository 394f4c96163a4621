"""How one poll is stored: compact JSON of its `status --json` fields (an engine's with its running totals),
deflated against a preset dictionary per target (that target's first payload, kept in the file): the field
names, URLs, model and GPU names repeat in every poll and cost almost nothing. benchmarks/store_bench.py
measures it against plain JSON and per-row zlib (README)."""

from __future__ import annotations

import dataclasses
import json
import math
import zlib
from collections.abc import Mapping
from typing import Any, Literal

import orjson

from poolconsole.model.hosts import HostSnapshot
from poolconsole.model.view import EngineView

Codec = Literal["dict", "zlib", "json"]
Kind = Literal["engine", "host"]


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def dumps(payload: dict[str, Any]) -> bytes:
    """Compact JSON; a non-finite number (which `status --json` could not print either) is stored as null, a
    key that is not a string as a string. orjson writes it in a 13th of json.dumps' time (1.1 against 14 us a
    poll of the 1,000-engine fleet's, the same bytes for 3,000 of 3,000; it writes 1e-7 where json writes
    1e-07, the same number); what it refuses (an integer past 64 bits) goes through json."""
    try:
        return orjson.dumps(payload, option=orjson.OPT_NON_STR_KEYS)
    except TypeError:
        return json.dumps(_finite(payload), separators=(",", ":"), allow_nan=False).encode()


def deflate(raw: bytes, zdict: bytes) -> bytes:
    """Raw deflate against a preset dictionary, with the smallest window that holds both (setting up a
    32 KiB window for a 1 KiB row cost more than the compression itself)."""
    wbits = max(9, min(15, (len(zdict) + len(raw)).bit_length()))
    packer = zlib.compressobj(6, zlib.DEFLATED, -wbits, 8, zdict=zdict)
    return packer.compress(raw) + packer.flush()


def inflate(blob: bytes, zdict: bytes) -> bytes:
    unpacker = zlib.decompressobj(-15, zdict=zdict)
    return unpacker.decompress(blob) + unpacker.flush()


def decode(blob: bytes, zdict: bytes | None) -> dict[str, Any]:
    """A stored row's payload: deflated against `zdict`, else plain JSON ('{'), else a zlib stream."""
    if zdict is not None:
        raw = inflate(blob, zdict)
    elif blob[:1] == b"{":
        raw = blob
    else:
        raw = zlib.decompress(blob)
    value = json.loads(raw)
    if not isinstance(value, dict):
        raise ValueError("a stored row is not a JSON object")
    return value


_ENGINE_FIELDS = tuple(f.name for f in dataclasses.fields(EngineView))


def payload(item: EngineView | HostSnapshot, totals: Mapping[str, float] | None) -> dict[str, Any]:
    """What one poll stores: the `status --json` fields, and for an engine its running totals."""
    doc = item.to_json()
    if isinstance(item, EngineView):
        doc["totals"] = dict(totals or {})
    return doc


def poll_json(item: EngineView | HostSnapshot, totals: Mapping[str, float] | None) -> bytes:
    """dumps(payload(...)), for an engine without the deep copy: EngineView.to_json is dataclasses.asdict,
    which copies every nested dict and list (72 us of the 114 a poll cost to encode); JSON of the fields as
    they are is the same text. A value that is itself a dataclass (none today) takes the copying path."""
    if isinstance(item, HostSnapshot):
        return dumps(payload(item, None))
    doc = {name: getattr(item, name) for name in _ENGINE_FIELDS}
    doc["totals"] = totals or {}
    try:
        return dumps(doc)
    except TypeError:
        return dumps(payload(item, totals))
