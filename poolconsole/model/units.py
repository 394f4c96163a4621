"""Numbers as an operator reads them, with one rule for what is not known: "n/a", never 0.

Every layer that prints a value (the console, `status`, `plan`, fit verdicts, host notes) formats it
here, so unknown reads the same everywhere and a value that is not zero never reads as zero."""

from __future__ import annotations

NA = "n/a"


def pct(ratio: float | None, digits: int = 0) -> str:
    """A 0..1 ratio as a percentage; a small non-zero ratio reads "<1%" (KV 0.098 % is not idle)."""
    if ratio is None:
        return NA
    shown = f"{ratio * 100:.{digits}f}"
    if ratio > 0 and float(shown) == 0:
        return f"<{10**-digits:g}%"
    return f"{shown}%"


def num(value: float | None, digits: int = 0, unit: str = "") -> str:
    """A plain number with `digits` decimals, then `unit`; unknown is n/a (no unit)."""
    return NA if value is None else f"{value:.{digits}f}{unit}"


def seconds(value: float | None, digits: int = 1) -> str:
    """A duration: milliseconds under a second ("625ms"), seconds above ("6.7s")."""
    if value is None:
        return NA
    return f"{value * 1000:.0f}ms" if value < 1 else f"{value:.{digits}f}s"


def gib(value: float | None, digits: int = 1, unit: str = "") -> str:
    """Bytes in GiB, followed by `unit`; unknown is n/a (no unit), never 0."""
    return NA if value is None else f"{value / 2**30:.{digits}f}{unit}"
