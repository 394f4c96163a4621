"""The alerts firing, keyed by (target, rule) as before, and indexed by target as well (issue 39): an engine's
poll asks for its own alerts (`rules_of`) instead of walking every alert of the pool, which at 1,000 engines
was engines x alerts each tick (4.9 % of the console's samples in the profile).

A dict whose writes keep the index: whoever sets, deletes or clears alerts (the rules, the notifier's restored
state, a replay seeking back) keeps reading and writing it as the dict it was."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TypeVar, overload

_V = TypeVar("_V")
_D = TypeVar("_D")
Key = tuple[str, str]
"""(target, rule)."""


class ByTarget(dict[Key, _V]):
    def __init__(self, items: Mapping[Key, _V] | Iterable[tuple[Key, _V]] = ()) -> None:
        super().__init__()
        self._rules: dict[str, dict[str, None]] = {}
        """target -> its rules firing, in the order the dict holds them (so events come out in that order)."""
        self.update(items)

    def __reduce__(self) -> tuple[type[ByTarget[_V]], tuple[list[tuple[Key, _V]]]]:
        """Copied and pickled as its items, the index made again from them."""
        return type(self), (list(self.items()),)

    def __ior__(self, items: Mapping[Key, _V] | Iterable[tuple[Key, _V]]) -> ByTarget[_V]:  # type: ignore[override,misc]
        self.update(items)
        return self

    def rules_of(self, target: str) -> list[str]:
        """The rules firing for `target`, in the dict's order (a copy: the caller may clear them)."""
        found = self._rules.get(target)
        return list(found) if found else []

    def __setitem__(self, key: Key, value: _V) -> None:
        super().__setitem__(key, value)
        self._rules.setdefault(key[0], {})[key[1]] = None

    def __delitem__(self, key: Key) -> None:
        super().__delitem__(key)
        self._forget(key)

    def _forget(self, key: Key) -> None:
        rules = self._rules.get(key[0])
        if rules is not None:
            rules.pop(key[1], None)
            if not rules:
                del self._rules[key[0]]

    @overload
    def pop(self, key: Key, /) -> _V: ...
    @overload
    def pop(self, key: Key, default: _V, /) -> _V: ...
    @overload
    def pop(self, key: Key, default: _D, /) -> _V | _D: ...
    def pop(self, key: Key, *default: object) -> object:
        if key in self:
            value = super().pop(key)
            self._forget(key)
            return value
        return super().pop(key, *default)

    def popitem(self) -> tuple[Key, _V]:
        key, value = super().popitem()
        self._forget(key)
        return key, value

    def clear(self) -> None:
        super().clear()
        self._rules.clear()

    def setdefault(self, key: Key, default: _V, /) -> _V:
        if key not in self:
            self[key] = default
        return self[key]

    def update(self, items: Mapping[Key, _V] | Iterable[tuple[Key, _V]] = (), /) -> None:  # type: ignore[override]
        for key, value in items.items() if isinstance(items, Mapping) else items:
            self[key] = value
