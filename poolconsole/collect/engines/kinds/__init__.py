"""One module per engine kind, named after the kind's value in hosts.toml (vllm.py for kind = "vllm"), each
with an `ADAPTER`: adding an engine kind is its module, its metric spec and its tests (and its EngineKind
member, which hosts.toml's validation needs). Found by name, so no table here lists the kinds."""

from __future__ import annotations

import importlib
from functools import cache

from poolconsole.collect.engines.kinds.base import Capability, EngineAdapter
from poolconsole.config.models import EngineKind

__all__ = ["Capability", "EngineAdapter", "adapter", "adapter_named", "adapters"]


@cache
def adapter(kind: EngineKind) -> EngineAdapter:
    """The adapter of one engine kind (its module is imported the first time it is asked for)."""
    found = importlib.import_module(f"{__name__}.{kind.value}").ADAPTER
    if not isinstance(found, EngineAdapter) or found.kind is not kind:
        raise TypeError(f"{__name__}.{kind.value}.ADAPTER is not the adapter of {kind.value!r}")
    return found


def adapter_named(kind: str) -> EngineAdapter | None:
    """The adapter of a kind given as its hosts.toml word (as stored and passed around); None for a word
    that names no kind."""
    return adapter(EngineKind(kind)) if kind in _WORDS else None


_WORDS = frozenset(kind.value for kind in EngineKind)


def adapters() -> tuple[EngineAdapter, ...]:
    """Every kind's adapter, in EngineKind's order."""
    return tuple(adapter(kind) for kind in EngineKind)
